"""PPO clipped surrogate with DAPO's asymmetric ("clip-higher") bounds and no dual clip.

Per token, with ratio r = exp(logprob - old_logprob) and advantage A:
    loss = max(-A * r, -A * clip(r, 1 - eps_low, 1 + eps_high))
The clipped branch is the larger one exactly when A > 0 and r > 1 + eps_high, or A < 0 and
r < 1 - eps_low; there the loss is a constant and the token gets zero gradient. eps_high > eps_low
(0.28 vs 0.2, DAPO arXiv 2503.14476) leaves more room to raise unlikely tokens, against entropy
collapse. DeepSWE uses no dual clip (verl's clip_ratio_c bound for A < 0), so none is applied.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from deepswe.train.algos.aggregation import agg_loss

# |log r| is clamped before exp so a stale or garbage logprob cannot overflow (verl clamps at 20
# too). Beyond e^20 the surrogate is already clipped for A > 0; for A < 0 the gradient vanishes.
LOG_RATIO_CLAMP = 20.0


@dataclass(frozen=True)
class PolicyLossMetrics:
    """Token means over the loss mask of one call; detached 0-d tensors (no GPU sync)."""

    clipfrac_low: torch.Tensor  # fraction of tokens with A < 0 and r < 1 - eps_low
    clipfrac_high: torch.Tensor  # fraction of tokens with A > 0 and r > 1 + eps_high
    approx_kl: torch.Tensor  # k3 estimate of KL(old || new): E[r - 1 - log r] >= 0 (Schulman 2020)
    ratio_mean: torch.Tensor  # mean of r

    @property
    def clipfrac(self) -> torch.Tensor:
        return self.clipfrac_low + self.clipfrac_high

    def as_dict(self, prefix: str = "actor/") -> dict[str, float]:
        """Python floats for logging (this synchronises with the device)."""
        values = {
            "clipfrac_low": self.clipfrac_low,
            "clipfrac_high": self.clipfrac_high,
            "clipfrac": self.clipfrac,
            "approx_kl": self.approx_kl,
            "ratio_mean": self.ratio_mean,
        }
        return {prefix + k: float(v.item()) for k, v in values.items()}


def ppo_clip_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    eps_low: float = 0.2,
    eps_high: float = 0.28,
    agg: str = "seq-sum-constant",
    constant: float | None = None,
    denominator: float | None = None,
) -> tuple[torch.Tensor, PolicyLossMetrics]:
    """Clipped policy loss (scalar) and its metrics.

    logprobs: [B, T] log pi(token) under the policy being trained (requires grad);
    old_logprobs: [B, T] under the policy that sampled the tokens (no grad needed);
    advantages: [B, T] (see `expand_to_tokens`); mask: [B, T] bool or 0/1, 1 on trained tokens.
    `agg`, `constant`, `denominator` are passed to `agg_loss`. Masked tokens get exactly zero
    gradient whatever their logprobs hold.
    """
    if not (logprobs.shape == old_logprobs.shape == advantages.shape == mask.shape):
        raise ValueError(
            "logprobs, old_logprobs, advantages and mask must all be [B, T]; got "
            f"{tuple(logprobs.shape)}, {tuple(old_logprobs.shape)}, {tuple(advantages.shape)}, "
            f"{tuple(mask.shape)}"
        )
    if not (0.0 <= eps_low < 1.0 and eps_high >= 0.0):
        raise ValueError(f"need 0 <= eps_low < 1 and eps_high >= 0; got {eps_low}, {eps_high}")
    m = mask.bool()
    adv = advantages.detach()
    # Zero the log-ratio on masked tokens *before* exp: padding may hold any value, and a where()
    # after a non-finite exp would still send nan back through the unselected branch.
    log_ratio = torch.where(m, logprobs - old_logprobs.detach(), 0.0)
    log_ratio = log_ratio.clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    ratio = torch.exp(log_ratio)

    clipped_high = (adv > 0) & (ratio > 1.0 + eps_high) & m
    clipped_low = (adv < 0) & (ratio < 1.0 - eps_low) & m
    clipped = clipped_high | clipped_low
    # Where the clipped branch wins its value is a constant in the parameters; detaching it makes
    # the zero gradient exact (torch.maximum splits the gradient on ties instead).
    bounded = ratio.detach().clamp(1.0 - eps_low, 1.0 + eps_high)
    loss_mat = torch.where(clipped, -adv * bounded, -adv * ratio)
    loss = agg_loss(loss_mat, m, agg, constant=constant, denominator=denominator)

    with torch.no_grad():
        n_tok = m.sum().clamp(min=1).to(ratio.dtype)

        def token_mean(x: torch.Tensor) -> torch.Tensor:
            return torch.where(m, x.to(ratio.dtype), 0.0).sum() / n_tok

        metrics = PolicyLossMetrics(
            clipfrac_low=token_mean(clipped_low),
            clipfrac_high=token_mean(clipped_high),
            approx_kl=token_mean(ratio - 1.0 - log_ratio),
            ratio_mean=token_mean(ratio),
        )
    return loss, metrics
