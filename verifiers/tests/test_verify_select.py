"""Selection methods against brute-force restatements of the reference's rules.

The brute forces follow R2E-Gym's code literally (sort, slice, filter by max, mean of the tied),
with our stated fixes, and hybrid-curve averages the notebook's rule over every order the random
sample could have come in: independent of the counting `select.pick` does.
"""

from __future__ import annotations

import itertools
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deepswe.verify.select import METHODS, select
from deepswe.verify.types import Scores, SelectionStatus

EF = st.sampled_from([0.1, 0.5, 0.9])
REG = st.sampled_from([0.0, 1.0, 2.0])
REP = st.sampled_from([0.0, 1.0])
CODE = st.sampled_from([0.0, 1.0])
SMALL = st.sampled_from([0.0, 0.25, 1 / 3])


@st.composite
def pools(draw, max_size: int = 7, missing: bool = False) -> list[Scores]:
    """Small pools with ties everywhere; runs distinct and shuffled."""
    n = draw(st.integers(1, max_size))
    runs = draw(st.permutations(list(range(n))))
    maybe = (lambda s: st.one_of(st.none(), s)) if missing else (lambda s: s)
    return [
        Scores(
            run=r,
            resolved=draw(st.booleans()),
            ef=draw(maybe(EF)),
            regression=draw(maybe(REG)),
            reproduction=draw(maybe(REP)),
            changes_code=draw(maybe(CODE)),
            smallest=draw(maybe(SMALL)),
        )
        for r in runs
    ]


def mean_resolved(group: list[Scores]) -> float:
    return statistics.fmean(s.resolved for s in group)


def keep_max(group: list[Scores], key) -> list[Scores]:
    best = max(key(s) for s in group)
    return [s for s in group if key(s) == best]


