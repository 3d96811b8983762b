"""Selection: which candidate of one task's pool each method picks, as pure functions.

The methods (scores as in `deepswe.verify.types`: ef = P(YES) of the judge, regression = tests
still passing, reproduction = generated issue tests that say "resolved"):

    ef            highest EF score
    eb            most regression passes, then highest reproduction score
    hybrid        top half by EF (max(1, K // 2) of the K candidates), then most regression
                  passes, then highest reproduction score, then highest EF score
    hybrid-curve  top max(3, int(0.5 * K)) by (EF, regression, reproduction), then the same
                  three rules: the variant behind the paper's Best@k curve
    oracle        a resolved candidate when there is one (the ceiling, Pass@K)
    random        a uniform pick (expected_resolved = the pool's resolved share)
    changes-code  baseline: a candidate whose patch changes non-test code (baselines.py)
    smallest      baseline: the code-changing patch with the fewest changed code lines

Every method ends with the candidates tied after its last rule (`survivors`); the pick is
uniform among them, so `expected_resolved` is their resolved share, and `chosen` is the first
of them by run index (deterministic, for predictions).

Sources (read, not copied): R2E-Gym, agentica-project/R2E-Gym
`src/r2egym/agenthub/verifiers/create_bestofn_aggregate.py` (`run_ef_verifier`,
`run_eb_verifier`, `run_hybrid_verifier`: the submission DeepSWE's TTS guide,
`reproduction/DEEPSWE_TTS_REPRODUCTION.MD`, builds) and
`reproduction/R2E-Agent-Reproduction/verifier_evals.ipynb` (`get_hybrid_aggregation`,
`get_execution_based_aggregation`, `get_execution_free_aggregation`: the curves).

Deviations from the reference, on purpose:
- hybrid keeps max(1, K // 2): the reference's `K // 2` is 0 for K = 1 and its `max()` over
  the empty list raises. For K >= 2 the count is the reference's.
- hybrid keeps every candidate tied with the last one inside the top half: the reference cuts
  a tie by list order, i.e. by the order `glob` returned the trajectory files, which no score
  supports. The kept set can therefore exceed half.
- hybrid-curve's cut ranks by (EF, regression, reproduction) as the notebook's sort key does;
  candidates tied on all three at the cut fall in or out by the notebook's random sample order,
  so `expected_resolved` averages over that (it is the resolved share of the whole tied group);
  `survivors` lists the lowest runs of the group that fit.
- ties after the last rule: the reference script returns the first in file order (`max`), the
  notebook the mean; we report the mean (uniform pick) and pick the lowest run.
- missing scores: the reference crashes or compares None. Here a method that needs a score some
  candidate lacks (None or NaN) returns MISSING_SCORES naming it; an empty pool NO_CANDIDATES.
  A pool where *no* candidate has a reproduction score (no test was kept for the task) skips
  that rule and says so in `detail`: the reference's empty score lists sum to 0 for every
  candidate, which is the same no-op. Likewise for regression when no test passes at the base
  commit (a task whose test command runs only the graded file): a rule with nothing to
  compare on cannot change the pick.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from deepswe.verify.types import Scores, Selection, SelectionStatus

METHODS = ("ef", "eb", "hybrid", "hybrid-curve", "oracle", "random", "changes-code", "smallest")
VERIFIER_METHODS = ("ef", "eb", "hybrid", "hybrid-curve")  # what the verifiers pick
BASELINE_METHODS = ("random", "changes-code", "smallest")  # what they must beat (not the oracle)
# method -> the Scores field it selects by, for the methods that take the maximum of one score
SINGLE_SCORE = {"ef": "ef", "changes-code": "changes_code", "smallest": "smallest"}

# The scores each method reads; "reproduction" may be absent from a whole pool (rule skipped).
_NEEDS: dict[str, tuple[str, ...]] = {
    "ef": ("ef",),
    "eb": ("regression", "reproduction"),
    "hybrid": ("ef", "regression", "reproduction"),
    "hybrid-curve": ("ef", "regression", "reproduction"),
    "oracle": (),
    "random": (),
    "changes-code": ("changes_code",),
    "smallest": ("smallest",),
}


@dataclass(frozen=True)
class Plan:
    """How a method runs on one task's pool: decided once per pool, valid for its subsets."""

    method: str
    use_reproduction: bool = True
    note: str = ""
    use_regression: bool = True

    def regression(self, s: Scores) -> float:
        return s.regression if self.use_regression else 0.0  # type: ignore[return-value]

    def reproduction(self, s: Scores) -> float:
        return s.reproduction if self.use_reproduction else 0.0  # type: ignore[return-value]


