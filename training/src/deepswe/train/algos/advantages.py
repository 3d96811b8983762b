"""Group-relative advantages from one scalar reward per trajectory.

Rows of a batch belong to groups (the G rollouts of one task). `baseline_mask [B]` says which rows
count in their group's baseline: compact filtering (see `filtering.py`) decides whether masked
trajectories still do. Every function returns advantages for *every* row, including rows outside
the baseline; whether a row is trained on is the loss mask's business, not this module's.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

GroupIds = torch.Tensor | Sequence[int] | Sequence[str]


def group_index(group_ids: GroupIds, device: torch.device | None = None) -> torch.Tensor:
    """Dense group index [B] (int64, 0..G-1) from ids [B]: a tensor, or a list of ints or strings.

    Equal ids share a group; strings are numbered in order of first appearance.
    """
    if isinstance(group_ids, torch.Tensor):
        if group_ids.dim() != 1:
            raise ValueError(f"group_ids must be 1-D [B], got shape {tuple(group_ids.shape)}")
        return torch.unique(group_ids, return_inverse=True)[1].to(device or group_ids.device)
    numbering: dict[int | str, int] = {}
    index = [numbering.setdefault(g, len(numbering)) for g in group_ids]
    return torch.tensor(index, dtype=torch.long, device=device)


def _group_sums(
    rewards: torch.Tensor, group_ids: GroupIds, baseline_mask: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(r [B] float64, idx [B], in_baseline [B] bool, per-group sum [G], per-group count [G]).

    Sums and counts cover only baseline rows. float64 keeps the leave-one-out subtraction exact
    enough that equal rewards give (numerically) zero advantage.
    """
    if rewards.dim() != 1:
        raise ValueError(f"rewards must be 1-D [B], got shape {tuple(rewards.shape)}")
    r = rewards.detach().to(torch.float64)
    idx = group_index(group_ids, device=r.device)
    if idx.shape != r.shape:
        raise ValueError(f"group_ids has {idx.numel()} entries, rewards {r.numel()}")
    if baseline_mask is None:
        in_base = torch.ones_like(r, dtype=torch.bool)
    else:
        in_base = baseline_mask.to(device=r.device, dtype=torch.bool)
        if in_base.shape != r.shape:
            raise ValueError(
                f"baseline_mask shape {tuple(in_base.shape)} != rewards {tuple(r.shape)}"
            )
    n_groups = int(idx.max().item()) + 1 if idx.numel() else 0
    w = in_base.to(torch.float64)
    sums = torch.zeros(n_groups, dtype=torch.float64, device=r.device).index_add_(0, idx, r * w)
    counts = torch.zeros(n_groups, dtype=torch.float64, device=r.device).index_add_(0, idx, w)
    return r, idx, in_base, sums, counts


def loo_advantages(
    rewards: torch.Tensor, group_ids: GroupIds, baseline_mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Leave-one-out advantages [B] (DeepSWE's GRPO++, RLOO: arXiv 2402.14740).

    A_i = r_i - mean of the rewards of the *other* baseline rows in i's group. No std division
    (Dr. GRPO, arXiv 2503.20783: it up-weights near-uniform groups). A row with no other baseline
    row in its group (a group of one) gets baseline 0, so A_i = r_i.

    rewards: [B] float; group_ids: [B]; baseline_mask: [B] bool or None (all rows count).
    Returns [B] in rewards' dtype (float32 when rewards are integers).
    """
    r, idx, in_base, sums, counts = _group_sums(rewards, group_ids, baseline_mask)
    own = in_base.to(torch.float64)
    # Remove the row itself from its group's baseline only if it is part of it.
    others_sum = sums[idx] - r * own
    others_n = counts[idx] - own
    baseline = torch.where(others_n > 0, others_sum / others_n.clamp(min=1), torch.zeros_like(r))
    return (r - baseline).to(_out_dtype(rewards))


def grpo_advantages(
    rewards: torch.Tensor,
    group_ids: GroupIds,
    baseline_mask: torch.Tensor | None = None,
    eps: float = 1e-6,
) -> torch.Tensor:
    """GRPO advantages [B]: (r_i - mean_g) / (std_g + eps), std unbiased (as torch.std, verl).

    mean_g / std_g are over the baseline rows of i's group. A group with fewer than two baseline
    rows has no usable statistics: mean 0, std 1 (verl's convention), so A_i = r_i / (1 + eps).
    rewards: [B]; group_ids: [B]; baseline_mask: [B] bool or None. Returns [B].
    """
    r, idx, in_base, sums, counts = _group_sums(rewards, group_ids, baseline_mask)
    has_stats = counts >= 2
    mean = torch.where(has_stats, sums / counts.clamp(min=1), torch.zeros_like(sums))
    dev = (r - mean[idx]) * in_base.to(torch.float64)
    sq = torch.zeros_like(sums).index_add_(0, idx, dev * dev)
    std = torch.where(has_stats, (sq / (counts - 1).clamp(min=1)).sqrt(), torch.ones_like(sums))
    return ((r - mean[idx]) / (std[idx] + eps)).to(_out_dtype(rewards))


def expand_to_tokens(advantages: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Broadcast per-trajectory advantages [B] over tokens: [B, T], zero where mask [B, T] is 0."""
    if advantages.dim() != 1 or mask.dim() != 2 or mask.shape[0] != advantages.shape[0]:
        raise ValueError(
            f"want advantages [B] and mask [B, T]; got {tuple(advantages.shape)}, {tuple(mask.shape)}"
        )
    return torch.where(mask.bool(), advantages[:, None], 0.0)


def _out_dtype(rewards: torch.Tensor) -> torch.dtype:
    return rewards.dtype if rewards.is_floating_point() else torch.get_default_dtype()