def brute_hybrid(pool: list[Scores]) -> float:
    """create_bestofn_aggregate.run_hybrid_verifier, with max(1, K // 2) and cut ties kept."""
    ranked = sorted(pool, key=lambda s: s.ef, reverse=True)
    n = max(1, len(pool) // 2)
    top = [s for s in ranked if s.ef >= ranked[n - 1].ef]
    top = keep_max(top, lambda s: s.regression)
    top = keep_max(top, lambda s: s.reproduction)
    return mean_resolved(keep_max(top, lambda s: s.ef))


def brute_hybrid_curve(pool: list[Scores]) -> float:
    """verifier_evals.ipynb get_hybrid_aggregation, averaged over every sample order."""
    values = []
    for order in itertools.permutations(pool):
        ranked = sorted(order, key=lambda s: (s.ef, s.regression, s.reproduction), reverse=True)
        top = ranked[: max(3, int(len(order) * 0.5))]
        top = keep_max(top, lambda s: s.regression)
        top = keep_max(top, lambda s: s.reproduction)
        values.append(mean_resolved(keep_max(top, lambda s: s.ef)))
    return statistics.fmean(values)


def brute(pool: list[Scores], method: str) -> float:
    if method == "ef":
        return mean_resolved(keep_max(pool, lambda s: s.ef))
    if method == "eb":
        tied = keep_max(keep_max(pool, lambda s: s.regression), lambda s: s.reproduction)
        return mean_resolved(tied)
    if method == "hybrid":
        return brute_hybrid(pool)
    if method == "hybrid-curve":
        return brute_hybrid_curve(pool)
    if method == "oracle":
        return float(any(s.resolved for s in pool))
    if method == "changes-code":
        return mean_resolved(keep_max(pool, lambda s: s.changes_code))
    if method == "smallest":
        return mean_resolved(keep_max(pool, lambda s: s.smallest))
    return mean_resolved(pool)


@pytest.mark.parametrize("method", METHODS)
@settings(max_examples=150, deadline=None)
@given(pool=pools(max_size=6))
def test_expected_resolved_matches_brute_force(method: str, pool: list[Scores]) -> None:
    sel = select(pool, method, "t")
    assert sel.status is SelectionStatus.SELECTED
    assert sel.expected_resolved == pytest.approx(brute(pool, method))
    assert sel.chosen == min(sel.survivors)
    assert sel.survivors == sorted(sel.survivors)
    assert sel.pool == len(pool)


@pytest.mark.parametrize("method", ["ef", "eb", "hybrid", "random"])
@settings(max_examples=100, deadline=None)
@given(pool=pools())
def test_expected_is_the_survivors_share(method: str, pool: list[Scores]) -> None:
    """Where the survivors are the whole tie, expected_resolved is their resolved share."""
    sel = select(pool, method)
    by_run = {s.run: s for s in pool}
    assert sel.expected_resolved == pytest.approx(mean_resolved([by_run[r] for r in sel.survivors]))


@pytest.mark.parametrize("method", METHODS)
def test_one_candidate_is_selected(method: str) -> None:
    """R2E-Gym's hybrid keeps len // 2 = 0 candidates for K = 1 and max() of nothing raises."""
    one = Scores(
        run=3, resolved=True, ef=0.2, regression=1, reproduction=0, changes_code=1, smallest=0.5
    )
    sel = select([one], method)
    assert (sel.status, sel.chosen, sel.survivors, sel.expected_resolved) == (
        SelectionStatus.SELECTED,
        3,
        [3],
        1.0,
    )


@pytest.mark.parametrize("method", METHODS)
def test_empty_pool_has_no_candidates(method: str) -> None:
    sel = select([], method, "t")
    assert sel.status is SelectionStatus.NO_CANDIDATES and sel.chosen is None


def test_ties_everywhere_share_the_pick() -> None:
    pool = [
        Scores(run=i, resolved=i % 2 == 0, ef=0.5, regression=1, reproduction=1) for i in range(4)
    ]
    for method in ("ef", "eb", "hybrid", "hybrid-curve", "random"):
        sel = select(pool, method)
        assert sel.expected_resolved == 0.5, method
        assert sel.chosen == 0


@settings(max_examples=200, deadline=None)
@given(pool=pools(missing=True))
def test_missing_scores_are_named_never_zero(pool: list[Scores]) -> None:
    """A needed score missing for some candidate gives MISSING_SCORES naming it; a regression
    or reproduction score missing for every candidate skips that rule instead."""
    for method in METHODS:
        sel = select(pool, method)
        needs = {
            "ef": ["ef"],
            "oracle": [],
            "random": [],
            "changes-code": ["changes_code"],
            "smallest": ["smallest"],
        }.get(method, [])
        lacking = [n for n in needs if any(getattr(s, n) is None for s in pool)]
        if method in ("hybrid", "hybrid-curve") and any(s.ef is None for s in pool):
            lacking.append("ef")
        skipped = []
        for name in ("regression", "reproduction"):
            if method not in ("eb", "hybrid", "hybrid-curve"):
                continue
            gone = [getattr(s, name) is None for s in pool]
            if all(gone):
                skipped.append(name)
            elif any(gone):
                lacking.append(name)
        if lacking:
            assert sel.status is SelectionStatus.MISSING_SCORES, (method, pool)
            assert sel.expected_resolved is None and sel.chosen is None
            assert any(n in sel.detail for n in lacking)
        else:
            assert sel.status is SelectionStatus.SELECTED, (method, sel.detail)
            for name in skipped:
                assert f"{name} score: rule skipped" in sel.detail


def test_nan_counts_as_missing() -> None:
    pool = [Scores(run=0, resolved=True, ef=float("nan")), Scores(run=1, resolved=False, ef=0.3)]
    sel = select(pool, "ef")
    assert sel.status is SelectionStatus.MISSING_SCORES and "run(s) [0]" in sel.detail


def test_hybrid_keeps_the_top_half_then_regression_decides() -> None:
    """K = 4: the two best by EF survive the cut; of them the one with more passing
    regression tests wins, although a candidate outside the cut passes more."""
    pool = [
        Scores(run=0, resolved=False, ef=0.9, regression=3, reproduction=1),
        Scores(run=1, resolved=True, ef=0.8, regression=5, reproduction=0),
        Scores(run=2, resolved=False, ef=0.2, regression=9, reproduction=2),
        Scores(run=3, resolved=False, ef=0.1, regression=9, reproduction=2),
    ]
    assert select(pool, "hybrid").chosen == 1
    assert select(pool, "eb").chosen == 2
    assert select(pool, "ef").chosen == 0


def test_unknown_method_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown selection method 'best'"):
        select([Scores(run=0, resolved=True)], "best")
