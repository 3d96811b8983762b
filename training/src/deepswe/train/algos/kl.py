"""KL penalty estimators and token entropy.

DeepSWE trains with neither a KL term nor an entropy bonus (both coefficients 0): no reference
model is loaded at all. These are here for ablations and, for entropy, for logging: a falling
entropy is the first sign of collapse that clip-higher is meant to prevent.
"""

from __future__ import annotations

import torch

# Estimators of KL(pi || ref) from samples of pi, per token (Schulman, "Approximating KL
# divergence", 2020); names as in verl's kl_loss_type.
KL_ESTIMATORS = ("k1", "abs", "k2", "k3", "low_var_kl")
_K3_LOG_CLAMP = 20.0  # keeps exp() finite
_K3_VALUE_CLAMP = 10.0  # bounds one bad token's pull (verl clamps low_var_kl at 10 too)


def kl_penalty(
    logprobs: torch.Tensor, ref_logprobs: torch.Tensor, kind: str = "low_var_kl"
) -> torch.Tensor:
    """Per-token KL estimate [B, T] from logprobs [B, T] of the policy and ref_logprobs [B, T].

    k1: log pi - log ref (unbiased, high variance, can be negative); abs: |k1|;
    k2: (k1)^2 / 2; k3 / low_var_kl: ref/pi - 1 - log(ref/pi) >= 0 (unbiased, low variance),
    log-ratio clamped to +-20 and value to <= 10 for stability.
    """
    if logprobs.shape != ref_logprobs.shape:
        raise ValueError(f"shapes differ: {tuple(logprobs.shape)} vs {tuple(ref_logprobs.shape)}")
    diff = logprobs - ref_logprobs
    if kind == "k1":
        return diff
    if kind == "abs":
        return diff.abs()
    if kind == "k2":
        return 0.5 * diff.square()
    if kind in ("k3", "low_var_kl"):
        log_r = (-diff).clamp(-_K3_LOG_CLAMP, _K3_LOG_CLAMP)
        return (torch.exp(log_r) - log_r - 1.0).clamp(max=_K3_VALUE_CLAMP)
    raise ValueError(f"unknown KL estimator {kind!r}; known: {list(KL_ESTIMATORS)}")


def entropy_from_logits(logits: torch.Tensor, chunk_size: int | None = None) -> torch.Tensor:
    """Entropy [B, T] (nats) of the softmax over the last axis of logits [B, T, V].

    H = logsumexp(z) - sum softmax(z) * z, computed in float32 at least. `chunk_size` bounds the
    number of [V]-rows materialised at once (a 32k-token trajectory with a 152k vocabulary is
    ~20 GB in float32 otherwise).
    """
    if logits.dim() != 3:
        raise ValueError(f"want logits [B, T, V], got shape {tuple(logits.shape)}")
    b, t, v = logits.shape
    flat = logits.reshape(b * t, v)
    step = flat.shape[0] if chunk_size is None else max(int(chunk_size), 1)
    parts = [_entropy_rows(flat[i : i + step]) for i in range(0, flat.shape[0], step)]
    out = torch.cat(parts) if parts else flat.new_zeros(0, dtype=_work_dtype(flat))
    return out.reshape(b, t)


def _entropy_rows(z: torch.Tensor) -> torch.Tensor:
    z = z.to(_work_dtype(z))
    lse = torch.logsumexp(z, dim=-1)
    return lse - (torch.softmax(z, dim=-1) * z).sum(dim=-1)


def _work_dtype(z: torch.Tensor) -> torch.dtype:
    return torch.promote_types(z.dtype, torch.float32)
