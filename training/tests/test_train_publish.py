"""`deepswe-train publish` against a Hub-compatible test server (tests/hub_server.py) that the
unmodified huggingface_hub client drives over HTTP. Not proven here: the Xet upload path
(HF_HUB_DISABLE_XET=1) and the real Hub's own validation."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from deepswe.env.grading.outcomes import Outcome
from deepswe.env.trajectory import Ending, Trajectory
from deepswe.eval.metrics import compute_metrics
from deepswe.eval.store import EpisodeRecord, EpisodeStatus, RunStore

HERE = Path(__file__).resolve().parent
CLI = str(Path(sys.executable).with_name("deepswe-train"))
TOKEN = "hf_SENTINELtokenNEVERwritten0123456789"


def _train_run(root: Path) -> Path:
    run = root / "train-run"
    for folder, weights in ((run / "final", b"W" * 4096),
                            (run / "checkpoints" / "step-000005" / "model", b"V" * 2048)):  # fmt: skip
        folder.mkdir(parents=True)
        (folder / "config.json").write_text('{"model_type": "qwen3"}')
        (folder / "model.safetensors").write_bytes(weights)
        (folder / "tokenizer.json").write_text("{}")
        (folder / "optimizer.pt").write_bytes(b"not published")
    (run / "config.yaml").write_text("run: {name: t, steps: 5}\nmodel: {path: Qwen/Qwen3-32B}\n")
    (run / "metrics.jsonl").write_text('{"step": 1, "loss": 0.5}\n')
    return run


def _eval_run(root: Path) -> Path:
    store = RunStore(root / "eval-run")
    records = []
    for i in ("a__b-1", "a__b-2"):
        for k in (0, 1):
            ok = k == 0 or i == "a__b-1"
            traj = Trajectory(instance_id=i, policy="gold", messages=[{"role": "user", "content": "fix"}],
                              ending=Ending.SUBMITTED, patch="diff --git a/x b/x\n",
                              outcome=Outcome.RESOLVED if ok else Outcome.UNRESOLVED,
                              reward=1.0 if ok else 0.0)  # fmt: skip
            rec = EpisodeRecord(instance_id=i, run=k, repo="a/b", status=EpisodeStatus.GRADED,
                                outcome=traj.outcome, trajectory=traj)  # fmt: skip
            store.save(rec)
            records.append(rec)
    (store.root / "metrics.json").write_text(
        json.dumps(compute_metrics(records, ["a__b-1", "a__b-2"], 2))
    )
    (store.root / "config.json").write_text(
        json.dumps({"dataset": "swe-mini:test", "code_version": "abc"})
    )
    (store.root / "predictions").mkdir()
    (store.root / "predictions" / "run-0.jsonl").write_text('{"instance_id": "a__b-1"}\n')
    return store.root


def _env(endpoint: str, home: Path) -> dict:
    return {**os.environ, "HF_ENDPOINT": endpoint, "HF_TOKEN": TOKEN, "HF_HUB_DISABLE_XET": "1",
            "HF_HOME": str(home), "HF_HUB_DISABLE_TELEMETRY": "1"}  # fmt: skip


def _publish(tmp_path: Path, env: dict, *extra: str) -> subprocess.CompletedProcess:
    argv = [CLI, "publish", str(tmp_path / "train-run"), "--eval", str(tmp_path / "eval-run"),
            "--repo", "tester/tiny-swe", "--staging", str(tmp_path / "stage"), *extra]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)


@pytest.fixture
def hub(tmp_path):
    sys.path.insert(0, str(HERE))
    try:
        from hub_server import serve
    finally:
        sys.path.remove(str(HERE))
    server, state, endpoint = serve(TOKEN)
    _train_run(tmp_path), _eval_run(tmp_path)
    yield state, _env(endpoint, tmp_path / "hf-home")
    server.shutdown()


DOWNLOAD = """
import json, sys
from huggingface_hub import HfApi, hf_hub_download
api = HfApi()
out = {}
for repo, kind, rev in json.loads(sys.argv[1]):
    for f in api.repo_info(repo, repo_type=kind, revision=rev).siblings:
        out[f"{kind}:{repo}@{rev}:{f.rfilename}"] = hf_hub_download(repo, f.rfilename, repo_type=kind, revision=rev)
