"""How one training rollout is sampled, whichever scheduler runs it: its seed and its policy.

Everything a step draws is seeded by (run.seed, step, task slot, rollout k); reply j of an
episode samples with that seed + j. The local thread pool (`Trainer.collect`) and the Ray rollout
workers (`cluster.ray_runtime.RolloutWorker`) both play a `RolloutJob` through `run_rollout`, so
the two sample exactly the same and a run started on one may resume on the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from deepswe.env.trajectory import Trajectory
from deepswe.train.config import TrainConfig
from deepswe.train.engines.policy import EnginePolicy


@dataclass(frozen=True)
class RolloutJob:
    """Rollout k of the task in slot `slot` of `step` (0: the run's first step), which is task
    `task` of the rollout source. Only this travels to a Ray worker."""

    task: int  # index into the source's tasks()
    step: int
    slot: int  # the task's position in this step's tasks; its group id
    k: int  # 0 .. rollout.group_size - 1


def rollout_seed(seed: int, step: int, slot: int, k: int) -> int:
    """Sampling seed of rollout k of task slot `slot` at `step` of a run seeded `seed`; reply j
    uses it + j (65,536 replies apart, more than any episode's turns)."""
    return (((seed * 1_000_003 + step) * 4_099 + slot) * 1_031 + k) * 65_536


def episode_policy(engine: Any, cfg: TrainConfig, seed: int) -> EnginePolicy:
    """The policy of one training episode sampled from `seed` on, under `cfg.rollout`'s limits
    (a TrainConfig): temperature, the per-reply cap, prompt + response as the context bound."""
    ro = cfg.rollout
    return EnginePolicy(
        engine,
        temperature=ro.temperature,
        max_tokens=ro.max_tokens_per_turn or ro.max_response_tokens,
        max_context_tokens=ro.max_prompt_tokens + ro.max_response_tokens,
        seed=seed,
    )


def run_rollout(source: Any, engine: Any, cfg: TrainConfig, job: RolloutJob) -> Trajectory:
    """Play `job` on `source` (a RolloutSource) with `engine`'s policy, seeded by cfg.run.seed."""
    seed = rollout_seed(cfg.run.seed, job.step, job.slot, job.k)
    return source.rollout(source.tasks()[job.task], episode_policy(engine, cfg, seed))
