"""One session of the SWE environment: a task's sandbox behind R2E-Gym's four tools.

openenv's server makes one `SWEEnvironment` per session (WebSocket connection) and calls
`close` when the client disconnects or dies, or when the session sat idle past its TTL; each
episode's sandbox is started through the backend's admission gate and labelled with this
process as owner (deepswe.env.sandbox), so what a killed server leaves is reaped like any
other. The steps are `deepswe.env.agent.loop.ToolEnv`'s, the ending's grade
`deepswe.env.episode.grade_trajectory`'s: the code our own episodes run.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import EnvironmentMetadata

from deepswe.env.agent.loop import EpisodeEnd, ToolEnv
from deepswe.env.episode import grade_trajectory, open_sandbox, start_failure
from deepswe.env.grading.outcomes import Outcome
from deepswe.env.images.base import ImageBuildError
from deepswe.env.images.task import ensure_task_image
from deepswe.env.policies import Reply
from deepswe.env.sandbox import Sandbox, SandboxError
from deepswe.env.tools.calls import TOOL_NAMES
from deepswe.env.trajectory import Ending, Trajectory
from deepswe.eval.openenv.config import OpenEnvConfig
from deepswe.eval.openenv.door import TaskDoor
from deepswe.eval.openenv.models import SWEAction, SWEObservation, SWEState

POLICY = "openenv"  # the trajectory's policy name: the client's agent, whoever it is


class SessionClosed(RuntimeError):
    """A call on a session the server already closed; the message says why."""


class NoEpisode(RuntimeError):
    """A step with no episode running: before the first reset, or after one ended."""


class SWEEnvironment(Environment[SWEAction, SWEObservation, SWEState]):
    """One session: reset -> a task's sandbox; step -> one tool call; the end -> its grade."""

    SUPPORTS_CONCURRENT_SESSIONS = True  # each session has its own sandbox, nothing shared

    def __init__(self, door: TaskDoor, config: OpenEnvConfig) -> None:
        super().__init__()
        self.door, self.config = door, config
        self._env: ToolEnv | None = None
        self._sandbox: Sandbox | None = None
        self._image: str | None = None
        self._final: SWEObservation | None = None
        self._state = SWEState(tasks=len(door.tasks), refused=len(door.refused))
        self._closed: str | None = None
        self._last_call = time.monotonic()

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        task_id: str | None = None,
        **kwargs: Any,
    ) -> SWEObservation:
        """A new episode (the previous one, if unfinished, is dropped ungraded): the task
        `task_id`, or the one `seed` draws, or the next of the set. TaskRefused names why a
        task is not served; a sandbox that cannot start ends the episode at once infra_error."""
        self._check_open()
        if kwargs:
            raise ValueError(
                f"reset: unknown argument(s) {', '.join(sorted(kwargs))}; "
                "known: task_id, seed, episode_id"
            )
        self._drop_sandbox()
        task = self.door.pick(task_id, seed)
        self._env, self._final = None, None
        self._state = SWEState(
            episode_id=episode_id or uuid.uuid4().hex,
            instance_id=task.instance_id,
            max_steps=self.config.episode.max_steps,
            tasks=len(self.door.tasks),
            refused=len(self.door.refused),
        )
        env = self._start(task)
        self._touch()
        if env is None:
            return self._final  # type: ignore[return-value]
        return SWEObservation(
            instance_id=task.instance_id,
            messages=[dict(m) for m in env.traj.messages],
            tools=list(TOOL_NAMES),
        )

    def step(
        self, action: SWEAction, timeout_s: float | None = None, **kwargs: Any
    ) -> SWEObservation:
        """One tool call; at the episode's end (finish, the step or time limit, a dead sandbox)
        the patch is graded and the observation is `done` with outcome, reward and patch."""
        self._check_open()
        env = self._env
        if env is None or self._final is not None:
            raise NoEpisode(
                "no episode is running: call reset first"
                if env is None
                else f"the episode ended ({self._final.ending}): call reset for another"
            )
        messages, steps = len(env.traj.messages), len(env.traj.steps)
        try:
            env.seconds_left()
            text = env.take(Reply(text=action.text()))
        except (EpisodeEnd, SandboxError) as exc:
            env.end(exc)
            return self._ended(env, messages, steps)
        finally:
            self._touch()
        step = env.traj.steps[-1]
        self._state.step_count = len(env.traj.steps)
        return SWEObservation(
            instance_id=env.traj.instance_id,
            text=text,
            tool_output=step.observation,
            exit_code=step.exit_code,
            step=len(env.traj.steps),
        )

    @property
    def state(self) -> SWEState:
        if self._env is not None and self._final is None:
            left = self.config.episode.wall_timeout_s - (time.monotonic() - self._env.clock)
            self._state.seconds_left = max(0.0, left)
        self._state.closed = self._closed
        return self._state

    def close(self) -> None:
        """The session's end (client gone, idle past the TTL, server stopping): its sandbox is
        removed; a later call says why the session is closed."""
        if self._closed is None:
            idle, ttl = time.monotonic() - self._last_call, self.config.session_ttl_s
            self._closed = (
                f"this session was closed after {idle:.0f} s idle (the server's session_ttl_s "
                f"is {ttl:g} s) and its sandbox removed: open a new session"
                if ttl is not None and idle >= ttl
                else "this session was closed by the server: open a new session"
            )
        self._drop_sandbox()

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name="deepswe-swe",
            description="SWE tasks (swe-mini, R2E-Gym, SWE-Bench-Verified, task files) in "
            "Docker sandboxes behind R2E-Gym's tools, graded by deepswe's hardened grader",
            version="0.1.0",
        )

    def _start(self, task) -> ToolEnv | None:
        """The episode's sandbox started and prepared; None (and the ended observation kept)
        when the image or the sandbox fails: infra_error."""
        limits, backend = self.config.sandbox, self.config.sandbox_backend
        try:
            with self.door.image_lock(task.instance_id):  # one build per image, not per session
                ensure_task_image(task, log=lambda _: None)
            self._image, self._sandbox = open_sandbox(task, backend, limits)
        except (SandboxError, ImageBuildError) as exc:
            traj = Trajectory(
                instance_id=task.instance_id,
                policy=POLICY,
                messages=[],
                ending=Ending.INFRA_ERROR,
                ending_detail=start_failure(exc),
                outcome=Outcome.INFRA_ERROR,
            )
            self._final = self._verdict(traj, "", "")
            return None
        env = ToolEnv(task, POLICY, self._sandbox, self.config.episode)
        self._env = env
        try:
            env.prepare()
        except SandboxError as exc:
            env.end(exc)
            self._ended(env, len(env.traj.messages), 0)
            return None
        return env

    def _ended(self, env: ToolEnv, messages: int, steps: int) -> SWEObservation:
        """The episode over: the patch taken, the sandbox closed, the reward run (the same as
        run_task's); `messages` and `steps`: how many there were before this call."""
        traj = env.finish()
        self._drop_sandbox()
        task = self.door.tasks[traj.instance_id]
        cfg = self.config
        traj = grade_trajectory(traj, task, self._image, cfg.sandbox_backend, cfg.sandbox)
        new = traj.messages[messages:]
        text = new[-1]["content"] if new and new[-1]["role"] == "user" else ""
        output = traj.steps[-1].observation if len(traj.steps) > steps else ""
        self._final = self._verdict(traj, text, output)
        self._state.step_count = len(traj.steps)
        return self._final

    def _verdict(self, traj: Trajectory, text: str, output: str) -> SWEObservation:
        outcome = traj.outcome.value if traj.outcome is not None else None
        reason = traj.grade.reason if traj.grade is not None else ""
        if traj.ending is Ending.INFRA_ERROR:  # never a reward: the trainer masks the row
            outcome, reason = Outcome.INFRA_ERROR.value, traj.ending_detail
        self._state.done, self._state.ending = True, traj.ending.value
        self._state.outcome, self._state.reward = outcome, traj.reward
        return SWEObservation(
            instance_id=traj.instance_id,
            text=text,
            tool_output=output,
            step=len(traj.steps),
            done=True,
            reward=traj.reward,
            ending=traj.ending.value,
            outcome=outcome,
            reason=reason or traj.ending_detail,
            patch=traj.patch,
            grade=traj.grade,
            grade_seconds=traj.grade_seconds,
        )

    def _drop_sandbox(self) -> None:
        sandbox, self._sandbox = self._sandbox, None
        if sandbox is not None:
            sandbox.close()

    def _check_open(self) -> None:
        if self._closed is not None:
            raise SessionClosed(self._closed)

    def _touch(self) -> None:
        self._last_call = time.monotonic()


__all__ = ["NoEpisode", "SWEEnvironment", "SessionClosed"]
