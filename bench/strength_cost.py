"""What test strength costs a task, in reward runs: strength seconds against gold's grade.

Reads a folder `deepswe-eval health --mutants K` wrote (OUT/strength/<id>.json: each task's
mutants, survivors, proof and seconds; OUT/gold/episodes/<id>/run-*.json: gold's graded runs) and
prints, per task set, strength seconds per task (median, mean, max) and the ratio to the named
baseline: one reward run of gold on the same task (its grade seconds in the health run, the
median of its rounds). A ratio of 5 means measuring the task's strength cost five gradings of
gold. Nothing is run: the seconds are those the health run measured (it says how: under load
or not, evaluation/README.md). With --run, `deepswe-eval health` is run first on the dataset
given (resumable), then read.

Run: .venv/bin/python bench/strength_cost.py OUT [OUT ...]
     .venv/bin/python bench/strength_cost.py --run --dataset swe-mini:test --limit 10 --mutants 4 OUT
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _gold_seconds(out: Path) -> dict[str, float]:
    """Per task, the median grade seconds of gold's runs in the health folder (its run store)."""
    from deepswe.eval.store import RunStore

    seconds: dict[str, list[float]] = {}
    for r in RunStore(out / "gold").records():
        if r.trajectory is not None and r.trajectory.grade_seconds:
            seconds.setdefault(r.instance_id, []).append(r.trajectory.grade_seconds)
    return {iid: statistics.median(s) for iid, s in seconds.items()}


def summarize(out: Path) -> dict:
    """Strength seconds and their ratio to gold's grade, over every task measured in `out`."""
    rows, golds = [], _gold_seconds(out)
    for path in sorted((out / "strength").glob("*.json")):
        strength = json.loads(path.read_text())["strength"]
        gold = golds.get(path.stem)
        rows.append((path.stem, float(strength.get("seconds") or 0.0), gold, strength))
    if not rows:
        raise SystemExit(f"{out}: no strength/*.json (run deepswe-eval health --mutants K there)")
    secs = [s for _, s, _, _ in rows]
    ratios = [s / g for _, s, g, _ in rows if g]
    return {
        "folder": str(out),
        "tasks": len(rows),
        "mutants": sum(r[3]["mutants"] for r in rows),
        "strength_s": {
            "median": round(statistics.median(secs), 1),
            "mean": round(statistics.mean(secs), 1),
            "max": round(max(secs), 1),
        },
        "ratio_to_gold_grade": {
            "median": round(statistics.median(ratios), 2) if ratios else None,
            "mean": round(statistics.mean(ratios), 2) if ratios else None,
            "tasks_with_gold": len(ratios),
        },
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="+", type=Path, help="health folders (OUT of deepswe-eval health)")
    ap.add_argument("--run", action="store_true", help="run deepswe-eval health there first")
    ap.add_argument("--dataset", default="swe-mini:test")
    ap.add_argument("--limit", type=int, default=10)
    ap.add_argument("--mutants", type=int, default=4)
    args = ap.parse_args()
    if args.run:
        health = [str(ROOT / ".venv" / "bin" / "deepswe-eval"), "health", "--rounds", "1"]
        for out in args.out:
            cmd = [*health, "--dataset", args.dataset, "--limit", str(args.limit)]
            cmd += ["--mutants", str(args.mutants), "--out", str(out)]
            print("$ " + " ".join(cmd), flush=True)
            if subprocess.run(cmd).returncode not in (0, 3):
                sys.exit(f"deepswe-eval health failed for {out}")
    print(
        "folder | tasks | mutants | strength s median / mean / max | x gold's grade, median / mean"
    )
    for out in args.out:
        s = summarize(out)
        t, r = s["strength_s"], s["ratio_to_gold_grade"]
        print(
            f"{out} | {s['tasks']} | {s['mutants']} | {t['median']} / {t['mean']} / {t['max']} | "
            f"{r['median']} / {r['mean']} (baseline: one gold grade, {r['tasks_with_gold']} tasks)"
        )


if __name__ == "__main__":
    main()
