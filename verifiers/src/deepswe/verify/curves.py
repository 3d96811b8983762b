"""Best@k and Pass@k curves of selection methods, averaged over tasks with standard errors.

Best@k of one task = the expected correctness of the candidate a method selects from k of the
task's N candidates drawn uniformly without replacement, i.e. the mean of `expected_resolved`
over all C(N, k) subsets. How each value is obtained (stated in the result):

- ef, eb, oracle, random and the baselines select by the maximum of one key (ties shared):
  counted exactly by `deepswe.eval.estimators.best_at_k`, keyed by the method's rank;
- hybrid and hybrid-curve: counted exactly by `_tiered` (levels of the cut key, a winner by the
  final key), O(levels * N^2) per k, so exact for any N: enumeration over C(N, k) subsets
  would take about a second per task at N = 16 in Python, and sampling would add noise.
  `enumerated_best_at_k` (the definition) checks it in the tests; `samples=` switches a curve
  to R2E-Gym's way (its notebook averages 1000 random subsets per k), seeded, count stated.

Pass@k is the unbiased estimator `deepswe.eval.estimators.pass_at_k` beside it. A task with fewer
than k candidates uses all of them (as R2E-Gym's notebook does: `size = min(total, idx)`); the
number of such tasks is stated per point. The standard error is the sample std of the per-task
values over sqrt(tasks), over tasks only (the sampling error of a sampled curve is not added).
"""

from __future__ import annotations

import itertools
import math
import random
import statistics
from collections.abc import Sequence

from pydantic import BaseModel, Field

from deepswe.eval.estimators import best_at_k, pass_at_k
from deepswe.verify.select import METHODS, SINGLE_SCORE, Plan, pick, plan
from deepswe.verify.types import Scores


class Point(BaseModel):
    """One k of one curve."""

    k: int
    mean: float
    stderr: float | None = Field(None, description="std over tasks / sqrt(tasks); None if < 2")
    tasks: int
    short_tasks: int = Field(0, description="tasks with fewer than k candidates (used all)")
    sampled_tasks: int = Field(0, description="tasks whose value was sampled, not exact")


class Curve(BaseModel):
    method: str = Field(description="a selection method, or 'pass@k'")
    points: list[Point]
    excluded: dict[str, str] = Field(default_factory=dict, description="instance_id -> why")
    how: str = ""


def _rank(pool: Sequence[Scores], p: Plan) -> list[float]:
    """The single key a max-of-key method selects by, as floats (dense rank of tuples)."""
    if p.method in SINGLE_SCORE:
        return [float(getattr(s, SINGLE_SCORE[p.method])) for s in pool]
    if p.method == "oracle":
        return [float(s.resolved) for s in pool]
    if p.method == "random":
        return [0.0 for _ in pool]
    keys = [(p.regression(s), p.reproduction(s)) for s in pool]
    order = {key: float(i) for i, key in enumerate(sorted(set(keys)))}
    return [order[key] for key in keys]


