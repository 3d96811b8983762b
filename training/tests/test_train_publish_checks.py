"""Published numbers are the weights' own (#23): `deepswe-train publish` refuses an evaluation
that is incomplete, has infra errors, evaluated other weights or does not record which, unless
--force, and the card then says so; a push deletes what an earlier push left and the plan lacks;
the dataset lands before the model card naming it. Evaluation folders are written by
deepswe-eval's own writers (publish_runs.py); pushes go to the test Hub (hub_server.py), driven
by the unmodified huggingface_hub client."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import publish_runs as runs
import pytest
import yaml

from deepswe.eval.card import read_card
from deepswe.eval.metrics import compute_metrics
from deepswe.eval.store import RunStore, atomic_write_json


def _refusal(done: subprocess.CompletedProcess) -> str:
    """The one line a refused publish prints; nothing else on stderr, no traceback."""
    assert done.returncode == 1, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("publish: ") and "--force" in line
    return line


@pytest.fixture
def hub(tmp_path, hub_server):
    state, endpoint = hub_server
    runs.train_run(tmp_path)
    return state, runs.env(endpoint, tmp_path / "hf-home")


@pytest.fixture
def final(tmp_path) -> Path:
    return tmp_path / "train-run" / "final"


def test_an_incomplete_evaluation_is_refused_naming_how_to_finish_it(hub, tmp_path, final):
    """Before: an evaluation stopped after 3 of its 4 episodes put its Pass@1 (the missing one
    counted unresolved) in the card as the model's."""
    state, env = hub
    ev = runs.eval_run(tmp_path, final, missing=1)
    line = _refusal(runs.publish(tmp_path, env, "--push"))
    assert "incomplete: 3 of 4 episodes stored (2 tasks x 2 runs)" in line
    assert f"--out {ev}" in line and state.log == []  # refused before the Hub is touched


def test_an_evaluation_with_infra_errors_is_refused(hub, tmp_path, final):
    _, env = hub
    runs.eval_run(tmp_path, final, infra=1)
    line = _refusal(runs.publish(tmp_path, env))
    assert "1 episode(s) ended in infra_error" in line and "docker: sandbox died" in line
    assert "retry them" in line


def test_an_evaluation_of_other_weights_is_refused(hub, tmp_path):
    """Before: `make reproduce`'s eval/learning-sft, the SFT start's evaluation, was accepted
    as the trained model's. Here the evaluated weights are an earlier checkpoint's."""
    _, env = hub
    runs.eval_run(tmp_path, tmp_path / "train-run" / "checkpoints" / "step-000005" / "model")
    line = _refusal(runs.publish(tmp_path, env))
    assert "It evaluated other weights" in line and "step-000005" in line
    assert not (tmp_path / "stage" / "model-main" / "README.md").exists()


@pytest.mark.parametrize("root", [None, "Qwen/Qwen3-0.6B"], ids=["no-record", "hub-id-root"])
def test_an_evaluation_that_does_not_record_its_weights_is_refused(hub, tmp_path, root):
    """An endpoint that names no model, or one whose root is no folder here: no digest."""
    _, env = hub
    ev = runs.eval_run(tmp_path, Path(root) if root else None)
    card = json.loads((ev / "config.json").read_text())["served_weights"]
    assert card["digest"] is None and card["root"] == root
    line = _refusal(runs.publish(tmp_path, env))
    assert "The evaluation does not record what it evaluated" in line


def test_a_report_older_than_the_episodes_is_refused(hub, tmp_path, final):
    """metrics.json written before the last episodes landed (a resume without a report)."""
    _, env = hub
    ev = runs.eval_run(tmp_path, final)
    store = RunStore(ev)
    card = read_card(store)
    early = compute_metrics(store.records()[:3], card.instance_ids, card.runs)
    atomic_write_json(ev / "metrics.json", early)  # the report as it was at 3 of 4 episodes
    line = _refusal(runs.publish(tmp_path, env))
    assert "Its metrics.json does not match the stored episodes" in line
    assert f"deepswe-eval report {ev}" in line and "incomplete" not in line


