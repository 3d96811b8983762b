"""Published numbers are the weights' own (#23): `deepswe-train publish` refuses an evaluation
that is incomplete, has infra errors, evaluated other weights or does not record which, unless
--force, and the card then says so. Evaluation folders are written by deepswe-eval's own writers
(publish_runs.py); pushes go to the test Hub (hub_server.py), driven by the unmodified
huggingface_hub client."""

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
    runs.eval_run(tmp_path, tmp_path / "train-run" / "checkpoints" / "step-000005" / "model",
                  infra=1)  # fmt: skip
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
    code = ("from huggingface_hub import hf_hub_download as d; "
            "print(open(d('tester/tiny-swe', 'README.md')).read())")  # fmt: skip
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, check=True).stdout  # fmt: skip
