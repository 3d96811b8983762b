"""`deepswe-train publish` against a Hub-compatible test server (tests/hub_server.py) that the
unmodified huggingface_hub client drives over HTTP. Not proven here: the Xet upload path
(HF_HUB_DISABLE_XET=1) and the real Hub's own validation.

The first tests use small run folders (publish_runs.py: a hand-made training run; an evaluation
written by deepswe-eval's own writers) that are fast and reach every branch of the code; the
last two publish folders written by the real trainer and by `deepswe-eval run`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import publish_runs as runs
import pytest

from deepswe.train.publish.stage import MODEL_FILES

CLI = runs.CLI
_publish = runs.publish


def _download(env: dict, revisions: list[tuple[str, str, str]]) -> dict[str, Path]:
    """Every file of each (repo, kind, revision), downloaded by the client: 'kind:repo@rev:path'."""
    got = subprocess.run(
        [sys.executable, "-c", DOWNLOAD, json.dumps(revisions)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return {k: Path(v) for k, v in json.loads(got.stdout).items()}


def _files(state, kind: str, repo: str, rev: str) -> set[str]:
    r = state.repos[(kind, repo)]
    return set(r.commits[r.ref(rev)])


def _commits(state, rev: str = "") -> int:
    """Commit requests the server answered so far (to `rev` only, when given)."""
    return sum(
        "/commit/" in line and line.endswith(f"/commit/{rev}" if rev else "") for line in state.log
    )


@pytest.fixture
def hub(tmp_path, hub_server):
    """The test Hub, a training run and its model's complete evaluation (publish_runs.py)."""
    state, endpoint = hub_server
    train = runs.train_run(tmp_path)
    runs.eval_run(tmp_path, train / "final")
    return state, runs.env(endpoint, tmp_path / "hf-home")


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
    state.multipart_chunk = 3000  # the 4096-byte weights go multipart (2 parts), the rest not
    first = _publish(tmp_path, env, "--push")
    assert first.returncode == 0, first.stderr
    assert [x for x in state.log if x.startswith("PUT /lfs-part/")][1:2]
    assert [x for x in state.log if x.startswith("POST /lfs-complete/")]
    assert [x for x in state.log if x.startswith("PUT /lfs-upload/")]
    plan = [
        ("tester/tiny-swe", "model", "main"),
        ("tester/tiny-swe", "model", "step-000005"),
        ("tester/tiny-swe-trajectories", "dataset", "main"),
    ]
    paths = _download(env, plan)
    stage = {
        "model:tester/tiny-swe@main": "model-main",
        "dataset:tester/tiny-swe-trajectories@main": "dataset-main",
        "model:tester/tiny-swe@step-000005": "model-step-000005",
    }
    compared = 0
    for key, local in paths.items():
        where, name = key.rsplit(":", 1)
        if name == ".gitattributes":
            continue
        assert local.read_bytes() == (tmp_path / "stage" / stage[where] / name).read_bytes()
        compared += 1
    assert compared >= 12 and "model:tester/tiny-swe@main:logs/metrics.jsonl" in paths
    card = (tmp_path / "stage" / "model-main" / "README.md").read_text()
    assert "model-index" in card and "value: 0.75" in card  # (2/2 + 1/2) / 2 runs

    commits, puts = _commits(state), [x for x in state.log if x.startswith("PUT")]
    second = _publish(tmp_path, env, "--push")
    assert second.returncode == 0, second.stderr
    assert _commits(state) == commits  # no commit to main, to the step branch or the dataset
    assert [x for x in state.log if x.startswith("PUT")] == puts

    outputs = [first.stdout, first.stderr, second.stdout, second.stderr]
    outputs += [
        p.read_text(errors="replace")
        for p in tmp_path.rglob("*")
        if p.is_file() and "hf-home" not in p.parts
    ]
    assert not [o for o in outputs if runs.TOKEN in o]


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
    argv = [
        CLI,
        "publish",
        str(tmp_path / "train-run"),
        "--repo",
        "me/DeepSWE-Preview-repro",
        "--staging",
        str(tmp_path / "s2"),
    ]
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


