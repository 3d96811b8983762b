"""Off-policy correction: which sampled rows may train when the sampler is not the trainer.

The engine samples with its own weights and kernels; the trainer learns with its own. They
differ by numerics always (bf16 kernels, a vLLM build) and by a whole policy version when
training runs one step behind (`rollout.max_staleness: 1`: a step's episodes were sampled by the
weights before the previous update). PPO's ratio is taken against pi_old, the trainer's own
log-probs recomputed before the update (`rollout.old_logprobs: recompute`); what is left is the
gap between pi_old and the sampler, pi_behav.

A correction is a function of that gap, plugged in by name (`algo.off_policy`):

- `none`: every row trains (DeepSWE's GRPO++, synchronous, had no correction);
- `seq_is_mask`: a sequence-level truncated importance-sampling mask, the form MLPerf Training's
  SWE-agent GRPO reference adds to GRPO++: each row's importance ratio
  w = pi_old(y) / pi_behav(y) over its sampled tokens, and a row whose w falls outside
  [`is_low`, `is_high`] is masked (no gradient); rows inside train with weight 1. `is_level`
  says how w is taken: `geometric` = exp(mean over tokens of the log-ratio) (a per-token
  average: length does not push long replies out), `sequence` = exp(sum) (the ratio of the
  whole reply's probabilities).

A masked row is treated as a compact-filtered one: its loss mask is zeroed and it still counts in
the loss normaliser and its group's baseline (deepswe.train.algos.filtering), so masking a row
never scales the others' gradients up.
A user's own correction plugs in as `module:function` with the signature of `seq_is_mask`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from deepswe.env.registry import resolve

OFF_POLICY_CORRECTIONS: dict[str, str] = {
    "none": "deepswe.train.algos.off_policy:no_correction",
    "seq_is_mask": "deepswe.train.algos.off_policy:seq_is_mask",
}


@dataclass(frozen=True)
class OffPolicyResult:
    """keep: [B] bool, the rows that train; log_ratio: [B] float, each row's log w (0 where it
    has no sampled token)."""

    keep: torch.Tensor
    log_ratio: torch.Tensor

    def metrics(self) -> dict[str, float]:
        """`offpolicy/*`: masked rows and share, the mean and largest |log w| over rows."""
        n = int(self.keep.numel())
        masked = int((~self.keep).sum())
        lr = self.log_ratio.abs()
        return {
            "offpolicy/masked_rows": float(masked),
            "offpolicy/masked_share": masked / n if n else 0.0,
            "offpolicy/abs_log_ratio_mean": float(lr.mean()) if n else 0.0,
            "offpolicy/abs_log_ratio_max": float(lr.max()) if n else 0.0,
        }


def sequence_log_ratio(
    trainer_lp: torch.Tensor, sampler_lp: torch.Tensor, mask: torch.Tensor, level: str
) -> torch.Tensor:
    """[B] log w per row over the tokens `mask` marks: the sum of the token log-ratios
    (`sequence`) or their mean (`geometric`)."""
    if level not in ("geometric", "sequence"):
        raise ValueError(f"is_level {level!r}: geometric or sequence")
    m = mask.bool()
    diff = torch.where(m, trainer_lp.double() - sampler_lp.double(), 0.0)
    total = diff.sum(dim=1)
    if level == "sequence":
        return total
    return total / m.sum(dim=1).clamp(min=1)


def no_correction(
    trainer_lp: torch.Tensor, sampler_lp: torch.Tensor, mask: torch.Tensor, **_: Any
) -> OffPolicyResult:
    """Every row trains; the ratio is still measured (geometric) for the metrics."""
    log_ratio = sequence_log_ratio(trainer_lp, sampler_lp, mask, "geometric")
    return OffPolicyResult(torch.ones_like(log_ratio, dtype=torch.bool), log_ratio)


def seq_is_mask(
    trainer_lp: torch.Tensor,
    sampler_lp: torch.Tensor,
    mask: torch.Tensor,
    low: float = 0.5,
    high: float = 2.0,
    level: str = "geometric",
) -> OffPolicyResult:
    """Rows whose importance ratio w = pi_old / pi_behav (module doc) lies in [low, high]."""
    if not (0 < low <= 1 <= high):
        raise ValueError(f"is_low {low}, is_high {high}: need 0 < is_low <= 1 <= is_high")
    log_ratio = sequence_log_ratio(trainer_lp, sampler_lp, mask, level)
    keep = (log_ratio >= math.log(low)) & (log_ratio <= math.log(high))
    return OffPolicyResult(keep, log_ratio)


def off_policy_correction(name: str) -> Callable[..., OffPolicyResult]:
    """`fn(trainer_lp [B,T], sampler_lp [B,T], mask [B,T], low=, high=, level=)` for `name`."""
    return resolve(OFF_POLICY_CORRECTIONS, name, "off-policy correction")
