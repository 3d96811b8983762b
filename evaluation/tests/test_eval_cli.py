"""The CLI's other paths end to end on the toy tasks: replaying a run's trajectories, grading
its predictions with `grade`, rebuilding the report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from deepswe.data.toy import make_toy_tasks, write_tasks
from deepswe.env.images.task import ensure_task_image

CLI = str(Path(sys.executable).with_name("deepswe-eval"))


def _run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=300, env=env)


@pytest.mark.docker
def test_replay_grade_and_report_agree_with_the_gold_run(tmp_path):
    tasks = make_toy_tasks(tmp_path / "src", n=2)
    data = write_tasks(tasks, tmp_path / "tasks.jsonl")
    ensure_task_image(tasks[0], log=lambda _: None)
    common = ["--dataset", str(data), "eval.workers=2", "eval.sandbox.memory=1g"]
    gold = tmp_path / "gold"
    assert _run("run", "eval.policy.name=gold", "--out", str(gold), *common).returncode == 0
    # replaying the gold trajectories through the real tools resolves the same tasks
    replay = tmp_path / "replay"
    res = _run(
        "run", "eval.policy.name=replay", "--replay-dir", str(gold), "--out", str(replay), *common
    )
    assert res.returncode == 0, res.stderr[-2000:]
    assert json.loads((replay / "metrics.json").read_text())["counts"] == {"resolved": 2}
    # a plugged-in policy by dotted path, with constructor arguments from eval.policy.args
    iid = tasks[0].instance_id
    recorded = tmp_path / "traj.json"
    record = json.loads((gold / "episodes" / iid / "run-0.json").read_text())
    recorded.write_text(json.dumps(record["trajectory"]))
    plug = tmp_path / "plug"
    res = _run(
        "run",
        "eval.policy.name=deepswe.env.policies.replay:ReplayPolicy",
        f"eval.policy.args.path={recorded}",
        "--ids",
        iid,
        "--out",
        str(plug),
        *common,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    assert json.loads((plug / "metrics.json").read_text())["counts"] == {"resolved": 1}
    assert json.loads((plug / "config.json").read_text())["eval"]["policy"]["args"] == {
        "path": str(recorded)
    }
    # the predictions file graded on its own, plus one empty patch: same verdicts
    preds = [json.loads(x) for x in (gold / "predictions/run-0.jsonl").read_text().splitlines()]
    preds[1]["model_patch"] = ""
    pfile = tmp_path / "preds.jsonl"
    pfile.write_text("".join(json.dumps(p) + "\n" for p in preds))
    res = _run(
        "grade", "--predictions", str(pfile), "--dataset", str(data), "--out", str(tmp_path / "g")
    )
    assert res.returncode == 0, res.stderr[-2000:]
    summary = json.loads((tmp_path / "g/summary.json").read_text())
    assert summary["counts"] == {"resolved": 1, "unresolved": 1}
    assert summary["resolved_ids"] == [preds[0]["instance_id"]]
    report = json.loads((tmp_path / "g" / preds[1]["instance_id"] / "report.json").read_text())
    assert report[preds[1]["instance_id"]]["resolved"] is False
    # `report` rebuilds the same metrics from disk
    before = json.loads((gold / "metrics.json").read_text())
    (gold / "metrics.json").unlink()
    (gold / "report.md").unlink()
    assert _run("report", str(gold)).returncode == 0
    assert json.loads((gold / "metrics.json").read_text()) == before
    assert "## Protocol card" in (gold / "report.md").read_text()


def test_a_task_strict_rules_refuse_is_unsupported_before_any_episode(tmp_path):
    """A runner strict rules cannot own (here a pipe) is said per task, with the reason, before
    any episode; the same task under SWE-bench's rules is prepared as usual."""
    from deepswe.eval.cli import prepare_tasks
    from deepswe.eval.config import EvalConfig

    task = make_toy_tasks(tmp_path, n=1)[0]
    spec = task.test_spec.model_copy(update={"command": task.test_spec.command + " | cat"})
    task = task.model_copy(update={"test_spec": spec})
    tasks, unsupported = prepare_tasks([task], EvalConfig())
    assert tasks == [task]
    assert "strict rules grade only" in unsupported[task.instance_id]
    assert prepare_tasks([task], EvalConfig(grading_rules="swebench"))[1] == {}


@pytest.mark.docker
def test_validate_keeps_going_past_a_task_it_cannot_grade(tmp_path):
    """One task strict rules refuse (its command is a pipe): recorded unsupported_env with the
    reason; the other graded; the exit says how many were not graded and where to look."""
    good, piped = make_toy_tasks(tmp_path / "src", n=2)
    spec = piped.test_spec.model_copy(update={"command": piped.test_spec.command + " | cat"})
    piped = piped.model_copy(update={"test_spec": spec})
    data = write_tasks([good, piped], tmp_path / "tasks.jsonl")
    res = _run("validate", "--dataset", str(data), "--out", str(tmp_path / "v"), "--no-tools")
    assert res.returncode == 1, res.stderr[-2000:]
    summary = json.loads(res.stdout[res.stdout.index("{") :])
    assert summary["passed"] == 1 and summary["failed"] == {}
    assert "strict rules grade only" in summary["unsupported"][piped.instance_id]
    assert "1 task(s) not graded here (unsupported_env)" in res.stderr
    assert "deepswe-eval envs --dataset" in res.stderr
    assert "0 failed, 0 undecided, 1 not graded here" in res.stderr
    # each phase's episode lines come under a header naming the phase (issue #45)
    gold = res.stderr.index("gold: the gold patch graded (every run must resolve), 2 task(s)")
    empty = res.stderr.index("empty: the empty patch graded (no run may resolve)")
    assert gold < empty


def test_a_config_value_is_set_one_way_and_an_old_flag_is_told_which(tmp_path):
    """Every config value is an override (`eval.runs=3`); the flags that once restated fields
    are refused in one line naming the override, before anything is read or written."""
    tiny = str(Path(__file__).resolve().parents[2] / "configs" / "tiny.yaml")
    out = str(tmp_path / "r")
    res = _run("run", "--config", tiny, "eval.runs=3", "eval.workers=1", "--out", out, "--dry-run")
    assert res.returncode == 0, res.stderr
    cfg = json.loads(res.stdout)
    assert (cfg["runs"], cfg["workers"]) == (3, 1)
    for verb, flag, override in [
        ("run", "--runs", "eval.runs=VALUE"),
        ("validate", "--workers=2", "eval.workers=VALUE"),
        ("health", "--sandbox", "eval.sandbox_backend=VALUE"),
    ]:
        res = _run(verb, "--out", str(tmp_path / "o"), flag, "2")
        assert res.returncode == 2 and override in res.stderr, res.stderr
        assert len(res.stderr.strip().splitlines()) == 1 and not (tmp_path / "o").exists()
