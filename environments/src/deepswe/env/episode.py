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
from deepswe.env.reward import RewardRun, run_reward
from deepswe.env.sandbox import Sandbox, SandboxError, SandboxLimits, backend_class
from deepswe.env.trajectory import Ending, Trajectory, capped_log

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
) -> RewardRun:
    """Grade `patch` for `task` in a fresh sandbox: the grade, its log and the test output.

    Infra failures the patch causes are the patch's: when grading fails once the patch is
    applied (the task's tests cannot be put in place or run on the patched tree), the clean
    tree is graded in a fresh sandbox; if that runs, the patched tree is tried once more (a
    passing hiccup of the engine is nobody's answer) and, failing again, is unresolved.
    """
    # The hidden tests see the machine's CPUs, as in the reference harness (no CPU quota).
    sandbox_limits = (sandbox_limits or SandboxLimits()).for_grading()
    first = _grade_once(task, patch, image, backend, sandbox_limits)
    if first.grade.outcome is not Outcome.INFRA_ERROR or not first.after_patch:
        return first
    clean = _grade_once(task, "", image, backend, sandbox_limits)
    if clean.grade.outcome is Outcome.INFRA_ERROR:
        return first  # the clean tree fails too: the task or the harness, not the patch
    again = _grade_once(task, patch, image, backend, sandbox_limits)
    if again.grade.outcome is not Outcome.INFRA_ERROR:
        return again
    reason = (
        "the task's tests could not be put in place or run on the patched tree (twice), but "
        f"ran on the clean tree: the patch's doing ({first.grade.reason})"
    )
    result = first.grade.model_copy(update={"outcome": Outcome.UNRESOLVED, "reason": reason})
    return RewardRun(result, first.log, first.output)


# How a row whose task image failed to build is reported: no episode ran, nothing was graded.
IMAGE_FAILED = "the task's image failed to build (nothing was graded): "


def _grade_once(
    task: Task,
    patch: str,
    image: str | None,
    backend: str,
    sandbox_limits: SandboxLimits | None,
) -> RewardRun:
    try:
        image = image or ensure_task_image(task, log=lambda _: None)
        sandbox = backend_class(backend)(image, sandbox_limits)
    except (SandboxError, ImageBuildError) as exc:
        result = GradeResult(
            outcome=Outcome.INFRA_ERROR,
            parser=task.test_spec.log_parser,
            reason=f"{IMAGE_FAILED}{exc}" if isinstance(exc, ImageBuildError) else str(exc),
        )
        return RewardRun(result, "")
    try:
        return run_reward(task, patch, sandbox)
    finally:
        sandbox.close()


def open_sandbox(
    task: Task, backend: str = "docker", sandbox_limits: SandboxLimits | None = None
) -> tuple[str, Sandbox]:
    """(the task's image, a sandbox started from it): the image built when missing, the start
    through the backend's admission gate. ImageBuildError or SandboxError on failure."""
    image = ensure_task_image(task, log=lambda _: None)
    return image, backend_class(backend)(image, sandbox_limits)


def start_failure(exc: SandboxError | ImageBuildError) -> str:
    """The ending detail of an episode whose sandbox could not be started."""
    if isinstance(exc, ImageBuildError):
        return f"{IMAGE_FAILED}{exc}"
    return f"sandbox: {exc}"


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
    submission = getattr(policy, "submission", None)
    if submission is not None:  # a patch made elsewhere: graded as it is, no episode
        traj = Trajectory(
            instance_id=task.instance_id,
            policy=policy.name,
            messages=[],
            ending=Ending.SUBMITTED,
            patch=submission,
        )
        return grade_trajectory(traj, task, None, backend, sandbox_limits) if grade else traj
    try:
        image, sandbox = open_sandbox(task, backend, sandbox_limits)
    except (SandboxError, ImageBuildError) as exc:
        return Trajectory(
            instance_id=task.instance_id,
            policy=policy.name,
            messages=[],
            ending=Ending.INFRA_ERROR,
            ending_detail=start_failure(exc),
            outcome=Outcome.INFRA_ERROR,
            wall_seconds=time.monotonic() - started,
        )
    try:
        traj = run_episode(task, policy, sandbox, limits)
    finally:
        sandbox.close()
    if not grade:
        return traj
    return grade_trajectory(traj, task, image, backend, sandbox_limits)


def grade_trajectory(
    traj: Trajectory,
    task: Task,
    image: str | None,
    backend: str,
    sandbox_limits: SandboxLimits | None,
) -> Trajectory:
    """`traj` with its patch graded: grade, outcome, reward, test log (infra_error: no reward).
    A trajectory that already ended infra_error is not graded: its outcome is infra_error."""
    if traj.ending is Ending.INFRA_ERROR:
        traj.outcome = Outcome.INFRA_ERROR
        return traj
    t0 = time.monotonic()
    run = grade_patch(task, traj.patch, image=image, backend=backend, sandbox_limits=sandbox_limits)
    result = run.grade
    traj.test_log = capped_log(run.text)
    traj.grade_seconds = time.monotonic() - t0
    traj.grade, traj.outcome = result, result.outcome
    if result.outcome is Outcome.INFRA_ERROR:
        # The agent's episode was fine; its grading was not. The whole row is infra_error: no
        # reward, and the ending says so, since trainers and reports filter on the ending.
        if result.reason.startswith(IMAGE_FAILED):  # nothing was graded: say what failed
            traj.ending_detail = result.reason
        else:
            traj.ending_detail = (
                f"grading failed after the episode ended ({traj.ending.value}): {result.reason}"
            )
        traj.ending, traj.reward = Ending.INFRA_ERROR, None
        return traj
    traj.reward = result.reward
    return traj
