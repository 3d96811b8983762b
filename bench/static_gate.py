"""False-positive rates of the static gate (deepswe.env.grading.static_gate) on real fixes: every
gold patch of each task set scanned as if an agent had submitted it, every file but the task's
graded ones read (`hidden_tests.graded_paths`: what the grader puts back before the run), as grading
reads it.

Baseline: the gold patches themselves, which are legitimate by definition, so every tier-1
finding without the exemption is an honest patch the gate would refuse were it not the task's
own gold (target 0 outside a test tool's own repository, e.g. pytest-dev/pytest rows of
Verified), and the tier-2 rate is how often ordinary fixes would be flagged. "tier-1, gold
exempt" scans each gold with itself as the gold (scan_patch(gold, gold)): 0 by construction,
printed as a check of the exemption, not a measurement. "test patch" scans each task's test
patch as if the agent had written those tests (nothing graded): honest test code, which must
raise no tier-1 finding either (rate among the tasks that have a test patch; swe-mini has none:
its graded tests ship with the repository).

Task sets: swe-mini (always, data/swe-mini/tasks.jsonl via load_tasks) and SWE-bench Verified
when $DEEPSWE_VERIFIED_PARQUET names the Hugging Face dataset's parquet (read with
deepswe.data's SWE-bench loader, test patches included). `--tests-from DIR` adds every test
file under DIR (`is_test_path`, relative to DIR) scanned as a new file: honest test code at
scale (a virtual environment's site-packages ships thousands). Rates are the share of patches
(files) with at least one finding of that tier; "top rules" counts gold patches per rule (any
tier), most first. Prints a markdown table, then every tier-1 hit without the exemption.

Run: [DEEPSWE_VERIFIED_PARQUET=/tmp/verified.parquet] .venv/bin/python bench/static_gate.py
     [--top 5] [--tests-from .venv/lib/python3.11/site-packages]
"""

from __future__ import annotations

import argparse
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

# (instance id, gold patch, graded paths, test patch)
Row = tuple[str, str, list[str], str]


@dataclass
class SetResult:
    """One task set's gold patches scanned."""

    name: str
    scanned: int = 0
    tier1: int = 0
    tier1_exempt: int = 0
    tier2: int = 0
    rules: Counter[str] = field(default_factory=Counter)
    tier1_hits: list[tuple[str, list[str]]] = field(default_factory=list)
    tests: int = 0
    tests_tier1: int = 0
    tests_tier2: int = 0
    tests_tier1_hits: list[tuple[str, list[str]]] = field(default_factory=list)


def _rows(tasks: list) -> list[Row]:
    """A test patch that does not parse grades nothing (reward.py fails on it): its graded
    files are then `hidden.graded_files` alone, and it is scanned as [] like any bad diff."""
    from unidiff.errors import UnidiffParseError

    from deepswe.env.hidden_tests import graded_paths

    rows = []
    for t in tasks:
        try:
            graded = graded_paths(t)
        except UnidiffParseError:
            print(f"({t.instance_id}: its test patch does not parse)")
            graded = list(t.hidden.graded_files)
        rows.append((t.instance_id, t.gold_patch or "", graded, t.hidden.test_patch))
    return rows


def task_sets() -> list[tuple[str, list[Row]]]:
    """(name, rows) for every task set available here."""
    from deepswe.data.datasets import load_tasks

    sets = [("swe-mini", _rows(load_tasks("swe-mini")))]
    parquet = os.environ.get("DEEPSWE_VERIFIED_PARQUET")
    if parquet:
        from deepswe.data.loaders import load_swebench

        sets.append(("SWE-bench Verified", _rows(load_swebench(Path(parquet)))))
    return sets


def scan_set(name: str, rows: list[Row]) -> SetResult:
    """Each gold scanned without and with itself as the exempting gold; each test patch as the
    agent's own tests."""
    from deepswe.env.grading.static_gate import scan_patch

    res = SetResult(name)
    for instance_id, gold, graded, test_patch in rows:
        found = scan_patch(gold, graded=graded)
        tier1 = sorted({f.rule for f in found if f.tier == 1})
        res.scanned += 1
        res.tier1 += bool(tier1)
        res.tier2 += any(f.tier == 2 for f in found)
        res.tier1_exempt += any(f.tier == 1 for f in scan_patch(gold, gold, graded))
        res.rules.update({f.rule for f in found})
        if tier1:
            res.tier1_hits.append((instance_id, tier1))
        if test_patch.strip():
            in_tests = scan_patch(test_patch)
            tests_tier1 = sorted({f"{f.rule} ({f.path})" for f in in_tests if f.tier == 1})
            res.tests += 1
            res.tests_tier1 += bool(tests_tier1)
            res.tests_tier2 += any(f.tier == 2 for f in in_tests)
            if tests_tier1:
                res.tests_tier1_hits.append((instance_id, tests_tier1))
    return res


def scan_test_files(root: Path) -> SetResult:
    """Every test file under `root` added as a new file."""
    from deepswe.env.grading.static_gate import is_test_path, scan_patch

    res = SetResult(f"test files under {root}")
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if not is_test_path(rel):
            continue
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            continue
        if not lines:
            continue
        body = "".join(f"+{x}\n" for x in lines)
        patch = f"--- /dev/null\n+++ b/{rel}\n@@ -0,0 +1,{len(lines)} @@\n{body}"
        found = scan_patch(patch)
        tier1 = sorted({f"{f.rule}:{f.line}" for f in found if f.tier == 1})
        res.tests += 1
        res.tests_tier1 += bool(tier1)
        res.tests_tier2 += any(f.tier == 2 for f in found)
        res.rules.update({f.rule for f in found})
        if tier1:
            res.tests_tier1_hits.append((rel, tier1))
    return res


def _rate(n: int, total: int) -> str:
    return f"{n}/{total} ({n / total:.1%})" if total else "-"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--top", type=int, default=5, help="rules listed per task set")
    ap.add_argument("--tests-from", type=Path, help="also scan every test file under this folder")
    args = ap.parse_args()
    if not os.environ.get("DEEPSWE_VERIFIED_PARQUET"):
        print("(SWE-bench Verified skipped: $DEEPSWE_VERIFIED_PARQUET is not set)\n")
    results = [scan_set(name, rows) for name, rows in task_sets()]
    if args.tests_from:
        results.append(scan_test_files(args.tests_from))
    print(
        "| task set | gold patches | tier-1, no exemption (honest refused) | tier-1, gold exempt "
        "(0 by construction) | tier-2 | test patch as the agent's: tier-1 | tier-2 | top rules |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for r in results:
        top = ", ".join(f"{rule} {n}" for rule, n in r.rules.most_common(args.top)) or "-"
        print(
            f"| {r.name} | {r.scanned or '-'} | {_rate(r.tier1, r.scanned)} | "
            f"{_rate(r.tier1_exempt, r.scanned)} | {_rate(r.tier2, r.scanned)} | "
            f"{_rate(r.tests_tier1, r.tests)} | {_rate(r.tests_tier2, r.tests)} | {top} |"
        )
    for r in results:
        for what, n, hits in (
            ("gold", r.scanned, r.tier1_hits),
            ("tests", r.tests, r.tests_tier1_hits),
        ):
            if not n:
                continue
            print(f"\n{r.name}: tier-1 hits in {what} without exemption: {len(hits)}")
            for instance_id, rules in hits:
                print(f"- {instance_id}: {', '.join(rules)}")


if __name__ == "__main__":
    main()