def _tiered(pool: Sequence[Scores], p: Plan, k: int) -> float:
    """Exact Best@k of hybrid / hybrid-curve by counting subsets, O(levels * N^2) per k.

    Both cut the subset S at its c-th best "cut key" and pick, among what is kept, the group of
    the best "final key" (regression, reproduction, EF); the value is that group's resolved
    share (select.pick). Order the pool into levels of equal cut key. S is cut inside level j
    when a = |S above j| < c <= a + b, b = |S in j| >= 1; what is kept then holds exactly the
    final-key groups present in S among levels <= j (hybrid keeps the whole tied level;
    hybrid-curve's levels are single groups, whose share does not depend on who fits). For each
    j, a, b: the k - a - b others come from below j, and group g wins the kept part when it is
    present and no better group is: a Vandermonde count with at least one member of g.
    """

    finals = [(p.regression(s), p.reproduction(s), s.ef) for s in pool]
    if p.method == "hybrid":
        cuts: list[object] = [s.ef for s in pool]
        c = max(1, k // 2)
    else:
        cuts = [(s.ef, p.regression(s), p.reproduction(s)) for s in pool]
        c = min(k, max(3, int(0.5 * k)))
    size: dict[tuple, int] = {}
    hits: dict[tuple, int] = {}
    for s, f in zip(pool, finals, strict=True):
        size[f] = size.get(f, 0) + 1
        hits[f] = hits.get(f, 0) + s.resolved
    wins = dict.fromkeys(size, 0)  # how many k-subsets each final-key group wins
    above: list[tuple] = []  # final keys of the levels above the current one
    for key in sorted(set(cuts), reverse=True):  # type: ignore[type-var]
        level = [f for f, ck in zip(finals, cuts, strict=True) if ck == key]
        below = len(pool) - len(above) - len(level)
        for g in set(above) | set(level):
            a_lo = sum(f < g for f in above)
            b_lo = sum(f < g for f in level)
            in_above = g in above
            for a in range(max(0, c - len(level)), min(c, len(above) + 1)):
                for b in range(max(1, c - a), min(len(level), k - a) + 1):
                    if in_above:
                        ways = math.comb(size[g] + a_lo, a) - math.comb(a_lo, a)
                        ways *= math.comb(b_lo, b)
                    else:
                        ways = math.comb(size[g] + b_lo, b) - math.comb(b_lo, b)
                        ways *= math.comb(a_lo, a)
                    wins[g] += ways * math.comb(below, k - a - b)
        above += level
    won = sum(w * hits[g] / size[g] for g, w in wins.items())
    return won / math.comb(len(pool), k)


def task_best_at_k(pool: Sequence[Scores], p: Plan, k: int) -> float:
    """Exact Best@k of one task for a pool that satisfies Plan `p`; 1 <= k <= len(pool)."""
    if not 1 <= k <= len(pool):
        raise ValueError(f"Best@k needs 1 <= k <= N (N={len(pool)}, k={k})")
    if p.method in ("hybrid", "hybrid-curve"):
        return _tiered(pool, p, k)
    ranked = list(zip(_rank(pool, p), (s.resolved for s in pool), strict=True))
    return best_at_k(ranked, k)


def enumerated_best_at_k(pool: Sequence[Scores], p: Plan, k: int) -> float:
    """Best@k by running the selection on every k-subset: the definition, C(N, k) picks."""
    subsets = itertools.combinations(pool, k)
    return sum(pick(sub, p)[1] for sub in subsets) / math.comb(len(pool), k)


def sampled_best_at_k(
    pool: Sequence[Scores], p: Plan, k: int, samples: int, rng: random.Random
) -> float:
    """Best@k estimated from `samples` uniform k-subsets (as R2E-Gym's notebook estimates it)."""
    return sum(pick(rng.sample(list(pool), k), p)[1] for _ in range(samples)) / samples


def _point(k: int, values: list[float], short: int, sampled: int) -> Point:
    se = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else None
    mean = statistics.fmean(values) if values else 0.0
    return Point(
        k=k, mean=mean, stderr=se, tasks=len(values), short_tasks=short, sampled_tasks=sampled
    )


def method_curve(
    pools: dict[str, list[Scores]], method: str, *, samples: int | None = None, seed: int = 0
) -> Curve:
    """Best@k of `method` for k = 1..max N, averaged over the tasks it can run on: exact, or
    from `samples` random subsets per task and k when `samples` is given."""
    excluded: dict[str, str] = {}
    plans: dict[str, Plan] = {}
    for iid, pool in sorted(pools.items()):
        p = plan(pool, method) if pool else "no candidates"
        if isinstance(p, str):
            excluded[iid] = p
        else:
            plans[iid] = p
    top = max((len(pools[i]) for i in plans), default=0)
    points = []
    for k in range(1, top + 1):
        values = []
        for iid, p in plans.items():
            pool, kk = pools[iid], min(k, len(pools[iid]))
            if samples is None:
                values.append(task_best_at_k(pool, p, kk))
            else:  # seeded per (task, k): the same numbers whatever the order of tasks
                rng = random.Random(f"{seed}:{method}:{iid}:{k}")
                values.append(sampled_best_at_k(pool, p, kk, samples, rng))
        short = sum(len(pools[i]) < k for i in plans)
        points.append(_point(k, values, short, 0 if samples is None else len(values)))
    how = (
        "exact: expectation over every k-subset, counted in closed form"
        if samples is None
        else f"sampled: {samples} uniform k-subsets per task and k, seed {seed}"
    )
    return Curve(method=method, points=points, excluded=excluded, how=how)


def pass_curve(pools: dict[str, list[Scores]]) -> Curve:
    """Unbiased Pass@k (Chen et al. 2021) for k = 1..max N, averaged over non-empty pools."""
    live = {i: p for i, p in sorted(pools.items()) if p}
    top = max((len(p) for p in live.values()), default=0)
    points = []
    for k in range(1, top + 1):
        vals = [
            pass_at_k(len(p), sum(s.resolved for s in p), min(k, len(p))) for p in live.values()
        ]
        points.append(_point(k, vals, sum(len(p) < k for p in live.values()), 0))
    excluded = {i: "no candidates" for i, p in pools.items() if not p}
    return Curve(method="pass@k", points=points, excluded=excluded, how="exact: unbiased estimator")


def all_curves(
    pools: dict[str, list[Scores]],
    methods: Sequence[str] = METHODS,
    *,
    samples: int | None = None,
    seed: int = 0,
) -> list[Curve]:
    """Pass@k and each method's Best@k curve over the same pools."""
    return [pass_curve(pools)] + [
        method_curve(pools, m, samples=samples, seed=seed) for m in methods
    ]