print(json.dumps(out))
"""


def test_plan_without_push_lists_every_file_and_pushes_nothing(hub, tmp_path):
    state, env = hub
    done = _publish(tmp_path, env)
    assert done.returncode == 0, done.stderr
    assert "not pushed" in done.stdout and state.log == []
    assert "model tester/tiny-swe @ main" in done.stdout and "@ step-000005" in done.stdout
    assert "dataset tester/tiny-swe-trajectories @ main" in done.stdout
    assert "model.safetensors  4096" in done.stdout and "lfs" in done.stdout
    assert "optimizer.pt" not in done.stdout
    import pyarrow.parquet as pq

    rows = pq.read_table(
        tmp_path / "stage" / "dataset-main" / "data" / "episodes.parquet"
    ).to_pylist()
    assert len(rows) == 4 and {r["outcome"] for r in rows} == {"resolved", "unresolved"}


def test_push_round_trips_byte_for_byte_then_a_second_push_is_a_no_op(hub, tmp_path):
    state, env = hub
    first = _publish(tmp_path, env, "--push")
    assert first.returncode == 0, first.stderr
    plan = [("tester/tiny-swe", "model", "main"), ("tester/tiny-swe", "model", "step-000005"),
            ("tester/tiny-swe-trajectories", "dataset", "main")]  # fmt: skip
    got = subprocess.run([sys.executable, "-c", DOWNLOAD, json.dumps(plan)], capture_output=True,
                         text=True, env=env, check=True)  # fmt: skip
    paths = json.loads(got.stdout)
    stage = {"model:tester/tiny-swe@main": "model-main", "dataset:tester/tiny-swe-trajectories@main":
             "dataset-main", "model:tester/tiny-swe@step-000005": "model-step-000005"}  # fmt: skip
    compared = 0
    for key, local in paths.items():
        where, name = key.rsplit(":", 1)
        if name == ".gitattributes":
            continue
        assert Path(local).read_bytes() == (tmp_path / "stage" / stage[where] / name).read_bytes()
        compared += 1
    assert compared >= 12 and "model:tester/tiny-swe@main:logs/metrics.jsonl" in paths
    card = (tmp_path / "stage" / "model-main" / "README.md").read_text()
    assert "model-index" in card and "value: 0.75" in card  # (2/2 + 1/2) / 2 runs

    commits = sum(line.endswith("/commit/main") for line in state.log)
    second = _publish(tmp_path, env, "--push")
    assert second.returncode == 0, second.stderr
    assert sum(line.endswith("/commit/main") for line in state.log) == commits
    assert not [line for line in state.log if line.startswith("PUT")][len(state.blobs) :]

    outputs = [first.stdout, first.stderr, second.stdout, second.stderr]
    outputs += [p.read_text(errors="replace") for p in tmp_path.rglob("*") if p.is_file()
                and "hf-home" not in p.parts]  # fmt: skip
    assert not [o for o in outputs if TOKEN in o]


def test_an_interrupted_push_resumes_uploading_only_what_is_missing(hub, tmp_path):
    state, env = hub
    state.fail_commits = 1
    failed = _publish(tmp_path, env, "--push")
    assert failed.returncode == 3 and "publish:" in failed.stderr and "pushed" not in failed.stdout
    puts = [line for line in state.log if line.startswith("PUT")]
    assert puts  # the weights reached LFS before the commit failed
    again = _publish(tmp_path, env, "--push")
    assert again.returncode == 0, again.stderr
    all_puts = [line for line in state.log if line.startswith("PUT")]
    assert len(all_puts) == len(set(all_puts))  # nothing uploaded twice
    assert "pushed model tester/tiny-swe@main" in again.stdout


def test_a_wrong_token_is_one_line_naming_what_to_do(hub, tmp_path):
    _, env = hub
    done = _publish(tmp_path, {**env, "HF_TOKEN": "hf_wrong"}, "--push")
    assert done.returncode == 3 and "401" in done.stderr and "HF_TOKEN" in done.stderr
    assert "Traceback" not in done.stderr


def test_tiny_weights_under_a_full_reproduction_name_are_refused_unless_forced(hub, tmp_path):
    _, env = hub
    argv = [CLI, "publish", str(tmp_path / "train-run"), "--repo", "me/DeepSWE-Preview-repro",
            "--staging", str(tmp_path / "s2")]  # fmt: skip
    refused = subprocess.run(argv, capture_output=True, text=True, env=env)
    assert refused.returncode == 1 and "--force" in refused.stderr
    forced = subprocess.run([*argv, "--force"], capture_output=True, text=True, env=env)
    assert forced.returncode == 0 and "not pushed" in forced.stdout


def test_a_partial_checkpoint_is_refused_before_anything_is_staged(hub, tmp_path):
    _, env = hub
    final = tmp_path / "train-run" / "final"
    (final / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"a": "model-00001-of-00002.safetensors"}})
    )
    done = _publish(tmp_path, env)
    assert done.returncode == 1 and "partial checkpoint" in done.stderr
