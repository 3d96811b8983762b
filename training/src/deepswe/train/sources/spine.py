"""The `spine` rollout source: real agent episodes on real tasks in sandboxes (deepswe.env)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deepswe.data.task import Task
from deepswe.env.agent.loop import EpisodeLimits
from deepswe.env.episode import run_task
from deepswe.env.policies import Policy
from deepswe.env.trajectory import Trajectory


def with_images(tasks: list[Task], data: Any) -> list[Task]:
    """`tasks` with the image each will use: R2E-Gym rows get R2E-Gym's image when the engine
    has it, else their environment from `data.repo_mirror` (the plan is printed). Rows that
    cannot run here are left out, said on stderr; a row with neither image nor mirror stops the
    run (ValueError naming what to do)."""
    import sys

    from deepswe.data.task import TaskSource
    from deepswe.eval.r2e_plan import plan_images

    if not any(t.source is TaskSource.R2E_GYM for t in tasks):
        return tasks
    mirror = Path(data.repo_mirror) if data.repo_mirror else None
    plan = plan_images(tasks, mode=data.r2e_env, mirror=mirror)
    for line in plan.lines(mirror):
        print(f"data: {line}", file=sys.stderr)
    if plan.missing:
        raise ValueError(
            f"data.path: {len(plan.missing)} R2E-Gym row(s) have no image and cannot be built: "
            f"{next(iter(plan.missing.values()))} (set data.repo_mirror)"
        )
    return plan.usable


def without_refused(tasks: list[Task]) -> list[Task]:
    """`tasks` less those whose rules refuse them (a runner strict rules cannot own: its
    reward would be read from what the tests print), each said on stderr."""
    import sys

    from deepswe.env.grading.owned import strict_refusal

    kept = []
    for t in tasks:
        why = strict_refusal(t.test_spec)
        if why:
            print(f"data: {t.instance_id} left out: {why}", file=sys.stderr)
        else:
            kept.append(t)
    return kept


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
            from deepswe.data.datasets import load_tasks

            tasks = with_images(load_tasks(self.cfg.data.path), self.cfg.data)
            self._tasks = without_refused(tasks)
            if not self._tasks:
                raise ValueError(f"data.path {self.cfg.data.path!r}: no tasks")
        return self._tasks

    def rollout(self, task: Task, policy: Policy) -> Trajectory:
        timeout = self.cfg.episode.reward_timeout_s
        if timeout is not None:
            task = task.model_copy(update={"test_spec": task.test_spec.model_copy(
                update={"timeout_s": timeout})})  # fmt: skip
        return run_task(
            task,
            policy,
            limits=self.limits,
            backend=self.cfg.episode.sandbox_backend,
            sandbox_limits=self.cfg.episode.sandbox,
        )
