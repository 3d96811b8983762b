"""Turning a per-token loss matrix [B, T] into the scalar that is back-propagated.

Modes:
- "seq-sum-constant" (DeepSWE's "length normalization", Dr. GRPO arXiv 2503.20783): each
  trajectory's token-summed loss divided by a fixed constant (the max response length, 32,768 in
  the DeepSWE recipe), then averaged over trajectories. Every token then carries the same weight
  whatever the length of its trajectory. A per-trajectory token mean instead weighs each token of
  a long trajectory less, so long wrong trajectories are penalised less per token and lengths
  drift upwards (the length bias Dr. GRPO removes). The constant must be given: verl's
  "seq-mean-token-sum-norm" uses the padded width `mask.shape[-1]`, which silently changes the
  loss scale with the padding of each micro-batch.
- "token-mean": sum over every unmasked token of the batch / their number (DAPO).
- "seq-mean-token-mean": per-trajectory token mean, then mean over trajectories that have at
  least one unmasked token (original GRPO). Kept for comparison.

Gradient accumulation. Each mode is `sum(per-row terms) / denominator`. By default the
denominator comes from the tensors given, which is right for a whole batch. When a batch is split
into micro-batches whose gradients are accumulated, compute the denominator once over the *whole*
(global) batch with `loss_denominator(mask_global, mode, constant)` and pass it as `denominator=`
to every micro-batch call: the micro-batch losses then add up exactly to the full-batch loss, and
so do their gradients, for every mode and any split (uneven micro-batches, uneven lengths).
For "seq-sum-constant" the denominator is just `constant * global_batch_size`; equivalently, with
equal-sized micro-batches, scale each local loss by micro_size / global_size. Under data
parallelism that averages gradients over ranks, multiply the loss by the world size (or sum).
"""

from __future__ import annotations

import torch

AGG_MODES = ("seq-sum-constant", "token-mean", "seq-mean-token-mean")


def loss_denominator(mask: torch.Tensor, mode: str, constant: float | None = None) -> float:
    """The normaliser of `agg_loss` for a whole batch with loss mask [B, T].

    "seq-sum-constant": constant * B; "token-mean": number of unmasked tokens (at least 1);
    "seq-mean-token-mean": number of rows with an unmasked token (at least 1).
    Rows whose loss mask is all zero (compact-filtered) still count in B for "seq-sum-constant":
    the normaliser stays a constant of the recipe, not of how many rows were filtered.
    """
    _check(mask, mask, mode, constant)
    return float(_denominator(mask.bool(), mode, constant).item())


def _denominator(m: torch.Tensor, mode: str, constant: float | None) -> torch.Tensor:
    # A tensor, so the default path of agg_loss does not synchronise with the GPU.
    if mode == "seq-sum-constant":
        assert constant is not None
        return torch.tensor(float(constant) * m.shape[0], dtype=torch.float64, device=m.device)
    counted = m if mode == "token-mean" else m.any(dim=-1)
    return counted.sum().clamp(min=1).to(torch.float64)


def agg_loss(
    loss_mat: torch.Tensor,
    mask: torch.Tensor,
    mode: str,
    constant: float | None = None,
    denominator: float | None = None,
) -> torch.Tensor:
    """Scalar loss from per-token losses loss_mat [B, T] and loss mask [B, T] (bool or 0/1).

    `constant` is required for "seq-sum-constant" (tokens, e.g. 32768). `denominator` overrides the
    batch-local normaliser (see module docstring: pass `loss_denominator` of the global batch
    when accumulating micro-batches). Masked entries contribute exactly zero to the value and
    receive exactly zero gradient, even where loss_mat holds inf or nan.
    """
    _check(loss_mat, mask, mode, constant)
    m = mask.bool()
    masked = torch.where(m, loss_mat, torch.zeros((), dtype=loss_mat.dtype, device=loss_mat.device))
    if mode == "seq-mean-token-mean":
        per_row = masked.sum(dim=-1) / m.sum(dim=-1).clamp(min=1).to(loss_mat.dtype)
        total = per_row.sum()
    else:
        total = masked.sum()
    if denominator is None:
        return total / _denominator(m, mode, constant).to(total.dtype)
    if denominator <= 0:
        raise ValueError(f"denominator must be > 0, got {denominator}")
    return total / denominator


def _check(loss_mat: torch.Tensor, mask: torch.Tensor, mode: str, constant: float | None) -> None:
    if mode not in AGG_MODES:
        raise ValueError(f"unknown loss aggregation mode {mode!r}; known: {list(AGG_MODES)}")
    if loss_mat.dim() != 2 or loss_mat.shape != mask.shape:
        raise ValueError(
            f"want loss_mat and mask of the same shape [B, T]; got {tuple(loss_mat.shape)}, "
            f"{tuple(mask.shape)}"
        )
    if mode == "seq-sum-constant" and (constant is None or constant <= 0):
        raise ValueError(f"mode 'seq-sum-constant' needs a positive constant, got {constant!r}")
