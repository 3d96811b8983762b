"""Best@k counted in closed form equals the definition (every k-subset), sampling agrees within
its error, and the curves average over tasks as stated."""

from __future__ import annotations

import math
import random
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deepswe.eval.metrics import pass_at_k
from deepswe.verify.curves import (
    all_curves,
    enumerated_best_at_k,
    method_curve,
    pass_curve,
    sampled_best_at_k,
    task_best_at_k,
)
from deepswe.verify.select import METHODS, plan
from deepswe.verify.types import Scores


@st.composite
def pools(draw, max_size: int = 7) -> list[Scores]:
    """Small pools with ties everywhere (as in test_verify_select)."""
    n = draw(st.integers(1, max_size))
    return [
        Scores(
            run=i,
            resolved=draw(st.booleans()),
            ef=draw(st.sampled_from([0.1, 0.5, 0.9])),
            regression=draw(st.sampled_from([0.0, 1.0, 2.0])),
            reproduction=draw(st.sampled_from([0.0, 1.0])),
            changes_code=draw(st.sampled_from([0.0, 1.0])),
            smallest=draw(st.sampled_from([0.0, 0.25, 0.5])),
        )
        for i in draw(st.permutations(list(range(n))))
    ]


@pytest.mark.parametrize("method", METHODS)
@settings(max_examples=120, deadline=None)
@given(pool=pools(max_size=8))
def test_exact_best_at_k_equals_enumeration(method: str, pool: list[Scores]) -> None:
    p = plan(pool, method)
    for k in range(1, len(pool) + 1):
        assert task_best_at_k(pool, p, k) == pytest.approx(enumerated_best_at_k(pool, p, k))


def _random_pool(rng: random.Random, n: int) -> list[Scores]:
    return [
        Scores(
            run=i,
            resolved=rng.random() < 0.4,
            ef=rng.choice([0.1, 0.3, 0.5, 0.7, 0.9]),
            regression=float(rng.randint(3, 6)),
            reproduction=float(rng.randint(0, 2)),
            changes_code=float(rng.random() < 0.7),
            smallest=rng.choice([0.0, 0.2, 0.25, 1 / 3]),
        )
        for i in range(n)
    ]


@pytest.mark.parametrize("method", ["hybrid", "hybrid-curve"])
def test_exact_on_sixteen_candidates_equals_enumeration(method: str) -> None:
    """DeepSWE's pool size: 16 rollouts, every k (C(16, 8) = 12870 subsets at most)."""
    pool = _random_pool(random.Random(7), 16)
    p = plan(pool, method)
    for k in (1, 2, 3, 5, 8, 13, 16):
        assert task_best_at_k(pool, p, k) == pytest.approx(enumerated_best_at_k(pool, p, k))


@pytest.mark.parametrize("method", METHODS)
def test_sampled_is_within_its_error_of_exact(method: str) -> None:
    pool = _random_pool(random.Random(3), 12)
    p = plan(pool, method)
    for k in (2, 5, 9):
        exact = task_best_at_k(pool, p, k)
        est = sampled_best_at_k(pool, p, k, 4000, random.Random(k))
        assert abs(est - exact) < 5 * 0.5 / math.sqrt(4000) + 1e-12  # 5 sigma at most


def test_oracle_is_pass_at_k_and_random_is_pass_at_1() -> None:
    rng = random.Random(11)
    pools_ = {f"t{i}": _random_pool(rng, 6) for i in range(5)}
    curves = {c.method: c for c in all_curves(pools_)}
    for a, b in zip(curves["oracle"].points, curves["pass@k"].points, strict=True):
        assert a.mean == pytest.approx(b.mean)
    p1 = curves["pass@k"].points[0].mean
    assert all(pt.mean == pytest.approx(p1) for pt in curves["random"].points)
    assert all(c.points[0].mean == pytest.approx(p1) for c in curves.values())


def test_curve_averages_tasks_with_stderr_and_counts_short_pools() -> None:
    """A task with fewer candidates than k uses all of them, and is counted as short."""
    a = [Scores(run=0, resolved=True, ef=0.9), Scores(run=1, resolved=False, ef=0.1)]
    b = [Scores(run=i, resolved=i == 3, ef=0.1 * i) for i in range(4)]
    curve = method_curve({"a": a, "b": b}, "ef")
    assert [pt.k for pt in curve.points] == [1, 2, 3, 4]
    k3 = curve.points[2]
    # a at k=2: EF always picks run 0 -> 1.0; b at k=3: run 3 is in 3 of 4 subsets -> 0.75
    assert k3.mean == pytest.approx((1.0 + 0.75) / 2)
    assert k3.stderr == pytest.approx(statistics.stdev([1.0, 0.75]) / math.sqrt(2))
    assert (k3.tasks, k3.short_tasks, k3.sampled_tasks) == (2, 1, 0)
    assert curve.how.startswith("exact")


def test_tasks_missing_scores_are_excluded_with_the_reason() -> None:
    pools_ = {
        "ok": [Scores(run=0, resolved=True, ef=0.5)],
        "no-ef": [Scores(run=0, resolved=True), Scores(run=1, resolved=False, ef=0.2)],
        "empty": [],
    }
    curve = method_curve(pools_, "ef")
    assert curve.excluded == {
        "no-ef": "ef score missing for run(s) [0]",
        "empty": "no candidates",
    }
    assert curve.points[0].tasks == 1


def test_pass_curve_uses_the_unbiased_estimator() -> None:
    pool = [Scores(run=i, resolved=i < 2) for i in range(5)]
    curve = pass_curve({"t": pool})
    assert [pt.mean for pt in curve.points] == [pass_at_k(5, 2, k) for k in range(1, 6)]


def test_sampled_curve_states_its_sample_count() -> None:
    pool = _random_pool(random.Random(5), 5)
    curve = method_curve({"t": pool}, "hybrid", samples=300, seed=1)
    assert "300" in curve.how and curve.points[-1].sampled_tasks == 1
    again = method_curve({"t": pool}, "hybrid", samples=300, seed=1)
    assert curve == again  # seeded


@settings(max_examples=60, deadline=None)
@given(pool=pools(max_size=6), k=st.integers(1, 6))
def test_best_at_k_is_a_probability(pool: list[Scores], k: int) -> None:
    k = min(k, len(pool))
    for method in METHODS:
        v = task_best_at_k(pool, plan(pool, method), k)
        assert 0.0 <= v <= 1.0 + 1e-12
