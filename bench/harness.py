"""Evaluation-harness throughput against the worker count, and where an episode's time goes.

Runs the gold policy over the toy dataset (deepswe.data.toy: real bugs in a real git repo, one
shared task image) with `deepswe.eval.runner.run_all` at workers = 1, 2, 4, and prints
episodes per minute with ratios against the named baseline, workers=1 (above 1 = faster).

Time shares per episode (means over the episodes of a setting):
  container start  DockerSandbox construction, measured alone (median of --starts), x2 per
                   episode (the agent's sandbox and the grader's fresh one)
  agent loop       Trajectory.wall_seconds (tools + policy, after the sandbox is up)
  test run+grade   Trajectory.grade_seconds minus one container start
  other            episode wall time (record finished - started) minus the above
Run: .venv/bin/python bench/harness.py [--runs 3] [--workers 1 2 4] [--starts 5]
"""

from __future__ import annotations

import argparse
import io
import statistics
import tempfile
import time
from pathlib import Path

from rich.console import Console

from deepswe.data.toy import make_toy_tasks
from deepswe.env.images.task import ensure_task_image
from deepswe.env.policies import PolicySpec
from deepswe.env.sandbox import SandboxLimits
from deepswe.env.sandbox.docker import DockerSandbox
from deepswe.eval.config import EvalConfig
from deepswe.eval.runner import run_all
from deepswe.eval.store import RunStore

LIMITS = SandboxLimits(memory="1g", pids=256)


def container_start_seconds(image: str, n: int) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        sb = DockerSandbox(image, LIMITS)
        times.append(time.perf_counter() - t0)
        sb.close()
    return statistics.median(times)


def one_setting(tasks, runs: int, workers: int, start_s: float, root: Path) -> dict:
    store = RunStore(root / f"w{workers}")
    cfg = EvalConfig(policy=PolicySpec(name="gold"), runs=runs, workers=workers, sandbox=LIMITS)
    quiet = Console(file=io.StringIO())
    t0 = time.perf_counter()
    counts = run_all(tasks, cfg, store, console=quiet)
    wall = time.perf_counter() - t0
    recs = store.records()
    assert sum(counts.values()) == len(tasks) * runs, counts
    per_ep = statistics.fmean(r.finished_at - r.started_at for r in recs)
    loop = statistics.fmean(r.trajectory.wall_seconds for r in recs)
    grade = statistics.fmean(r.trajectory.grade_seconds for r in recs)
    start = 2 * start_s
    shares = {
        "container start": start,
        "agent loop": loop,
        "test run+grade": max(0.0, grade - start_s),
        "other": max(0.0, per_ep - loop - grade - start_s),
    }
    return {
        "workers": workers,
        "episodes": len(recs),
        "resolved": counts.get("resolved", 0),
        "wall": wall,
        "epm": 60 * len(recs) / wall,
        "per_episode": per_ep,
        "shares": {k: v / per_ep for k, v in shares.items()},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3, help="runs per task (4 toy tasks)")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--starts", type=int, default=5, help="sandbox starts timed alone")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-harness-") as tmp:
        root = Path(tmp)
        tasks = make_toy_tasks(root / "src", n=4)
        image = ensure_task_image(tasks[0], log=lambda _: None)
        start_s = container_start_seconds(image, args.starts)
        print(f"container start (DockerSandbox, alone, median of {args.starts}): {start_s:.2f} s")
        results = [one_setting(tasks, args.runs, w, start_s, root) for w in args.workers]
    base = results[0]
    print(
        f"\nbaseline: workers={base['workers']}; {len(tasks)} tasks x {args.runs} runs, gold policy"
    )
    print(
        f"{'workers':>7} {'episodes':>8} {'wall s':>7} {'ep/min':>7} {'x base':>7} {'s/episode':>9} "
        "  start  loop  test+grade  other"
    )
    for r in results:
        s = r["shares"]
        print(
            f"{r['workers']:>7} {r['episodes']:>8} {r['wall']:>7.1f} {r['epm']:>7.1f} "
            f"{r['epm'] / base['epm']:>7.2f} {r['per_episode']:>9.2f}   "
            f"{s['container start']:>5.0%} {s['agent loop']:>5.0%} {s['test run+grade']:>11.0%} {s['other']:>6.0%}"
        )
    print("\nx base = episodes per minute / workers=1's. Shares are of the mean episode wall time.")


if __name__ == "__main__":
    main()
