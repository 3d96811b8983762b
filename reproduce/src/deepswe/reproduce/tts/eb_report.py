"""What the execution-based verifiers did on a tts pool: how many reproduction tests were
written and kept a task, and how often a kept test agrees with the hidden tests.

Agreement is counted per (candidate, kept test) pair: the test says "Issue resolved" (its
verdict line, eb/reproduction.py) and the grader says resolved, or neither. A patch that does
not apply runs no test and counts as the test saying "not resolved". Beside the agreement: the
test's true-positive rate (it says resolved when the hidden tests pass) and false-positive rate
(it says resolved when they fail), overall and by candidate kind. Regression verdicts are
summarised by kind too (the share of a task's base-passing tests a candidate keeps passing).
"""

from __future__ import annotations

import json
import statistics
from collections import Counter
from pathlib import Path

from deepswe.verify.store import VerdictStore
from deepswe.verify.types import VerdictStatus


def kept_tests(pool: Path) -> dict[str, dict[str, int]]:
    """instance_id -> {"written", "kept", "not_applicable"} from eb/testgen/<id>.json."""
    out = {}
    for p in sorted((pool / "eb" / "testgen").glob("*.json")):
        tests = json.loads(p.read_text(encoding="utf-8"))["tests"]
        out[p.stem] = {
            "written": sum(1 for t in tests if t.get("source")),
            "kept": sum(1 for t in tests if t["status"] == "kept"),
            "not_applicable": sum(1 for t in tests if t["status"] == "not_applicable"),
        }
    return out


def _rates(c: Counter) -> dict:
    pairs = c["tp"] + c["fp"] + c["fn"] + c["tn"]
    pos, neg = c["tp"] + c["fn"], c["fp"] + c["tn"]
    return {
        "pairs": pairs,
        **{k: c[k] for k in ("tp", "fp", "fn", "tn")},
        "agreement": (c["tp"] + c["tn"]) / pairs if pairs else None,
        "true_positive_rate": c["tp"] / pos if pos else None,
        "false_positive_rate": c["fp"] / neg if neg else None,
    }


def eb_summary(pool: Path, mixture: dict[str, list[dict]]) -> dict:
    """Kept tests per task, the tests' agreement with the grader, regression by kind."""
    tests = kept_tests(pool)
    store = VerdictStore(pool)
    repro, regr = store.load("reproduction"), store.load("regression")
    overall, by_kind = Counter(), {}
    regression_by_kind: dict[str, list[float]] = {}
    for iid, rows in mixture.items():
        for r in rows:
            if r["resolved"] is None:
                continue
            kind, resolved = r["kind"], bool(r["resolved"])
            v = repro.get((iid, r["run"]))
            if v is not None and v.status is VerdictStatus.SCORED:
                if v.extra.get("apply_failed"):  # no test ran: none says resolved
                    per_test = [0] * tests.get(iid, {}).get("kept", 0)
                else:
                    per_test = v.extra.get("per_test", [])
                for said in per_test:
                    key = ("tp" if said else "fn") if resolved else ("fp" if said else "tn")
                    overall[key] += 1
                    by_kind.setdefault(kind, Counter())[key] += 1
            g = regr.get((iid, r["run"]))
            if g is not None and g.status is VerdictStatus.SCORED and g.extra.get("base_passing"):
                share = (g.score or 0.0) / g.extra["base_passing"]
                regression_by_kind.setdefault(kind, []).append(share)
    kept = [t["kept"] for t in tests.values()]
    return {
        "tasks": len(tests),
        "kept_per_task": dict(sorted(Counter(kept).items())),
        "kept_mean": statistics.fmean(kept) if kept else None,
        "tasks_with_a_kept_test": sum(k > 0 for k in kept),
        "written": sum(t["written"] for t in tests.values()),
        "not_applicable_tasks": sum(t["not_applicable"] > 0 for t in tests.values()),
        "agreement": _rates(overall),
        "agreement_by_kind": {k: _rates(c) for k, c in sorted(by_kind.items())},
        "regression_kept_share_by_kind": {
            k: statistics.fmean(v) for k, v in sorted(regression_by_kind.items())
        },
        "how": "agreement over (candidate, kept test) pairs: the test's 'Issue resolved' line "
        "against the grader's resolved; a patch that does not apply counts as 'not resolved'",
    }


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def eb_markdown(e: dict) -> list[str]:
    a = e["agreement"]
    lines = [
        "## Execution-based tests written without the answer",
        "",
        f"Reproduction tests kept per task (written from the statement and the base repository, "
        f"kept when they print 'Issue reproduced' at the base commit): {e['kept_per_task']} "
        f"(tests kept: tasks), mean {e['kept_mean'] if e['kept_mean'] is None else round(e['kept_mean'], 2)}; "
        f"{e['tasks_with_a_kept_test']} of {e['tasks']} tasks keep one; {e['not_applicable_tasks']} "
        "tasks offered the writer nothing to write from.",
        "",
        f"A kept test agrees with the hidden tests on {_pct(a['agreement'])} of {a['pairs']} "
        f"(candidate, test) pairs: it says resolved on {_pct(a['true_positive_rate'])} of "
        f"resolved candidates and on {_pct(a['false_positive_rate'])} of unresolved ones "
        f"({e['how']}).",
        "",
        "| kind | pairs | agreement | says resolved when resolved | says resolved when not | "
        "regression: base-passing tests kept |",
        "|---|---|---|---|---|---|",
    ]
    kinds = sorted(set(e["agreement_by_kind"]) | set(e["regression_kept_share_by_kind"]))
    for k in kinds:
        r = e["agreement_by_kind"].get(k, {"pairs": 0})
        share = e["regression_kept_share_by_kind"].get(k)
        lines.append(
            f"| {k} | {r['pairs']} | {_pct(r.get('agreement'))} | "
            f"{_pct(r.get('true_positive_rate'))} | {_pct(r.get('false_positive_rate'))} "
            f"| {_pct(share)} |"
        )
    return lines + [""]
