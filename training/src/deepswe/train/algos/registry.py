"""The RL-algorithm plug point: advantage estimators.

A plain dict `name -> "module:function"`, imported only when looked up; a user's own function
plugs in by its `module:function` path instead of a name (deepswe.env.registry, the lookup every
plug point shares). The policy loss is not a plug point: the backends call `ppo_clip_loss`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from deepswe.env.registry import resolve

ADVANTAGE_ESTIMATORS: dict[str, str] = {
    # DeepSWE / GRPO++: leave-one-out baseline, no std division.
    "loo": "deepswe.train.algos.advantages:loo_advantages",
    # Original GRPO (r - mean) / (std + eps), kept for comparison.
    "grpo": "deepswe.train.algos.advantages:grpo_advantages",
}


def advantage_estimator(name: str) -> Callable[..., Any]:
    """`fn(rewards [B], group_ids, baseline_mask [B] | None) -> advantages [B]` for `name`."""
    return resolve(ADVANTAGE_ESTIMATORS, name, "advantage estimator")
