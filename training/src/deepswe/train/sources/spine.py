"""The `spine` rollout source: real agent episodes on real tasks in sandboxes (deepswe.env)."""

from __future__ import annotations

from typing import Any

from deepswe.data.task import Task
from deepswe.env.agent.loop import EpisodeLimits
from deepswe.env.episode import run_task
from deepswe.env.policies import Policy
from deepswe.env.trajectory import Trajectory
from deepswe.train.sources.task_list import training_tasks


class SpineSource:
    """Tasks from `data.path` (deepswe.data.loaders.load_tasks); one run_task per rollout."""

    def __init__(self, cfg: Any, tasks: list[Task] | None = None) -> None:
        self.cfg = cfg
        self._tasks = tasks
        ep, ro = cfg.episode, cfg.rollout
        self.limits = EpisodeLimits(
            max_steps=ep.max_steps,
            # rLLM bounds a trajectory by prompt + response length (4,096 + 32,768 tokens).
            max_context_tokens=ro.max_prompt_tokens + ro.max_response_tokens,
            action_timeout_s=ep.action_timeout_s,
            model_timeout_s=ep.model_timeout_s,
            wall_timeout_s=ep.wall_timeout_s,
            prompt_variant="train",
            keep_thinking=True,  # one token sequence per trajectory: the history as sampled
            scaffold=ep.scaffold,
        )

    def tasks(self) -> list[Task]:
        if self._tasks is None:
            self._tasks = training_tasks(self.cfg.data)
        return self._tasks

    def rollout(self, task: Task, policy: Policy) -> Trajectory:
        timeout = self.cfg.episode.reward_timeout_s
        if timeout is not None:
            task = task.model_copy(
                update={"test_spec": task.test_spec.model_copy(update={"timeout_s": timeout})}
            )
        return run_task(
            task,
            policy,
            limits=self.limits,
            backend=self.cfg.episode.sandbox_backend,
            sandbox_limits=self.cfg.episode.sandbox,
        )