PRIVATE = """
from huggingface_hub import hf_hub_download
from huggingface_hub.errors import RepositoryNotFoundError
for repo, kind in (("tester/tiny-swe", "model"), ("tester/tiny-swe-trajectories", "dataset")):
    try:
        hf_hub_download(repo, "README.md", repo_type=kind, token=False)
        print("visible without the token")
    except RepositoryNotFoundError as err:
        print("hidden", err.response.status_code)
    print(len(open(hf_hub_download(repo, "README.md", repo_type=kind), "rb").read()) > 0)
"""


def test_private_repos_are_hidden_without_the_token_and_never_made_public(hub, tmp_path):
    state, env = hub
    done = _publish(tmp_path, env, "--push", "--private")
    assert done.returncode == 0, done.stderr
    assert state.repos[("model", "tester/tiny-swe")].private
    assert state.repos[("dataset", "tester/tiny-swe-trajectories")].private
    seen = subprocess.run(
        [sys.executable, "-c", PRIVATE], capture_output=True, text=True, env=env, check=True
    ).stdout.split()
    assert seen == ["hidden", "401", "True"] * 2
    # --private never pushes into a repo that already exists and is public
    state.repos[("model", "tester/tiny-swe")].private = False
    (tmp_path / "train-run" / "metrics.jsonl").write_text('{"step": 2, "loss": 0.1}\n')
    commits = _commits(state)
    refused = _publish(tmp_path, env, "--push", "--private")
    assert refused.returncode == 3 and "is public" in refused.stderr
    assert "already pushed" not in refused.stderr  # refused while reading, before any commit
    assert _commits(state) == commits


def test_create_pr_opens_a_pull_request_per_revision_and_leaves_the_branches_alone(hub, tmp_path):
    state, env = hub
    done = _publish(tmp_path, env, "--push", "--create-pr")
    assert done.returncode == 0, done.stderr
    prs = dict(
        line.split(": pull request ")
        for line in done.stdout.splitlines()
        if ": pull request " in line
    )
    assert set(prs) == {
        "pushed model tester/tiny-swe@step-000005",
        "pushed model tester/tiny-swe@main",
        "pushed dataset tester/tiny-swe-trajectories@main",
    }
    main_pr = prs["pushed model tester/tiny-swe@main"].split()
    assert main_pr[0] == "refs/pr/2" and main_pr[1].endswith("/tester/tiny-swe/discussions/2")
    for kind, repo, rev in (
        ("model", "tester/tiny-swe", "main"),
        ("model", "tester/tiny-swe", "step-000005"),
        ("dataset", "tester/tiny-swe-trajectories", "main"),
    ):
        assert _files(state, kind, repo, rev) == {".gitattributes"}  # nothing merged
    paths = _download(env, [("tester/tiny-swe", "model", "refs/pr/2")])
    staged = {
        p.relative_to(tmp_path / "stage" / "model-main").as_posix(): p
        for p in (tmp_path / "stage" / "model-main").rglob("*")
        if p.is_file()
    }
    got = {k.rsplit(":", 1)[1]: v for k, v in paths.items()}
    assert set(got) == set(staged) | {".gitattributes"}
    assert all(got[name].read_bytes() == p.read_bytes() for name, p in staged.items())


def test_step_branches_hold_exactly_their_checkpoint_and_are_never_rewritten(hub, tmp_path):
    """A branch made after main was published starts from main: without deletions step-N
    carried main's card, logs and final weights' companions."""
    state, env = hub
    assert _publish(tmp_path, env, "--push").returncode == 0
    step5 = state.repos[("model", "tester/tiny-swe")].branches["step-000005"]
    ckpts = tmp_path / "train-run" / "checkpoints"
    (ckpts / "step-000005").rename(ckpts / "step-000010")  # keep_checkpoints pruned step 5
    (ckpts / "step-000010" / "model" / "model.safetensors").write_bytes(b"X" * 2048)
    commits5 = _commits(state, "step-000005")
    again = _publish(tmp_path, env, "--push")
    assert again.returncode == 0, again.stderr
    assert "step-000005" not in again.stdout and _commits(state, "step-000005") == commits5
    assert state.repos[("model", "tester/tiny-swe")].branches["step-000005"] == step5
    assert _files(state, "model", "tester/tiny-swe", "step-000010") == {
        ".gitattributes",
        "config.json",
        "model.safetensors",
        "tokenizer.json",
    }
    paths = _download(env, [("tester/tiny-swe", "model", "step-000010")])
    for key, local in paths.items():
        name = key.rsplit(":", 1)[1]
        if name != ".gitattributes":
            assert local.read_bytes() == (ckpts / "step-000010" / "model" / name).read_bytes()


