"""The RL-algorithm plug points: advantage estimators and policy losses.

Each registry is a plain dict `name -> "module:function"`, imported only when looked up, so a
user's own function plugs in by passing its `module:function` path instead of a name (the same
convention as the sandbox backends in `deepswe.env.sandbox`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

ADVANTAGE_ESTIMATORS: dict[str, str] = {
    # DeepSWE / GRPO++: leave-one-out baseline, no std division.
    "loo": "deepswe.train.algos.advantages:loo_advantages",
    # Original GRPO (r - mean) / (std + eps), kept for comparison.
    "grpo": "deepswe.train.algos.advantages:grpo_advantages",
}

POLICY_LOSSES: dict[str, str] = {
    # PPO clipped surrogate with DAPO's asymmetric clip, no dual clip.
    "ppo_clip": "deepswe.train.algos.policy_loss:ppo_clip_loss",
}


def resolve(registry: dict[str, str], name: str, kind: str) -> Callable[..., Any]:
    """The function registered under `name`, or the one at a `module:function` path.

    Raises ValueError naming the known choices when `name` is neither.
    """
    target = registry.get(name, name)
    if ":" not in target:
        raise ValueError(f"unknown {kind} {name!r}; known: {sorted(registry)} or 'module:function'")
    module, _, attr = target.partition(":")
    try:
        fn = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"{kind} {name!r}: cannot import {target!r}: {e}") from e
    if not callable(fn):
        raise ValueError(f"{kind} {name!r}: {target!r} is not callable")
    return fn


def advantage_estimator(name: str) -> Callable[..., Any]:
    """`fn(rewards [B], group_ids, baseline_mask [B] | None) -> advantages [B]` for `name`."""
    return resolve(ADVANTAGE_ESTIMATORS, name, "advantage estimator")


def policy_loss(name: str) -> Callable[..., Any]:
    """The policy-loss function for `name` (signature of `ppo_clip_loss`)."""
    return resolve(POLICY_LOSSES, name, "policy loss")
