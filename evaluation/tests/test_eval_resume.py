"""`deepswe-eval run` killed with SIGKILL at random moments and started again: every (task, run)
ends up stored exactly once, nothing finished is redone, and the metrics are right."""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from deepswe.data.task import EnvironmentSpec
from deepswe.data.toy import make_toy_tasks, write_tasks
from deepswe.env.images.task import ensure_task_image
from deepswe.env.policies import PolicySpec
from deepswe.env.sandbox import SandboxLimits
from deepswe.env.sandbox.docker import client
from deepswe.eval.config import EvalConfig
from deepswe.eval.runner import run_all
from deepswe.eval.store import EpisodeStatus, RunStore

pytestmark = pytest.mark.docker
CLI = str(Path(sys.executable).with_name("deepswe-eval"))
KILLED_PIDS: list[int] = []


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    root = tmp_path_factory.mktemp("toy")
    tasks = make_toy_tasks(root, n=3)
    ensure_task_image(tasks[0], log=lambda _: None)  # one image serves all three
    return tasks, write_tasks(tasks, root / "tasks.jsonl")


def _cmd(data: Path, out: Path, policy: str, runs: int) -> list[str]:
    return [
        CLI,
        "run",
        "--dataset",
        str(data),
        f"eval.policy.name={policy}",
        f"eval.runs={runs}",
    ] + [
        "eval.workers=2",
        "--out",
        str(out),
        "eval.sandbox.memory=1g",
    ]


def _snapshot(out: Path) -> dict[str, str]:
    return {
        str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in (out / "episodes").glob("*/run-*.json")
    }


def _kill_and_resume(cmd: list[str], out: Path, total: int, kills: int, seed: int) -> list[int]:
    """Start `cmd` and SIGKILL its whole process group mid-run, `kills` times: each time once a
    random number (< total) of episodes is on disk, plus a random delay, so kills land during
    image checks, episodes and writes alike. Then run it to the end. Asserts that episodes
    finished before a kill are never rewritten or lost. Returns the counts seen at each kill."""
    rng = random.Random(seed)
    seen: list[int] = []
    kept: dict[str, str] = {}
    for i in range(kills):
        # kill i lands in the i-th slice of the run, so kills spread over its whole length
        lo, hi = i * total // (kills + 1), (i + 1) * total // (kills + 1)
        target = max(len(kept), rng.randint(lo, hi))
        if target >= total:
            break
        proc = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        deadline = time.monotonic() + 120
        while proc.poll() is None and len(_snapshot(out)) < target and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(rng.uniform(0.0, 0.8))
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            KILLED_PIDS.append(proc.pid)
        proc.wait()
        now = _snapshot(out)
        assert {k: now[k] for k in kept} == kept, "a finished episode was rerun or lost"
        seen.append(len(now))
        kept = now
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    final = _snapshot(out)
    assert {k: final[k] for k in kept} == kept
    print("episodes on disk at each kill:", seen, file=sys.stderr)
    return seen


def _check_run(out: Path, tasks, runs: int, rate: float) -> dict:
    expected = {f"episodes/{t.instance_id}/run-{k}.json" for t in tasks for k in range(runs)}
    assert set(_snapshot(out)) == expected  # exactly tasks x runs, none twice, none missing
    assert not list((out / "episodes").glob("*/.*.tmp"))
    m = json.loads((out / "metrics.json").read_text())
    assert m["complete"] and m["episodes_stored"] == len(tasks) * runs
    assert sum(m["counts"].values()) == len(tasks) * runs
    assert m["resolved_rate_per_run"] == [rate] * runs and m["pass@1_mean"] == rate
    preds = (out / "predictions" / "run-0.jsonl").read_text().splitlines()
    assert sorted(json.loads(p)["instance_id"] for p in preds) == sorted(
        t.instance_id for t in tasks
    )
    return m


def test_gold_run_survives_repeated_sigkill(toy, tmp_path):
    tasks, data = toy
    out = tmp_path / "gold"
    seen = _kill_and_resume(_cmd(data, out, "gold", 3), out, total=9, kills=3, seed=11)
    assert sum(n < 9 for n in seen) >= 2, f"kills did not land mid-run: {seen}"
    m = _check_run(out, tasks, 3, 1.0)
    assert m["counts"] == {"resolved": 9} and m["pass@k"] == {"1": 1.0, "2": 1.0, "3": 1.0}
    assert "| Pass@1 | 100.0% ± 0.0% |" in (out / "report.md").read_text()
    # the sandboxes the killed runs left behind were removed by the next start
    for pid in KILLED_PIDS:
        left = client().containers.list(all=True, filters={"label": f"deepswe.owner-pid={pid}"})
        assert not left, f"containers of killed run {pid} left behind: {[c.name for c in left]}"
    for png in ("pass_at_k.png", "per_repo.png", "steps_hist.png"):
        assert (out / png).read_bytes()[:4] == b"\x89PNG"


def test_empty_run_survives_sigkill_and_resolves_nothing(toy, tmp_path):
    tasks, data = toy
    out = tmp_path / "empty"
    _kill_and_resume(_cmd(data, out, "empty", 2), out, total=6, kills=1, seed=5)
    m = _check_run(out, tasks, 2, 0.0)
    assert m["counts"] == {"unresolved": 6}
    report = json.loads((out / "reports/run-1" / tasks[0].instance_id / "report.json").read_text())
    entry = report[tasks[0].instance_id]
    assert entry["patch_successfully_applied"] and not entry["resolved"]
    assert entry["tests_status"]["FAIL_TO_PASS"]["failure"] == list(tasks[0].hidden.fail_to_pass)


def test_infra_errors_are_retried_then_counted_not_unresolved(toy, tmp_path):
    tasks, _ = toy
    broken = tasks[1].model_copy(
        update={
            "instance_id": "toycalc__broken",
            "environment": EnvironmentSpec(source=str(tmp_path / "no-such-repo"), pip=["pytest"]),
        }
    )
    store = RunStore(tmp_path / "run")
    cfg = EvalConfig(
        policy=PolicySpec(name="empty"),
        runs=1,
        workers=2,
        infra_retries=1,
        sandbox=SandboxLimits(memory="1g"),
    )
    counts = run_all([tasks[0], broken], cfg, store)
    assert counts == {"unresolved": 1, "infra_error": 1}
    rec = {r.instance_id: r for r in store.records()}["toycalc__broken"]
    assert (rec.status, rec.attempts) == (EpisodeStatus.INFRA_ERROR, 2)
    assert "cannot clone" in rec.reason