def test_a_commit_by_someone_else_during_the_push_is_refused_and_a_rerun_builds_on_it(
    hub, tmp_path
):
    """The rerun commits on top of the other writer's commit; main then holds exactly the
    plan, so the other writer's file is listed as deleted before it is."""
    state, env = hub
    # lands on the model's main after the client read its head, before the commit
    state.intrude, state.intrude_repo = "NOTES.md", "tester/tiny-swe"
    raced = _publish(tmp_path, env, "--push")
    assert raced.returncode == 3
    (error,) = [x for x in raced.stderr.splitlines() if x.startswith("publish:")]  # one line
    assert "changed on the Hub" in error and "rerun" in error and "Traceback" not in raced.stderr
    assert (
        "already pushed: dataset tester/tiny-swe-trajectories@main, "
        "model tester/tiny-swe@step-000005"
    ) in error
    assert "pushed model tester/tiny-swe@main" not in raced.stdout
    assert _files(state, "model", "tester/tiny-swe", "main") == {".gitattributes", "NOTES.md"}
    again = _publish(tmp_path, env, "--push")
    assert again.returncode == 0, again.stderr
    assert "  delete NOTES.md" in again.stdout
    main = _files(state, "model", "tester/tiny-swe", "main")
    assert {"config.json", "README.md"} <= main and "NOTES.md" not in main


def _text_profile(model: Path) -> dict:
    """The trainer's CPU test environment (`text` source: the real tiny model, real sampling)."""
    return {
        "run": {
            "seed": 7,
            "steps": 3,
            "save_every": 1,
            "keep_checkpoints": 2,
            "tensorboard": False,
        },
        "model": {"path": str(model)},
        "data": {"source": "text", "text": {"target": "s"}},
        "rollout": {
            "tasks_per_step": 2,
            "group_size": 2,
            "concurrency": 2,
            "max_tokens_per_turn": 4,
        },
        "backend": {"optim": {"lr": 1e-2, "micro_batch_size": 2}},
    }


LOAD = """
import sys
from transformers import AutoModelForCausalLM, AutoTokenizer
model = AutoModelForCausalLM.from_pretrained(sys.argv[1])
AutoTokenizer.from_pretrained(sys.argv[1])
print(sum(p.numel() for p in model.parameters()))
"""


def test_a_run_folder_written_by_deepswe_train_train_publishes_and_loads_back(hub, tmp_path):
    """The folder `deepswe-train train` writes (config.yaml, metrics.jsonl, checkpoints/step-N/
    with keep_checkpoints pruning, final/, trajectories/), published alone: main is final/,
    each kept checkpoint a branch, and the downloaded model loads with transformers."""
    import yaml

    from deepswe.train.models import build_test_model

    state, env = hub
    profile = tmp_path / "profile.yaml"
    profile.write_text(yaml.safe_dump(_text_profile(build_test_model(tmp_path / "base"))))
    run = tmp_path / "real-train"
    trained = subprocess.run(
        [CLI, "train", "--config", str(profile), "--out", str(run)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**env, "OMP_NUM_THREADS": "1"},
    )
    assert trained.returncode == 0, trained.stderr[-2000:]
    assert (run / "trajectories" / "step-000003.jsonl").is_file()
    kept = sorted(p.name for p in (run / "checkpoints").glob("step-*"))
    assert kept == ["step-000002", "step-000003"]  # step 1 pruned by keep_checkpoints=2
    argv = [CLI, "publish", str(run), "--repo", "tester/tiny-text", "--push"]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (
        "step-000001" not in done.stdout
        and "model-index" not in (run / "publish" / "model-main" / "README.md").read_text()
    )
    revs = [("tester/tiny-text", "model", r) for r in ["main", *kept]]
    paths = _download(env, revs)
    local = {"main": run / "final", **{k: run / "checkpoints" / k / "model" for k in kept}}
    logs = {"logs/metrics.jsonl": run / "metrics.jsonl", "logs/config.yaml": run / "config.yaml"}
    for rev, folder in local.items():
        got = {k.rsplit(":", 1)[1]: v for k, v in paths.items() if f"@{rev}:" in k}
        want = {p.name: p for p in folder.iterdir() if MODEL_FILES.fullmatch(p.name)}
        want |= logs if rev == "main" else {}
        assert set(got) - {".gitattributes", "README.md"} == set(want), rev
        assert {"config.json", "model.safetensors", "tokenizer.json"} <= set(want)
        assert all(got[name].read_bytes() == p.read_bytes() for name, p in want.items()), rev
    snapshot = paths["model:tester/tiny-text@main:config.json"].parent
    loaded = subprocess.run(
        [sys.executable, "-c", LOAD, str(snapshot)],
        capture_output=True,
        text=True,
        env={**env, "HF_HUB_OFFLINE": "1"},
    )
    assert loaded.returncode == 0 and int(loaded.stdout.split()[-1]) > 0, loaded.stderr[-2000:]


