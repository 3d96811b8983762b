"""The `openenv` rollout source: episodes played on a running OpenEnv server of our tasks.

`data.source: openenv` with `data.openenv.url` set: each rollout is one session of the server
(`deepswe-eval serve`, deepswe.eval.openenv) driven over its WebSocket by openenv's own client
(`SWEEnvClient`); the policy (the trainer's engine) writes every reply here and the server runs
the tools and the reward run in its sandboxes. The trajectory comes back as the `spine` source
makes it (the same messages, steps with the sampled ids, ending, patch, grade), so the two
sources can be checked against each other (training/tests/test_train_openenv_source.py).

The server owns the episode's limits (its `openenv.episode`: steps, wall time, tool timeouts,
prompts, scaffold) and the sandbox's; a session whose step limit differs from `episode.max_steps`
or whose opening chat differs from ours (`episode.prompt_variant`) is refused, naming them. The context budget is the client's, as in our loop: a chat past
`episode.max_context_tokens` (or one the engine refuses as too long) is submitted as it stands
and recorded `max_context`. Tasks are `data.path`'s, less what its health manifest refuses, each
asked for by id; a task the server refuses stops the run with the server's reason.
"""

from __future__ import annotations

import time
from typing import Any

from websockets.exceptions import ConnectionClosed

from deepswe.data.task import Task
from deepswe.env.agent.parser import parse_action
from deepswe.env.agent.prompts import build_messages
from deepswe.env.grading.outcomes import Outcome
from deepswe.env.policies import ContextExceeded, Policy, PolicyError, Reply
from deepswe.env.trajectory import Action, Ending, Step, Trajectory
from deepswe.eval.openenv.client import SWEEnvClient
from deepswe.eval.openenv.models import SWEAction, SWEObservation
from deepswe.train.config import TrainConfig
from deepswe.train.sources.task_list import training_tasks

# Failures of the wire or of the session, not of the episode: the row is infra_error (dropped),
# the run goes on. A server's error answer mid-episode (openenv's client raises RuntimeError with
# its message: the session closed past its TTL, a sandbox gone) is one too; at reset it is not
# (a task the server refuses is a config error and stops the run).
WIRE_ERRORS: tuple[type[BaseException], ...] = (OSError, TimeoutError, ConnectionClosed)
SUBMIT = SWEAction(tool="finish", parameters={"command": "submit"})


