"""False-positive rates of the static gate (deepswe.env.grading.static_gate) on real fixes: every
gold patch of each task set scanned as if an agent had submitted it.

Baseline: the gold patches themselves, which are legitimate by definition, so every tier-1
finding without the exemption is a false positive the task's own gold would have to exempt
(target 0 outside a test tool's own repository, e.g. pytest-dev/pytest rows of Verified), and
the tier-2 rate is how often ordinary fixes would be flagged. "tier-1, gold exempt" scans each
gold with itself as the gold (scan_patch(gold, gold)): 0 by construction, printed as a check of
the exemption, not a measurement.

Task sets: swe-mini (always, data/swe-mini/tasks.jsonl) and SWE-bench Verified when
$DEEPSWE_VERIFIED_PARQUET names the Hugging Face dataset's parquet (columns instance_id, repo,
patch; read with pandas). Rates are the share of gold patches with at least one finding of
that tier; "top rules" counts gold patches per rule (any tier), most first. Prints a markdown
table, then the instance ids of tier-1 hits without the exemption, with their rules.

Run: [DEEPSWE_VERIFIED_PARQUET=/tmp/verified.parquet] .venv/bin/python bench/static_gate.py
     [--top 5]
"""

from __future__ import annotations

import argparse
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path


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


def task_sets() -> list[tuple[str, list[tuple[str, str]]]]:
    """(name, [(instance_id, gold patch)]) for every task set available here."""
    from deepswe.data.datasets import load_tasks

    sets = [("swe-mini", [(t.instance_id, t.gold_patch or "") for t in load_tasks("swe-mini")])]
    parquet = os.environ.get("DEEPSWE_VERIFIED_PARQUET")
    if parquet:
        import pandas as pd

        df = pd.read_parquet(Path(parquet), columns=["instance_id", "patch"])
        sets.append(("SWE-bench Verified", list(zip(df.instance_id, df.patch, strict=True))))
    return sets


def scan_set(name: str, rows: list[tuple[str, str]]) -> SetResult:
    """Each gold scanned without and with itself as the exempting gold."""
    from deepswe.env.grading.static_gate import scan_patch

    res = SetResult(name)
    for instance_id, gold in rows:
        found = scan_patch(gold)
        tier1 = sorted({f.rule for f in found if f.tier == 1})
        res.scanned += 1
        res.tier1 += bool(tier1)
        res.tier2 += any(f.tier == 2 for f in found)
        res.tier1_exempt += any(f.tier == 1 for f in scan_patch(gold, gold))
        res.rules.update({f.rule for f in found})
        if tier1:
            res.tier1_hits.append((instance_id, tier1))
    return res


def _rate(n: int, total: int) -> str:
    return f"{n}/{total} ({n / total:.1%})" if total else "-"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--top", type=int, default=5, help="rules listed per task set")
    args = ap.parse_args()
    if not os.environ.get("DEEPSWE_VERIFIED_PARQUET"):
        print("(SWE-bench Verified skipped: $DEEPSWE_VERIFIED_PARQUET is not set)\n")
    results = [scan_set(name, rows) for name, rows in task_sets()]
    print(
        "| task set | gold patches | tier-1, no exemption | tier-1, gold exempt (0 by "
        "construction) | tier-2 | top rules (patches) |"
    )
    print("|---|---:|---:|---:|---:|---|")
    for r in results:
        top = ", ".join(f"{rule} {n}" for rule, n in r.rules.most_common(args.top)) or "-"
        print(
            f"| {r.name} | {r.scanned} | {_rate(r.tier1, r.scanned)} | "
            f"{_rate(r.tier1_exempt, r.scanned)} | {_rate(r.tier2, r.scanned)} | {top} |"
        )
    for r in results:
        print(f"\n{r.name}: tier-1 hits without exemption: {len(r.tier1_hits)}")
        for instance_id, rules in r.tier1_hits:
            print(f"- {instance_id}: {', '.join(rules)}")


if __name__ == "__main__":
    main()
