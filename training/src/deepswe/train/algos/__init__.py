"""GRPO++ (DeepSWE's RL algorithm) as pure functions over torch tensors.

One update, in order:
    filtered = compact_filter(endings, rewards, mask)                    # filtering.py
    rows = filtered.keep_rows                                           # drop infra_error rows
    adv = advantage_estimator(cfg.adv_estimator)(                       # advantages.py
        filtered.rewards[rows], group_ids[rows], filtered.baseline_mask[rows])
    adv_tok = expand_to_tokens(adv, filtered.loss_mask[rows])
    denom = loss_denominator(filtered.loss_mask[rows], cfg.loss_agg, cfg.loss_constant)
    for each micro-batch:                                               # policy_loss.py
        loss, metrics = ppo_clip_loss(logprobs, old_logprobs, adv_tok_mb, mask_mb, cfg.eps_low,
                                      cfg.eps_high, cfg.loss_agg, cfg.loss_constant, denom)
        loss.backward()                                                 # sums to the full batch
"""

from deepswe.train.algos.advantages import (
    expand_to_tokens,
    group_index,
    grpo_advantages,
    loo_advantages,
)
from deepswe.train.algos.aggregation import AGG_MODES, agg_loss, loss_denominator
from deepswe.train.algos.config import GRPOConfig
from deepswe.train.algos.filtering import (
    DEFAULT_MASK_ENDINGS,
    ENDINGS,
    MASKABLE_ENDINGS,
    FilterCounts,
    FilterResult,
    compact_filter,
)
from deepswe.train.algos.kl import KL_ESTIMATORS, entropy_from_logits, kl_penalty
from deepswe.train.algos.off_policy import (
    OFF_POLICY_CORRECTIONS,
    OffPolicyResult,
    off_policy_correction,
)
from deepswe.train.algos.policy_loss import PolicyLossMetrics, ppo_clip_loss
from deepswe.train.algos.registry import ADVANTAGE_ESTIMATORS, advantage_estimator

__all__ = [
    "ADVANTAGE_ESTIMATORS",
    "OFF_POLICY_CORRECTIONS",
    "OffPolicyResult",
    "off_policy_correction",
    "AGG_MODES",
    "DEFAULT_MASK_ENDINGS",
    "ENDINGS",
    "KL_ESTIMATORS",
    "MASKABLE_ENDINGS",
    "FilterCounts",
    "FilterResult",
    "GRPOConfig",
    "PolicyLossMetrics",
    "advantage_estimator",
    "agg_loss",
    "compact_filter",
    "entropy_from_logits",
    "expand_to_tokens",
    "group_index",
    "grpo_advantages",
    "kl_penalty",
    "loo_advantages",
    "loss_denominator",
    "ppo_clip_loss",
]
