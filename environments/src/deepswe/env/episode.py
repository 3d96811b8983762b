"""One whole episode for a task: image -> sandbox -> agent loop -> fresh sandbox -> grade.

This is what evaluation and training call per (task, rollout). An infrastructure failure at any
stage (sandbox, the agent's episode, taking the patch, grading) makes the trajectory's ending
infra_error and its outcome INFRA_ERROR, with reward None: never a reward 0.
"""

from __future__ import annotations

import time

import docker.errors
import requests.exceptions

from deepswe.data.task import Task
from deepswe.env.agent.loop import EpisodeLimits, run_episode
from deepswe.env.grading.outcomes import GradeResult, Outcome
from deepswe.env.images.base import ImageBuildError
from deepswe.env.images.task import ensure_task_image
from deepswe.env.policies import Policy
from deepswe.env.reward import run_reward
from deepswe.env.sandbox import SandboxError, SandboxLimits, backend_class
from deepswe.env.trajectory import Ending, Trajectory

# What a harness may raise for reasons that are nobody's answer: the sandbox or image layer, the
# Docker engine, a network call. A caller retries these and records them as infra_error;
# anything else is a bug (in a policy, a plug-in, the harness) and must stop the run.
INFRA_EXCEPTIONS: tuple[type[BaseException], ...] = (
    SandboxError,
    ImageBuildError,
    docker.errors.DockerException,
    requests.exceptions.RequestException,
)


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
            outcome=Outcome.INFRA_ERROR,
            wall_seconds=time.monotonic() - started,
        )
    try:
        traj = run_episode(task, policy, sandbox, limits)
    finally:
        sandbox.close()
    if not grade:
        return traj
    if traj.ending is Ending.INFRA_ERROR:
        traj.outcome = Outcome.INFRA_ERROR
        return traj
    t0 = time.monotonic()
    result, _log = grade_patch(
        task, traj.patch, image=image, backend=backend, sandbox_limits=sandbox_limits
    )
    traj.grade_seconds = time.monotonic() - t0
    traj.grade, traj.outcome = result, result.outcome
    if result.outcome is Outcome.INFRA_ERROR:
        # The agent's episode was fine; its grading was not. The whole row is infra_error: no
        # reward, and the ending says so, since trainers and reports filter on the ending.
        traj.ending_detail = f"grading failed after the episode ended ({traj.ending.value}): " + (
            result.reason
        )
        traj.ending, traj.reward = Ending.INFRA_ERROR, None
        return traj
    traj.reward = result.reward
    return traj