def _has(value: float | None) -> bool:
    return value is not None and not math.isnan(value)


def plan(pool: Sequence[Scores], method: str) -> Plan | str:
    """The Plan for `method` on `pool`, or why it cannot run (a missing score, named)."""
    if method not in _NEEDS:
        raise ValueError(f"unknown selection method {method!r}; known: {', '.join(METHODS)}")
    skipped = []
    for name in _NEEDS[method]:
        have = [_has(getattr(s, name)) for s in pool]
        if all(have):
            continue
        if name in ("regression", "reproduction") and not any(have):
            skipped.append(name)  # nothing to compare on: the rule cannot change the pick
            continue
        runs = [s.run for s, ok in zip(pool, have, strict=True) if not ok]
        return f"{name} score missing for run(s) {runs}"
    note = "; ".join(f"no candidate has a {n} score: rule skipped" for n in skipped)
    return Plan(
        method,
        use_reproduction="reproduction" not in skipped,
        note=note,
        use_regression="regression" not in skipped,
    )


def _share(group: Sequence[Scores]) -> float:
    return sum(s.resolved for s in group) / len(group)


def _top(group: Sequence[Scores], key) -> list[Scores]:
    best = max(key(s) for s in group)
    return [s for s in group if key(s) == best]


def pick(pool: Sequence[Scores], p: Plan) -> tuple[list[Scores], float]:
    """(survivors in run order, expected resolved) of a non-empty pool under a valid Plan.

    The hot path of Best@k enumeration: plain comparisons, no validation."""
    pool = sorted(pool, key=lambda s: s.run)
    m = p.method
    if m == "random":
        return pool, _share(pool)
    if m == "oracle":
        hits = [s for s in pool if s.resolved]
        return (hits, 1.0) if hits else (pool, 0.0)
    if m in SINGLE_SCORE:
        field = SINGLE_SCORE[m]
        tied = _top(pool, lambda s: getattr(s, field))
        return tied, _share(tied)
    final = lambda s: (p.regression(s), p.reproduction(s), s.ef)  # noqa: E731 - the last three
    if m == "eb":
        tied = _top(pool, lambda s: (p.regression(s), p.reproduction(s)))
        return tied, _share(tied)
    if m == "hybrid":
        cut = max(1, len(pool) // 2)
        floor = sorted((s.ef for s in pool), reverse=True)[cut - 1]
        tied = _top([s for s in pool if s.ef >= floor], final)
        return tied, _share(tied)
    if m == "hybrid-curve":
        cut = min(len(pool), max(3, int(0.5 * len(pool))))
        full = lambda s: (s.ef, p.regression(s), p.reproduction(s))  # noqa: E731
        kept = sorted(pool, key=full, reverse=True)[:cut]  # stable: lower runs first on ties
        tied = _top(kept, final)
        # the whole pool's group with this key: who of it the cut keeps is the notebook's chance
        group = [s for s in pool if final(s) == final(tied[0])]
        return tied, _share(group)
    raise ValueError(f"unknown selection method {m!r}")


def select(pool: Sequence[Scores], method: str, instance_id: str = "") -> Selection:
    """What `method` picks from one task's `pool` (any run order; runs must be distinct)."""
    if not pool:
        return Selection(
            instance_id=instance_id, method=method, pool=0, status=SelectionStatus.NO_CANDIDATES
        )
    p = plan(pool, method)
    if isinstance(p, str):
        return Selection(
            instance_id=instance_id,
            method=method,
            pool=len(pool),
            status=SelectionStatus.MISSING_SCORES,
            detail=p,
        )
    survivors, expected = pick(pool, p)
    detail = p.note
    if method == "hybrid-curve" and expected != _share(survivors):
        detail = "; ".join(
            x for x in (detail, "tie at the cut: expected over which tied candidates fit") if x
        )
    return Selection(
        instance_id=instance_id,
        method=method,
        pool=len(pool),
        status=SelectionStatus.SELECTED,
        chosen=survivors[0].run,
        survivors=[s.run for s in survivors],
        expected_resolved=expected,
        detail=detail,
    )
