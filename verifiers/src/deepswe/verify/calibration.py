"""Calibration of a probability-valued verifier (the EF judge's P(YES)): does "0.8" mean that
80% of such candidates are resolved?

Binning (stated in every report): BINS = 10 equal-width bins of the score over [0, 1], bin b
holding scores in [b/10, (b+1)/10), the last bin closed at 1.0. Per bin: n_b candidates, their
mean score conf_b and their resolved share acc_b. Expected calibration error (Naeini et al.
2015; Guo et al. 2017):

    ECE = sum_b (n_b / N) * |acc_b - conf_b|

over the N scored candidates; empty bins add nothing. Beside it the Brier score (mean squared
difference of score and outcome) and the maximum calibration error (the worst non-empty bin).
ECE depends on the binning and is biased upward with few candidates a bin: read it with the
per-bin counts, and with the task-level bootstrap interval (tasks resampled, as for AUC).
A score outside [0, 1] is not a probability: refused by name.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from deepswe.verify.auc import Point, interval, resamples

BINS = 10
BINNING = (
    f"{BINS} equal-width bins of the score over [0, 1] ([b/{BINS}, (b+1)/{BINS}), the last "
    "closed at 1); ECE = sum over bins of (candidates in bin / all) * |resolved share - mean score|"
)


def bin_of(score: float, bins: int = BINS) -> int:
    if not 0.0 <= score <= 1.0:
        raise ValueError(f"calibration: score {score!r} is not a probability in [0, 1]")
    return min(int(score * bins), bins - 1)


def reliability(points: Sequence[Point], bins: int = BINS) -> list[dict]:
    """Per bin: lo, hi, n, mean score (conf), resolved share (acc); empty bins have n 0."""
    groups: list[list[Point]] = [[] for _ in range(bins)]
    for p in points:
        groups[bin_of(p[1], bins)].append(p)
    out = []
    for b, g in enumerate(groups):
        row: dict = {"lo": b / bins, "hi": (b + 1) / bins, "n": len(g)}
        if g:
            row["conf"] = sum(p[1] for p in g) / len(g)
            row["acc"] = sum(p[2] for p in g) / len(g)
        out.append(row)
    return out


def ece(points: Sequence[Point], bins: int = BINS) -> float | None:
    """Expected calibration error over equal-width bins; None for no points."""
    if not points:
        return None
    rows = reliability(points, bins)
    return sum(r["n"] * abs(r["acc"] - r["conf"]) for r in rows if r["n"]) / len(points)


def calibration_report(points: Sequence[Point], bootstrap: int = 2000, seed: int = 0) -> dict:
    """ECE with its task-bootstrap interval, MCE, Brier score and the reliability table."""
    rows = reliability(points)
    out: dict = {"candidates": len(points), "binning": BINNING, "bins": rows, "ece": ece(points)}
    if not points:
        out["why"] = "no scored candidates"
        return out
    out["mce"] = max(abs(r["acc"] - r["conf"]) for r in rows if r["n"])
    out["brier"] = sum((p[1] - p[2]) ** 2 for p in points) / len(points)
    out["mean_score"] = sum(p[1] for p in points) / len(points)
    out["resolved_share"] = sum(p[2] for p in points) / len(points)
    by_task: dict[str, list[Point]] = {}
    for p in points:
        by_task.setdefault(p[0], []).append(p)
    draws = resamples(sorted(by_task), bootstrap, seed)
    values = [ece([p for t in d for p in by_task[t]]) for d in draws]
    out["bootstrap"] = interval([v for v in values if v is not None], len(draws))
    return out


def plot_reliability(report: dict, path: Path, title: str = "EF judge reliability") -> Path:
    """The reliability diagram as a PNG: resolved share against mean score per non-empty bin
    (marker area ~ candidates), the diagonal of perfect calibration, and the score histogram."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    rows = [r for r in report["bins"] if r["n"]]
    fig, (ax, hist) = plt.subplots(2, 1, figsize=(5, 6), height_ratios=[3, 1], sharex=True)
    ax.plot([0, 1], [0, 1], "k--", linewidth=1, label="perfectly calibrated")
    if rows:
        total = sum(r["n"] for r in rows)
        ax.scatter(
            [r["conf"] for r in rows],
            [r["acc"] for r in rows],
            s=[20 + 400 * r["n"] / total for r in rows],
            zorder=3,
            label="bins",
        )
        ax.plot([r["conf"] for r in rows], [r["acc"] for r in rows], "-", alpha=0.5)
        for r in rows:
            ax.annotate(
                str(r["n"]),
                (r["conf"], r["acc"]),
                textcoords="offset points",
                xytext=(4, 4),
                fontsize=7,
            )
    e = report.get("ece")
    ax.set(
        ylabel="resolved share",
        xlim=(0, 1),
        ylim=(-0.02, 1.02),
        title=f"{title}: ECE {'n/a' if e is None else f'{e:.3f}'} ({BINS} bins)",
    )
    ax.legend(fontsize=8, loc="upper left", markerscale=0.4)
    hist.bar(
        [r["lo"] for r in report["bins"]],
        [r["n"] for r in report["bins"]],
        width=1 / BINS,
        align="edge",
        edgecolor="k",
    )
    hist.set(xlabel="score (P(YES))", ylabel="candidates")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
