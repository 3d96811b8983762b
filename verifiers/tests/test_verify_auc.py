"""ROC AUC pooled and within task, against counting every pair; the Hanley-McNeil SE."""

from __future__ import annotations

import itertools

import pytest

from deepswe.verify.auc import auc, auc_report, hanley_mcneil_se


def test_auc_equals_counting_every_pair_ties_half():
    pts = [
        ("a", 0.9, True),
        ("a", 0.5, False),
        ("b", 0.5, True),
        ("b", 0.2, False),
        ("c", 0.5, False),
        ("c", 0.7, True),
    ]
    pairs = [(p, n) for p, n in itertools.product(pts, pts) if p[2] and not n[2]]
    brute = sum(1.0 if p[1] > n[1] else 0.5 if p[1] == n[1] else 0.0 for p, n in pairs)
    assert auc(pts) == pytest.approx(brute / len(pairs))
    assert auc([("a", 0.1, True)]) is None
    rep = auc_report(pts, bootstrap=300, seed=1)
    assert rep["hanley_mcneil_se"] == pytest.approx(hanley_mcneil_se(rep["auc"], 3, 3))
    lo, hi = rep["bootstrap"]["ci95"]
    assert 0 <= lo <= rep["auc"] <= hi <= 1
    # within each task the resolved one scores higher: a perfect selector's AUC
    assert rep["within_task_auc"] == 1.0 and rep["within_task_pairs"] == 3
    assert "undefined" in auc_report([("a", 0.3, False)])["why"]


def test_hanley_mcneil_matches_the_papers_formula_at_chance():
    # AUC 0.5, 10 and 10: Q1 = 1/3, Q2 = 1/3; var = (0.25 + 9/12 + 9/12) / 100 = 0.0175
    assert hanley_mcneil_se(0.5, 10, 10) == pytest.approx(0.0175**0.5)
