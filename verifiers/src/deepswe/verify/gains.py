"""What a selection method adds over the best baseline, k by k.

For each verifier method (select.VERIFIER_METHODS) and each k: its Best@k minus the Best@k of
the best baseline at that k (select.BASELINE_METHODS: random, changes-code, smallest; the
oracle is the ceiling, not a baseline), over the tasks where both run. The standard error is
that of the mean of the per-task differences (paired: the same tasks, the same k-subsets
counted exactly), std / sqrt(tasks). Picking the best baseline on the same tasks favours the
baseline slightly, which makes the gain conservative.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from deepswe.verify.curves import task_best_at_k
from deepswe.verify.select import BASELINE_METHODS, VERIFIER_METHODS, Plan, plan
from deepswe.verify.types import Scores

HOW = (
    "gain = method's Best@k minus the best baseline's (random, changes-code, smallest; best by "
    "mean at that k) over the tasks both run on; SE = std of per-task differences / sqrt(tasks)"
)


def _plans(pools: dict[str, list[Scores]], method: str) -> dict[str, Plan]:
    out = {}
    for iid, pool in pools.items():
        p = plan(pool, method) if pool else "empty"
        if not isinstance(p, str):
            out[iid] = p
    return out


def per_task(pools: dict[str, list[Scores]], method: str, k: int) -> dict[str, float]:
    """instance_id -> exact Best@k of `method` (tasks with fewer than k candidates use all)."""
    return {
        iid: task_best_at_k(pools[iid], p, min(k, len(pools[iid])))
        for iid, p in _plans(pools, method).items()
    }


def best_at_k_gains(
    pools: dict[str, list[Scores]],
    ks: Sequence[int],
    methods: Sequence[str] = VERIFIER_METHODS,
    baselines: Sequence[str] = BASELINE_METHODS,
) -> dict:
    """{"how", "rows": [{"method", "k", "best_baseline", "baseline", "value", "gain", "stderr",
    "tasks"}]} for every method that runs on some task and every k."""
    rows = []
    for k in ks:
        base = {b: per_task(pools, b, k) for b in baselines}
        base = {b: v for b, v in base.items() if v}
        if not base:
            continue
        best = max(base, key=lambda b: statistics.fmean(base[b].values()))
        for m in methods:
            mine = per_task(pools, m, k)
            common = sorted(set(mine) & set(base[best]))
            if not common:
                continue
            diffs = [mine[t] - base[best][t] for t in common]
            se = statistics.stdev(diffs) / math.sqrt(len(diffs)) if len(diffs) > 1 else None
            rows.append(
                {
                    "method": m,
                    "k": k,
                    "best_baseline": best,
                    "tasks": len(common),
                    "value": statistics.fmean(mine[t] for t in common),
                    "baseline": statistics.fmean(base[best][t] for t in common),
                    "gain": statistics.fmean(diffs),
                    "stderr": se,
                }
            )
    return {"how": HOW, "rows": rows}