@pytest.mark.docker
def test_an_evaluation_folder_written_by_deepswe_eval_run_publishes_as_a_dataset(hub, tmp_path):
    """`deepswe-eval run eval.policy.name=gold` on the toy tasks (2 tasks x 2 runs, Docker): one parquet
    row per episode, one SWE-bench predictions file per run, the report and plots; and its
    numbers are refused in a model card, gold being no model."""
    import pyarrow.parquet as pq

    from deepswe.data.toy import make_toy_tasks, write_tasks
    from deepswe.env.images.task import ensure_task_image

    state, env = hub
    tasks = make_toy_tasks(tmp_path / "src", n=2)
    data = write_tasks(tasks, tmp_path / "tasks.jsonl")
    ensure_task_image(tasks[0], log=lambda _: None)
    ev = tmp_path / "real-eval"
    argv = [
        str(Path(sys.executable).with_name("deepswe-eval")),
        "run",
        "eval.policy.name=gold",
        "eval.runs=2",
        "--dataset",
        str(data),
        "eval.workers=2",
        "eval.sandbox.memory=1g",
        "--out",
        str(ev),
    ]
    ran = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr[-2000:]
    argv = [CLI, "publish", "--eval", str(ev), "--dataset-repo", "tester/toy-gold", "--push"]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    paths = _download(env, [("tester/toy-gold", "dataset", "main")])
    got = {k.rsplit(":", 1)[1]: v for k, v in paths.items()}
    for name in (
        "metrics.json",
        "report.md",
        "config.json",
        "predictions/run-0.jsonl",
        "predictions/run-1.jsonl",
        *[p.name for p in ev.glob("*.png")],
    ):
        assert got[name].read_bytes() == (ev / name).read_bytes(), name
    rows = pq.read_table(got["data/episodes.parquet"]).to_pylist()
    assert sorted((r["instance_id"], r["run"]) for r in rows) == sorted(
        (t.instance_id, k) for t in tasks for k in (0, 1)
    )
    assert {r["outcome"] for r in rows} == {"resolved"} and all(r["patch"] for r in rows)
    for k in (0, 1):
        preds = [json.loads(x) for x in got[f"predictions/run-{k}.jsonl"].read_text().splitlines()]
        assert [set(p) for p in preds] == [{"instance_id", "model_name_or_path", "model_patch"}] * 2
        assert len({p["instance_id"] for p in preds}) == 2  # SWE-bench keys a file by instance
    card = got["README.md"].read_text()
    assert "config_name: predictions" in card and "split: run_1" in card
    with_model = subprocess.run(
        [
            CLI,
            "publish",
            str(tmp_path / "train-run"),
            "--eval",
            str(ev),
            "--repo",
            "tester/tiny-swe",
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert with_model.returncode == 1 and "'gold' policy, not this model" in with_model.stderr
