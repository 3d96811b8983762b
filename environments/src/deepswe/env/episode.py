"""One whole episode for a task: image -> sandbox -> agent loop -> fresh sandbox -> grade.

This is what evaluation and training call per (task, rollout). An infrastructure failure at any
stage is reported as ending infra_error / outcome INFRA_ERROR, never as a reward 0.
"""

from __future__ import annotations

import time

from deepswe.data.task import Task
from deepswe.env.agent.loop import EpisodeLimits, run_episode
from deepswe.env.grading.outcomes import GradeResult, Outcome
from deepswe.env.images.base import ImageBuildError
from deepswe.env.images.task import ensure_task_image
from deepswe.env.policies import Policy
from deepswe.env.reward import run_reward
from deepswe.env.sandbox import SandboxError, SandboxLimits, backend_class
from deepswe.env.trajectory import Ending, Trajectory


def grade_patch(
    task: Task,
    patch: str,
    *,
    image: str | None = None,
    backend: str = "docker",
    sandbox_limits: SandboxLimits | None = None,
) -> tuple[GradeResult, str]:
    """Grade `patch` for `task` in a fresh sandbox; returns the grade and the test log."""
    try:
        image = image or ensure_task_image(task, log=lambda _: None)
        sandbox = backend_class(backend)(image, sandbox_limits)
    except (SandboxError, ImageBuildError) as exc:
        return GradeResult(
            outcome=Outcome.INFRA_ERROR, parser=task.test_spec.log_parser, reason=str(exc)
        ), ""
    try:
        return run_reward(task, patch, sandbox)
    finally:
        sandbox.close()


def run_task(
    task: Task,
    policy: Policy,
    *,
    limits: EpisodeLimits | None = None,
    backend: str = "docker",
    sandbox_limits: SandboxLimits | None = None,
    grade: bool = True,
) -> Trajectory:
    """Run `policy` on `task` in a new sandbox, then grade the patch (unless `grade=False`)."""
    limits = limits or EpisodeLimits()
    started = time.monotonic()
    try:
        image = ensure_task_image(task, log=lambda _: None)
        sandbox = backend_class(backend)(image, sandbox_limits)
    except (SandboxError, ImageBuildError) as exc:
        return Trajectory(
            instance_id=task.instance_id,
            policy=policy.name,
            messages=[],
            ending=Ending.INFRA_ERROR,
            ending_detail=f"sandbox: {exc}",
            outcome=Outcome.INFRA_ERROR.value,
            wall_seconds=time.monotonic() - started,
        )
    try:
        traj = run_episode(task, policy, sandbox, limits)
    finally:
        sandbox.close()
    if not grade:
        return traj
    if traj.ending is Ending.INFRA_ERROR:
        traj.outcome = Outcome.INFRA_ERROR.value
        return traj
    t0 = time.monotonic()
    result, _log = grade_patch(
        task, traj.patch, image=image, backend=backend, sandbox_limits=sandbox_limits
    )
    traj.grade_seconds = time.monotonic() - t0
    traj.outcome, traj.reward = result.outcome.value, result.reward
    traj.grade_detail = result.model_dump(mode="json")
    return traj
