"""The report's plots (matplotlib, Agg: files only)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from deepswe.train.step_record import StepRecord

OUTCOMES = [
    "resolved",
    "unresolved",
    "patch_apply_failed",
    "test_timeout",
    "infra_error",
    "unsupported",
]
COLORS = {
    "resolved": "#2e7d32",
    "unresolved": "#9e9e9e",
    "patch_apply_failed": "#ef6c00",
    "test_timeout": "#8e24aa",
    "infra_error": "#c62828",
    "unsupported": "#1565c0",
}


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_reward(metrics: list[StepRecord], path: Path) -> bool:
    if not metrics:
        return False
    plt = _plt()
    steps = [m.step for m in metrics]
    fig, ax = plt.subplots(figsize=(6, 3.2))
    ax.plot(steps, [m.reward.mean or 0.0 for m in metrics], marker="o", label="reward (mean)")
    if any(m.filter.masked for m in metrics):
        n = [max(m.filter.trained + m.filter.masked, 1) for m in metrics]
        ax.plot(
            steps,
            [m.filter.masked / k for m, k in zip(metrics, n, strict=True)],
            ls="--",
            label="share masked (max_steps, timeout)",
        )
    ax.set_xlabel("GRPO++ step")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title("training reward (one point = the step's episodes)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def plot_curves(series: dict[str, list[tuple[int, float]]], path: Path, title: str) -> bool:
    series = {k: v for k, v in series.items() if v}
    if not series:
        return False
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 3.2))
    for name, pts in series.items():
        ax.plot([k for k, _ in pts], [100 * y for _, y in pts], marker="o", label=name)
    ax.set_xlabel("k")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_ylabel("% resolved")
    ax.set_ylim(-2, 102)
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def plot_outcomes(rows: list[tuple[str, Counter]], path: Path) -> bool:
    """One stacked horizontal bar per (run, project): every outcome, so a broken environment
    (infra_error, unsupported) shows as such and is never read as a hard task."""
    if not rows:
        return False
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 0.42 * len(rows) + 1.2))
    labels = [r[0] for r in rows]
    left = [0.0] * len(rows)
    for outcome in OUTCOMES:
        vals = [c.get(outcome, 0) for _, c in rows]
        if any(vals):
            ax.barh(labels, vals, left=left, color=COLORS[outcome], label=outcome)
            left = [a + b for a, b in zip(left, vals, strict=True)]
    ax.invert_yaxis()
    ax.set_xlabel("episodes")
    ax.set_title("outcomes per evaluation and project")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
