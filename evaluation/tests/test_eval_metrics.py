"""pass@k, Best@k and the run metrics against brute-force references and hand counts."""

from __future__ import annotations

import itertools
import math
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deepswe.env.trajectory import Ending, Step, Trajectory
from deepswe.eval.metrics import best_at_k, compute_metrics, pass_at_k
from deepswe.eval.store import EpisodeRecord, EpisodeStatus


def brute_pass_at_k(n: int, c: int, k: int) -> float:
    """Share of the k-subsets of n samples (c correct) holding at least one correct one."""
    samples = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(samples[i] for i in s) for s in subsets) / len(subsets)


def brute_best_at_k(scored: list[tuple[float, bool]], k: int) -> float:
    """Over every k-subset, the resolved share among the subset's top-scored (tied) runs."""
    total = 0.0
    subsets = list(itertools.combinations(scored, k))
    for s in subsets:
        top = max(x[0] for x in s)
        winners = [r for x, r in s if x == top]
        total += sum(winners) / len(winners)
    return total / len(subsets)


@given(
    st.integers(1, 12).flatmap(
        lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n))
    )
)
def test_pass_at_k_equals_the_combinatorial_definition(nck):
    n, c, k = nck
    assert pass_at_k(n, c, k) == pytest.approx(brute_pass_at_k(n, c, k), abs=1e-12)
    assert pass_at_k(n, c, k) == pytest.approx(1 - math.comb(n - c, k) / math.comb(n, k), abs=1e-12)


def test_pass_at_k_is_stable_where_binomials_overflow_floats():
    # C(2000, 1000) ~ 1e600 is no float; the product form still gives the exact value.
    exact = 1 - math.comb(1990, 1000) / math.comb(2000, 1000)  # exact int arithmetic
    assert pass_at_k(2000, 10, 1000) == pytest.approx(exact, rel=1e-9)


def test_pass_at_k_rejects_impossible_counts():
    with pytest.raises(ValueError):
        pass_at_k(4, 5, 1)
    with pytest.raises(ValueError):
        pass_at_k(4, 1, 5)


@given(
    st.lists(st.tuples(st.integers(0, 3).map(float), st.booleans()), min_size=1, max_size=7),
    st.data(),
)
def test_best_at_k_equals_enumeration_with_ties(scored, data):
    k = data.draw(st.integers(1, len(scored)))
    assert best_at_k(scored, k) == pytest.approx(brute_best_at_k(scored, k), abs=1e-12)


def _rec(iid: str, run: int, outcome: str | None, status=EpisodeStatus.GRADED, repo="a/x", steps=3):
    traj = None
    if status is not EpisodeStatus.UNSUPPORTED_ENV:
        ending = Ending.INFRA_ERROR if status is EpisodeStatus.INFRA_ERROR else Ending.SUBMITTED
        traj = Trajectory(
            instance_id=iid,
            policy="p",
            messages=[],
            ending=ending,
            steps=[
                Step(index=i, assistant="", prompt_tokens=100, completion_tokens=10)
                for i in range(steps)
            ],
            grade_seconds=1.0,
        )
    return EpisodeRecord(
        instance_id=iid,
        run=run,
        repo=repo,
        status=status,
        outcome=outcome,
        started_at=1000.0 + run,
        finished_at=1010.0 + run,
        trajectory=traj,
    )


def test_metrics_add_up_and_keep_errors_out_of_unresolved():
    ids = ["t1", "t2", "t3", "t4"]
    recs = [
        _rec("t1", 0, "resolved"),
        _rec("t1", 1, "resolved"),
        _rec("t1", 2, "unresolved"),
        _rec("t2", 0, "unresolved", repo="b/y"),
        _rec("t2", 1, "patch_apply_failed", repo="b/y"),
        _rec("t2", 2, "resolved", repo="b/y"),
        _rec("t3", 0, "infra_error", EpisodeStatus.INFRA_ERROR),
        _rec("t3", 1, "resolved"),
        _rec("t3", 2, "test_timeout"),
        *[_rec("t4", k, None, EpisodeStatus.UNSUPPORTED_ENV) for k in range(3)],
    ]
    m = compute_metrics(recs, ids, runs=3)
    assert m["complete"] and sum(m["counts"].values()) == m["episodes_expected"] == 12
    assert m["counts"] == {
        "infra_error": 1,
        "patch_apply_failed": 1,
        "resolved": 4,
        "test_timeout": 1,
        "unresolved": 2,
        "unsupported_env": 3,
    }
    # run 0: t1; run 1: t1, t3; run 2: t2 -> over all 4 tasks
    assert m["resolved_rate_per_run"] == [0.25, 0.5, 0.25]
    assert m["pass@1_mean"] == pytest.approx(1 / 3)
    assert m["pass@1_std"] == pytest.approx(statistics.stdev([0.25, 0.5, 0.25]))
    # pass@1 (unbiased) equals the mean per-run rate when every task has every run
    assert m["pass@k"]["1"] == pytest.approx(m["pass@1_mean"])
    # pass@3 = share of tasks resolved at least once: t1, t2, t3
    assert m["pass@k"]["3"] == pytest.approx(0.75)
    assert m["best@k"] is None
    # over the 3 tasks an environment serves: [1/3, 2/3, 1/3]
    assert m["supported_tasks"] == 3 and m["pass@1_supported_mean"] == pytest.approx(4 / 9)
    assert [(x["instance_id"], x["status"]) for x in m["not_graded"]] == [
        ("t3", "infra_error"),
        ("t4", "unsupported_env"),
    ]
    assert m["per_repo"]["b/y"] == {
        "tasks": 1,
        "episodes": 3,
        "resolved": 1,
        "resolved_rate": 1 / 3,
    }
    assert m["endings"] == {"infra_error": 1, "submitted": 8}
    assert m["steps"]["n"] == 9 and m["prompt_tokens"]["mean"] == 300


def test_incomplete_runs_report_no_pass_at_k():
    m = compute_metrics([_rec("t1", 0, "resolved")], ["t1", "t2"], runs=2)
    assert not m["complete"] and m["pass@k"] == {} and m["episodes_stored"] == 1


def test_best_at_k_used_when_every_episode_is_scored():
    recs = [_rec("t1", 0, "resolved"), _rec("t1", 1, "unresolved")]
    recs[0].verifier_score, recs[1].verifier_score = 0.9, 0.2
    m = compute_metrics(recs, ["t1"], runs=2)
    assert m["best@k"] == {"1": 0.5, "2": 1.0}
