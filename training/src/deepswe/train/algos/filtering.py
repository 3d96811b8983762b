"""GRPO++ compact filtering: do not train on trajectories that were cut off rather than finished.

A trajectory that hit the context limit, the step limit or the wall-clock timeout never got to
submit, so its reward 0 says little about its actions; penalising it teaches the agent to stop
early (DeepSWE blog, "compact filtering", after DAPO's overlong filtering). Such rows get loss
mask 0 and reward 0. By default they still count in their group's baseline, as in rLLM, whose
compact filter flags episodes invalid and drops them only after advantages are computed;
`keep_in_baseline=False` removes them from the baseline too.

`agent_error` is NOT masked by default: it is counted as the model's own failure and trained on
with its reward. `infra_error` (sandbox died, image missing, harness timeout: nobody's action)
says nothing about the policy at all: the row is dropped from the batch (keep_rows False), never
trained on as a failure and never part of a baseline. `drop_endings` drops further endings the
same way: e.g. `agent_error` where a plugged-in policy reports its own endpoint's failures as a
plain PolicyError, which the agent loop ends agent_error (the openai policy marks unreachable,
overloaded, key-refused and model-not-served endpoints infra, so those end infra_error).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum

import torch

# Why an episode ended: the values of deepswe.env.trajectory.Ending (a test guards the match).
ENDINGS = ("submitted", "max_steps", "max_context", "timeout", "agent_error", "infra_error")
# Endings that may be masked or dropped on request; "submitted" is the normal end and
# "infra_error" is always dropped.
MASKABLE_ENDINGS = frozenset({"max_steps", "max_context", "timeout", "agent_error"})
ALWAYS_DROPPED = frozenset({"infra_error"})
# DeepSWE's choice: cut-off trajectories only.
DEFAULT_MASK_ENDINGS = frozenset({"max_context", "max_steps", "timeout"})


@dataclass(frozen=True)
class FilterCounts:
    """How many rows ended each way and what filtering did with them; adds up to B."""

    by_ending: dict[str, int]  # every name in ENDINGS, zeros included
    masked: int  # rows kept in the batch with loss mask 0 and reward 0
    dropped: int  # infra_error (and drop_endings) rows removed from the batch
    trained: int  # rows trained on normally

    def as_dict(self, prefix: str = "filter/") -> dict[str, float]:
        out = {f"{prefix}ending/{k}": float(v) for k, v in self.by_ending.items()}
        out.update({f"{prefix}masked": self.masked, f"{prefix}dropped": self.dropped})
        out[f"{prefix}trained"] = self.trained
        return {k: float(v) for k, v in out.items()}


@dataclass(frozen=True)
class FilterResult:
    """Full-length [B] / [B, T] tensors; index every per-row tensor with `keep_rows` before use.

    Dropped (infra_error) rows also have loss mask 0, baseline_mask False and reward 0, so a
    caller that forgets to drop them still never trains on them nor uses them as a baseline.
    """

    rewards: torch.Tensor  # [B] rewards, 0 on masked and dropped rows
    loss_mask: torch.Tensor  # [B, T] bool, all False on masked and dropped rows
    baseline_mask: torch.Tensor  # [B] bool, rows that count in their group's baseline
    keep_rows: torch.Tensor  # [B] bool, False on rows to drop from the batch (infra_error)
    counts: FilterCounts


def ending_name(ending: object) -> str:
    """The ending string of a str or an Enum whose value is one of ENDINGS."""
    value = ending.value if isinstance(ending, Enum) else ending
    if not isinstance(value, str) or value not in ENDINGS:
        raise ValueError(f"unknown episode ending {ending!r}; known: {list(ENDINGS)}")
    return value


def check_mask_endings(mask_endings: Iterable[object], verb: str = "mask") -> frozenset[str]:
    """Validated set of ending names to mask (or drop); refuses names that cannot be."""
    names = frozenset(ending_name(e) for e in mask_endings)
    bad = names - MASKABLE_ENDINGS
    if bad:
        raise ValueError(
            f"cannot {verb} endings {sorted(bad)}: 'submitted' is the normal end and 'infra_error' "
            f"rows are always dropped; allowed: {sorted(MASKABLE_ENDINGS)}"
        )
    return names


def compact_filter(
    endings: Sequence[object],
    rewards: torch.Tensor,
    mask: torch.Tensor,
    mask_endings: Iterable[object] = DEFAULT_MASK_ENDINGS,
    keep_in_baseline: bool = True,
    drop_endings: Iterable[object] = (),
) -> FilterResult:
    """Apply compact filtering to a batch.

    endings: B ending strings (or str Enums) from ENDINGS; rewards: [B]; mask: [B, T] loss mask.
    mask_endings: endings whose rows get loss mask 0 and reward 0; keep_in_baseline: whether those
    rows still count in their group's baseline (True in the DeepSWE recipe). drop_endings:
    endings dropped from the batch like infra_error (none by default).
    """
    if (
        rewards.dim() != 1
        or mask.dim() != 2
        or not (len(endings) == rewards.shape[0] == mask.shape[0])
    ):
        raise ValueError(
            f"want B endings, rewards [B], mask [B, T]; got {len(endings)}, "
            f"{tuple(rewards.shape)}, {tuple(mask.shape)}"
        )
    masked_names = check_mask_endings(mask_endings)
    dropped_names = check_mask_endings(drop_endings, "drop") | ALWAYS_DROPPED
    if masked_names & dropped_names:
        raise ValueError(f"endings both masked and dropped: {sorted(masked_names & dropped_names)}")
    names = []
    for row, ending in enumerate(endings):
        try:
            names.append(ending_name(ending))
        except ValueError as e:
            raise ValueError(f"row {row}: {e}") from None

    device = rewards.device
    is_masked = torch.tensor([n in masked_names for n in names], dtype=torch.bool, device=device)
    is_dropped = torch.tensor([n in dropped_names for n in names], dtype=torch.bool, device=device)
    untrained = is_masked | is_dropped

    new_rewards = torch.where(untrained, torch.zeros_like(rewards), rewards)
    loss_mask = mask.bool() & ~untrained[:, None].to(mask.device)
    baseline_mask = ~is_dropped if keep_in_baseline else ~untrained
    tally = Counter(names)
    counts = FilterCounts(
        by_ending={k: tally.get(k, 0) for k in ENDINGS},
        masked=int(is_masked.sum().item()),
        dropped=int(is_dropped.sum().item()),
        trained=int((~untrained).sum().item()),
    )
    return FilterResult(new_rewards, loss_mask, baseline_mask, ~is_dropped, counts)