def test_force_publishes_and_the_card_says_which_check_was_overridden(hub, tmp_path):
    state, env = hub
    runs.eval_run(
        tmp_path, tmp_path / "train-run" / "checkpoints" / "step-000005" / "model", infra=1
    )
    done = runs.publish(tmp_path, env, "--push", "--force")
    assert done.returncode == 0, done.stderr
    card = _download_card(env)
    body = card.split("## Evaluation", 1)[1].split("## Limits")[0]
    number, infra, weights = [p.strip() for p in body.split("\n\n") if p.strip()]
    assert "Pass@1 = 0.5000" in number  # 1 of 4 an infra error, counted unresolved
    assert infra.startswith('**Published with `--force` although the check "no infra errors"')
    assert "1 of its 4 stored episodes ended in infra_error" in infra
    assert weights.startswith('**Published with `--force` although the check "same weights"')
    assert "so the number is another checkpoint's" in weights
    (result,) = yaml.safe_load(card.split("---")[1])["model-index"][0]["results"]
    (metric,) = result["metrics"]  # the name the Hub shows beside the value
    assert metric["value"] == 0.5 and metric["name"].endswith(
        "; published with --force past: no infra errors, same weights)"
    )
    assert str(tmp_path) not in infra + weights  # the digests say it, no local path


def _download_card(env: dict) -> str:
    code = (
        "from huggingface_hub import hf_hub_download as d; "
        "print(open(d('tester/tiny-swe', 'README.md')).read())"
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    ).stdout


def _model_commits(state, rev: str) -> int:
    return sum(x == f"POST /api/models/tester/tiny-swe/commit/{rev}" for x in state.log)


def test_files_an_earlier_push_left_are_deleted_from_main_in_the_same_commit(hub, tmp_path, final):
    """Before: a re-export that dropped a file (a stale shard, an old tokenizer file) left it on
    main beside the new weights, for anyone loading the repo to pick up."""
    state, env = hub
    runs.eval_run(tmp_path, final)
    (final / "added_tokens.json").write_text("{}")
    first = runs.publish(tmp_path, env, "--push")
    assert first.returncode == 0, first.stderr
    repo = state.repos[("model", "tester/tiny-swe")]
    assert "added_tokens.json" in repo.commits[repo.branches["main"]]
    (final / "added_tokens.json").unlink()
    (final / "tokenizer.json").write_text('{"version": 2}')
    requests = len(state.log)
    plan = runs.publish(tmp_path, env)  # without --push the Hub is not read, and says so
    assert plan.returncode == 0 and "the Hub was not read" in plan.stdout
    assert len(state.log) == requests
    before, step = _model_commits(state, "main"), _model_commits(state, "step-000005")
    again = runs.publish(tmp_path, env, "--push")
    assert again.returncode == 0, again.stderr
    listed = [x for x in again.stdout.splitlines() if x.startswith("  delete ")]
    assert listed == ["  delete added_tokens.json  (on the Hub, not in this plan)"]
    files = repo.commits[repo.branches["main"]]
    assert "added_tokens.json" not in files and "tokenizer.json" in files
    assert _model_commits(state, "main") == before + 1  # the new file and the deletion together
    assert _model_commits(state, "step-000005") == step  # unchanged: nothing to add or delete


def test_the_dataset_is_pushed_before_the_model_card_that_names_it(hub, tmp_path, final):
    state, env = hub
    runs.eval_run(tmp_path, final)
    state.fail_commits = 1  # the first commit fails: it must be the dataset's
    failed = runs.publish(tmp_path, env, "--push")
    assert failed.returncode == 3 and "dataset tester/tiny-swe-trajectories" in failed.stderr
    assert "README.md" not in _files(state, "model", "main")
    done = runs.publish(tmp_path, env, "--push")
    assert done.returncode == 0, done.stderr
    commits = [x for x in state.log if "/commit/" in x]
    dataset = [i for i, x in enumerate(commits) if x.startswith("POST /api/datasets/")]
    main = [i for i, x in enumerate(commits) if x.endswith("/tiny-swe/commit/main")]
    assert dataset and main and max(dataset) < min(main)
    assert "datasets:\n- tester/tiny-swe-trajectories" in _download_card(env)
    assert RunStore(tmp_path / "eval-run").records()  # the run folder is left as it was


def _files(state, kind: str, rev: str) -> set[str]:
    repo = state.repos.get((kind, "tester/tiny-swe"))
    return set(repo.commits[repo.ref(rev)]) if repo else set()
