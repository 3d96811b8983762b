"""The `spine` rollout source: real agent episodes on real tasks in sandboxes (deepswe.env)."""

from __future__ import annotations

from deepswe.data.task import Task
from deepswe.env.episode import run_task
from deepswe.env.policies import Policy
from deepswe.env.trajectory import Trajectory
from deepswe.train.config import TrainConfig
from deepswe.train.sources.task_list import training_tasks


class SpineSource:
    """Tasks from `data.path` (deepswe.data.loaders.load_tasks); one run_task per rollout."""

    @classmethod
    def from_config(cls, cfg: TrainConfig) -> SpineSource:
        return cls(cfg)

    def __init__(self, cfg: TrainConfig, tasks: list[Task] | None = None) -> None:
        self.cfg = cfg
        self._tasks = tasks
        self.limits = cfg.episode.limits(cfg.rollout)  # keep_thinking: one sequence per episode

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