class OpenEnvSource:
    """Tasks from `data.path`; one server session per rollout at `data.openenv.url`."""

    @classmethod
    def from_config(cls, cfg: TrainConfig) -> OpenEnvSource:
        return cls(cfg)

    def __init__(self, cfg: TrainConfig, tasks: list[Task] | None = None) -> None:
        if cfg.data.openenv.url is None:
            raise ValueError("data.openenv.url: the openenv source needs the server's URL")
        self.cfg, self._tasks = cfg, tasks
        self.url, self.timeout_s = cfg.data.openenv.url, cfg.data.openenv.message_timeout_s
        self.limits = cfg.episode.limits(cfg.rollout)

    def tasks(self) -> list[Task]:
        if self._tasks is None:
            self._tasks = training_tasks(self.cfg.data)
        return self._tasks

    def rollout(self, task: Task, policy: Policy) -> Trajectory:
        traj = Trajectory(
            instance_id=task.instance_id,
            policy=policy.name,
            messages=[],
            ending=Ending.INFRA_ERROR,
        )
        started = time.monotonic()
        client = SWEEnvClient(base_url=self.url, message_timeout_s=self.timeout_s).sync()
        try:
            with client as env:
                first = env.reset(task_id=task.instance_id)
                if not first.done:
                    self._check_episode(task, env.state().max_steps, first.observation.messages)
                traj.messages = list(first.observation.messages)
                try:
                    last = first.observation if first.done else self._play(env, policy, traj)
                except RuntimeError as exc:
                    raise OSError(str(exc)) from exc
                if last is not None:
                    _record_end(traj, last)
                else:  # the policy failed as infrastructure: dropped ungraded
                    traj.outcome = Outcome.INFRA_ERROR
        except WIRE_ERRORS as exc:
            traj.ending, traj.ending_detail = Ending.INFRA_ERROR, f"openenv server: {exc}"
            traj.outcome, traj.reward, traj.grade = Outcome.INFRA_ERROR, None, None
        traj.wall_seconds = time.monotonic() - started
        return traj

    def _play(self, env: Any, policy: Policy, traj: Trajectory) -> SWEObservation | None:
        """Reply after reply until the server ends the episode; the last observation (None:
        the policy failed as infrastructure, the episode dropped ungraded)."""
        ending: Ending | None = None  # set when this side ends it (context, the policy)
        while True:
            used = policy.count_tokens(traj.messages)
            if used is not None and used >= self.limits.max_context_tokens:
                ending = Ending.MAX_CONTEXT
                traj.ending_detail = f"{used} tokens >= {self.limits.max_context_tokens}"
                break
            t0 = time.monotonic()
            try:
                reply = policy.reply(traj.messages, timeout=self.limits.model_timeout_s)
            except ContextExceeded as exc:
                ending, traj.ending_detail = Ending.MAX_CONTEXT, str(exc)
                break
            except PolicyError as exc:
                if exc.infra:
                    traj.ending, traj.ending_detail = Ending.INFRA_ERROR, str(exc)
                    return None
                ending, traj.ending_detail = Ending.AGENT_ERROR, str(exc)
                break
            result = env.step(SWEAction(message=reply.text or " "))  # "": a reply, no call
            _record_step(traj, reply, result.observation, time.monotonic() - t0)
            if result.done:
                return result.observation
        # Ended here: the patch as it stands is graded (finish), the ending kept as ours.
        result = env.step(SUBMIT)
        obs = result.observation
        if obs.ending != Ending.INFRA_ERROR.value:
            obs = obs.model_copy(update={"ending": ending.value, "reason": traj.ending_detail})
        return obs

    def _check_episode(self, task: Task, served_steps: int, opening: list[dict]) -> None:
        """The server's episodes are this run's: the same step limit and the opening chat our
        loop would show (the prompt variant); ValueError naming the fields otherwise."""
        limits = self.limits
        if served_steps != limits.max_steps:
            raise ValueError(
                f"episode.max_steps is {limits.max_steps} but the openenv server at {self.url} "
                f"runs episodes of {served_steps} steps (its openenv.episode.max_steps): make "
                "them equal"
            )
        ours = build_messages(
            task.public().problem_statement, limits.prompt_variant, limits.max_steps
        )
        if opening != ours:
            raise ValueError(
                f"the openenv server at {self.url} opens {task.instance_id} with another prompt "
                f"than episode.prompt_variant={limits.prompt_variant!r} gives: set its "
                "openenv.episode.prompt_variant to the same"
            )


def _record_step(traj: Trajectory, reply: Reply, obs: SWEObservation, seconds: float) -> None:
    """The step as our loop records it: the reply, its call, the tool's output, and the next
    user message (absent after a finish)."""
    parsed = parse_action(reply.text)
    action = Action(name=parsed.function_name, parameters=parsed.parameters)
    traj.steps.append(
        Step(
            index=len(traj.steps),
            assistant=reply.text,
            action=action if parsed.has_call else None,
            observation=obs.tool_output,
            exit_code=obs.exit_code,
            prompt_tokens=reply.prompt_tokens,
            completion_tokens=reply.completion_tokens,
            model_seconds=seconds,
            token_ids=reply.token_ids,
            logprobs=reply.logprobs,
        )
    )
    traj.messages.append({"role": "assistant", "content": reply.text})
    if obs.text:
        traj.messages.append({"role": "user", "content": obs.text})


def _record_end(traj: Trajectory, obs: SWEObservation) -> None:
    traj.ending = Ending(obs.ending or Ending.INFRA_ERROR.value)
    traj.patch, traj.grade, traj.grade_seconds = obs.patch, obs.grade, obs.grade_seconds
    if traj.ending is Ending.INFRA_ERROR or obs.outcome == Outcome.INFRA_ERROR.value:
        traj.ending_detail = traj.ending_detail or obs.reason
        traj.outcome, traj.reward = Outcome.INFRA_ERROR, None
        return
    traj.outcome = Outcome(obs.outcome) if obs.outcome else None
    traj.reward = obs.reward


__all__ = ["OpenEnvSource"]
