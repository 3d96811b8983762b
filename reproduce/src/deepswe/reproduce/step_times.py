"""Where a GRPO++ run's step time went, for the run report: the median and total of each part
over the steps of train/metrics.jsonl (deepswe.train.step_record), and what overlapped."""

from __future__ import annotations

import statistics
from collections import Counter

from deepswe.reproduce.document import Block, Heading, Para, Table
from deepswe.train.step_record import StepRecord

# (label, TimePart field): where a step's time went, in the order a step spends it
STEP_TIME = (
    ("waited for the batch", "rollout"),
    ("pi_old and advantages", "old_logprobs"),
    ("update", "update"),
    ("waited for the next batch", "wait_next_rollout"),
    ("weight push", "push_weights"),
    ("step", "step"),
    ("generation, start to end", "generation_wall"),
    ("generation exposed", "generation_exposed"),
    ("engine busy", "engine_busy"),
    ("episodes: model (sum)", "episodes_model"),
    ("episodes: tools (sum)", "episodes_tools"),
    ("episodes: grading (sum)", "episodes_grading"),
)


def step_time_blocks(metrics: list[StepRecord]) -> list[Block]:
    """Where a step's time went: the median and total of each part over the run's steps, the
    share of generation hidden behind training, the engine's busy share, the staleness."""
    rows = []
    for label, name in STEP_TIME:
        values = [v for m in metrics if (v := getattr(m.time, name)) is not None]
        if values:
            rows.append([label, f"{statistics.median(values):.1f}", f"{sum(values):.0f}"])
    wall = sum(m.time.generation_wall or 0.0 for m in metrics)
    hidden = sum(m.generation_hidden or 0.0 for m in metrics)
    busy = sum(m.time.engine_busy or 0.0 for m in metrics)
    lags = Counter()
    for m in metrics:
        lags.update({int(k): int(v) for k, v in m.staleness.lags.items()})
    masked = sum(m.offpolicy.masked_rows or 0.0 for m in metrics)
    trained = sum(m.filter.trained for m in metrics)
    infra = sum(m.reward.infra_rows for m in metrics)
    notes = [
        f"generation hidden behind training: {hidden:.0f} of {wall:.0f} s"
        + (f" ({hidden / wall:.0%})" if wall else ""),
    ]
    if busy and wall:
        notes.append(f"engine busy {busy / wall:.0%} of generation's wall time")
    if lags:
        notes.append(
            "staleness (rows a lag): " + ", ".join(f"{k}: {v}" for k, v in sorted(lags.items()))
        )
    notes.append(f"off-policy masked rows: {masked:.0f} of {trained:.0f} trained")
    notes.append(f"infra_error rows: {infra:.0f}")
    return [
        Heading("Where a step's time went", 3),
        Table(["part", "median s a step", "total s"], rows),
        Para(
            "; ".join(notes) + ". Seconds of wall clock from train/metrics.jsonl (time/*); "
            "the episode sums add every episode's seconds, so they exceed the wall time when "
            "episodes run at once (deepswe.train.step_record)."
        ),
    ]


__all__ = ["STEP_TIME", "step_time_blocks"]
