"""Calibration of the EF judge's P(YES): ECE on hand-made scores, the binning it states, and the
reliability plot written as a PNG."""

from __future__ import annotations

import pytest

from deepswe.verify.calibration import (
    BINS,
    bin_of,
    calibration_report,
    ece,
    plot_reliability,
    reliability,
)

POINTS = [
    ("a", 0.05, False),
    ("a", 0.15, False),
    ("b", 0.85, False),
    ("b", 0.95, True),
    ("c", 1.0, True),
]


def test_ece_counted_by_hand():
    # bins 0, 1, 8 hold one wrong candidate each (errors .05, .15, .85); bin 9 holds 0.95 and
    # 1.0, both resolved (mean score .975, error .025, weight 2)
    assert ece(POINTS) == pytest.approx((0.05 + 0.15 + 0.85 + 2 * 0.025) / 5)
    rows = reliability(POINTS)
    assert [r["n"] for r in rows] == [1, 1, 0, 0, 0, 0, 0, 0, 1, 2]
    assert rows[9]["conf"] == pytest.approx(0.975) and rows[9]["acc"] == 1.0


def test_a_calibrated_judge_has_ece_zero_and_a_constant_one_its_bias():
    fair = [("t", 0.25, i == 0) for i in range(4)] + [("u", 0.75, i < 3) for i in range(4)]
    assert ece(fair) == pytest.approx(0.0)
    always_half = [("t", 0.5, i < 2) for i in range(10)]  # 20% resolved, says 50%
    assert ece(always_half) == pytest.approx(0.3)


def test_bins_are_equal_width_with_the_last_closed():
    assert BINS == 10
    assert [bin_of(x) for x in (0.0, 0.0999, 0.1, 0.5, 0.9999, 1.0)] == [0, 0, 1, 5, 9, 9]
    with pytest.raises(ValueError, match="not a probability"):
        bin_of(1.5)


def test_report_states_the_binning_and_writes_the_plot(tmp_path):
    rep = calibration_report(POINTS, bootstrap=200, seed=1)
    assert "10 equal-width bins" in rep["binning"]
    assert rep["brier"] == pytest.approx((0.05**2 + 0.15**2 + 0.85**2 + 0.05**2 + 0) / 5)
    lo, hi = rep["bootstrap"]["ci95"]
    assert 0 <= lo <= hi <= 1
    png = plot_reliability(rep, tmp_path / "reliability.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert ece([]) is None and calibration_report([])["why"] == "no scored candidates"
