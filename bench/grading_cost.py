"""What the grader's defences cost: gold patches graded by this tree's grader against the same
patches graded by a named earlier revision's (the baseline), on real swe-mini task images.

Baseline: the grader at --baseline (default 3d0b181, the last commit before issue #32's
defences: no patch checks, tests as root, no canaries or integrity checks, no static gate),
checked out with `git worktree` and imported from there in a child process. Both sides grade
the same tasks' gold patches (`deepswe.env.episode.grade_patch`, strict rules, the task's own
image, which must be built: `deepswe-env build --tasks swe-mini`), task by task in alternating
order, so machine load falls on both alike. Prints seconds per grade (median and mean over all grades)
for each side and the ratio this tree / baseline (1.00 = the same; the target is at most 1.10),
and checks both sides agree on every verdict.

Run: .venv/bin/python bench/grading_cost.py [--tasks 12] [--rounds 3] [--baseline REV]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUBPROJECTS = ("data", "environments", "evaluation", "verifiers", "training", "reproduce")


def _measure() -> None:
    """In the child: grade the gold of each task id read from stdin, one JSON line each."""
    from deepswe.data.datasets import load_tasks
    from deepswe.env.episode import grade_patch

    tasks = {t.instance_id: t for t in load_tasks("swe-mini")}
    for line in sys.stdin:
        task = tasks[line.strip()]
        start = time.monotonic()
        run = grade_patch(task, task.gold_patch or "")
        seconds = time.monotonic() - start
        out = {"id": task.instance_id, "s": seconds, "outcome": run.grade.outcome.value}
        print(json.dumps(out), flush=True)


class _Side:
    """A child process grading with the grader under `src_root` (its src folders first)."""

    def __init__(self, src_root: Path) -> None:
        paths = [str(src_root / s / "src") for s in SUBPROJECTS]
        here = str(Path(__file__).resolve())
        code = (
            f"import sys; sys.path[:0] = {paths!r}; sys.argv = ['grading_cost', '--child']; "
            f"f = {here!r}; "
            "exec(compile(open(f).read(), f, 'exec'), {'__name__': '__main__', '__file__': f})"
        )
        self.root = src_root
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )

    def grade(self, iid: str) -> dict:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(iid + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"grading under {self.root} failed (exit {self.proc.wait()})")
        return json.loads(line)

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait()


def _pick(n: int) -> list[str]:
    """n swe-mini tasks spread over its projects (round robin over repositories)."""
    from deepswe.data.datasets import load_tasks

    by_repo: dict[str, list[str]] = {}
    for t in sorted(load_tasks("swe-mini"), key=lambda t: t.instance_id):
        by_repo.setdefault(t.repo, []).append(t.instance_id)
    picked: list[str] = []
    while len(picked) < n and any(by_repo.values()):
        for ids in by_repo.values():
            if ids and len(picked) < n:
                picked.append(ids.pop(0))
    return picked


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _measure()
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--baseline", default="3d0b181")
    args = ap.parse_args()
    ids = _pick(args.tasks)
    results: dict[str, list[dict]] = {"baseline": [], "this tree": []}
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "baseline"
        subprocess.run(
            ["git", "worktree", "add", "-q", "--detach", str(base), args.baseline],
            cwd=ROOT,
            check=True,
        )
        sides = {"baseline": _Side(base), "this tree": _Side(ROOT)}
        try:
            for k in range(args.rounds):
                for n, iid in enumerate(ids):
                    # task by task, the order alternating: load falls on both sides alike
                    order = list(sides) if (n + k) % 2 == 0 else list(sides)[::-1]
                    for side in order:
                        results[side].append(sides[side].grade(iid))
                print(f"round {k + 1}/{args.rounds} done", file=sys.stderr, flush=True)
        finally:
            for side in sides.values():
                side.close()
            subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=ROOT)
    verdicts = {side: {(r["id"], r["outcome"]) for r in rs} for side, rs in results.items()}
    med = {side: statistics.median(r["s"] for r in rs) for side, rs in results.items()}
    mean = {side: statistics.fmean(r["s"] for r in rs) for side, rs in results.items()}
    print(f"{len(ids)} swe-mini gold patches x {args.rounds} rounds, baseline {args.baseline}\n")
    print("| grader | grades | median s | mean s | ratio (median) | ratio (mean) |")
    print("|---|---:|---:|---:|---:|---:|")
    for side, rs in results.items():
        print(
            f"| {side} | {len(rs)} | {med[side]:.2f} | {mean[side]:.2f} | "
            f"{med[side] / med['baseline']:.2f} | {mean[side] / mean['baseline']:.2f} |"
        )
    same = verdicts["baseline"] == verdicts["this tree"]
    print(f"\nverdicts equal on every task: {'yes' if same else 'NO'}")
    for side, v in verdicts.items():
        print(f"  {side}: " + ", ".join(sorted({o for _, o in v})))


if __name__ == "__main__":
    main()
