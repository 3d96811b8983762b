"""The agent loop: one task, one policy, one sandbox -> a Trajectory.

ask -> parse -> act -> observe, until the policy calls `finish` or a limit ends the episode.
Every ending is an exception of one small family, caught in exactly one place (`run_episode`).
"""

from __future__ import annotations

import time

from pydantic import BaseModel, ConfigDict, Field

from deepswe.data.task import Task
from deepswe.env.agent import prompts
from deepswe.env.agent.parser import ParsedAction, parse_action
from deepswe.env.policies import ContextExceeded, Policy, PolicyError, Reply
from deepswe.env.r2e_layout import hide_grading_material, uses_r2e_layout
from deepswe.env.sandbox import Sandbox, SandboxError
from deepswe.env.tools import error_observation, format_observation, timeout_observation
from deepswe.env.tools.calls import TOOL_SPECS, shell_command, tool_files
from deepswe.env.tools.observation import FINISHED_OBSERVATION
from deepswe.env.tools.scaffold import SANDBOX_DECODER, Scaffold, decoder_wheel, ends_episode
from deepswe.env.trajectory import Action, Ending, Step, Trajectory
from deepswe.env.workspace import PatchNotTaken, agent_patch, take_snapshot

TOOLS_DIR = "/usr/local/bin"


class EpisodeLimits(BaseModel):
    """Limits of one episode. Defaults: DeepSWE's evaluation protocol (R2E-Gym's runner)."""

    model_config = ConfigDict(extra="forbid")

    max_steps: int = Field(100, gt=0, description="hard step limit (training: 50)")
    max_context_tokens: int = Field(65_536, gt=0, description="context budget (training: 32,768)")
    action_timeout_s: float = Field(90.0, gt=0, description="per tool call")
    model_timeout_s: float = Field(600.0, gt=0, description="per model call")
    wall_timeout_s: float = Field(5_400.0, gt=0, description="whole trajectory")
    prompt_variant: prompts.Variant = Field("eval", description="eval: R2E-Gym; train: rLLM")
    keep_thinking: bool = Field(True, description="keep <think> in history (the reference did)")
    workdir: str = Field("/testbed", description="where the repository is")
    scaffold: Scaffold = Field(
        "deepswe",
        description="r2e-gym: R2E-Gym's observable behaviour where it differs by design "
        "(deepswe.env.tools.scaffold); deepswe: clearer messages",
    )


def install_tools(sandbox: Sandbox, scaffold: Scaffold = "deepswe") -> None:
    """Put the four tools on the sandbox's PATH as executables (and, for the r2e-gym scaffold,
    the editor's decoder where it looks)."""
    for name, path in tool_files().items():
        sandbox.write_file(f"{TOOLS_DIR}/{name}", path.read_bytes(), mode=0o755)
    if scaffold == "r2e-gym":
        sandbox.write_file(SANDBOX_DECODER, decoder_wheel().read_bytes())


def _context_tokens(policy: Policy, messages: list[dict[str, str]], last: Reply | None) -> int:
    """Tokens in the chat: the policy's tokenizer if it has one, else the server's last count
    (prompt + completion), else about 4 characters a token."""
    counted = policy.count_tokens(messages)
    if counted is not None:
        return counted
    if last is not None and last.prompt_tokens is not None:
        return last.prompt_tokens + (last.completion_tokens or 0)
    return sum(len(m["content"]) for m in messages) // 4


def _observe(
    parsed: ParsedAction, sandbox: Sandbox, limits: EpisodeLimits, budget_s: float
) -> tuple[str, Step]:
    """Run the parsed call (if it can run) and return its observation and the step record."""
    step = Step(index=0, assistant="")
    if not parsed.has_call:
        return prompts.continue_message(limits.prompt_variant), step
    step.action = Action(name=parsed.function_name, parameters=parsed.parameters)
    if parsed.error is not None:
        if limits.scaffold == "r2e-gym" and parsed.function_name not in TOOL_SPECS:
            # R2E-Gym's run_action catches its "Invalid Action" assertion: empty output.
            return format_observation(parsed.function_name, "", "", 0), step
        return error_observation(parsed.function_name, parsed.error), step
    call = parsed.call
    assert call is not None
    timeout = max(1.0, min(limits.action_timeout_s, budget_s))
    started = time.monotonic()
    r = sandbox.run(shell_command(call), timeout=timeout, cwd=limits.workdir)
    step.tool_seconds = time.monotonic() - started
    step.exit_code, step.action_timed_out = r.exit_code, r.timed_out
    if r.timed_out:
        return timeout_observation(timeout, call.name), step
    return format_observation(call.name, r.stdout, r.stderr, r.exit_code), step


def _ends(parsed: ParsedAction, scaffold: Scaffold) -> bool:
    """Whether this reply ends the episode: `finish` that can run; under r2e-gym, as in R2E-Gym's
    `RepoEnv.step`, any function whose name holds "finish" or "submit", whatever its parameters."""
    if not parsed.has_call or not ends_episode(parsed.function_name, scaffold):
        return False
    return scaffold == "r2e-gym" or parsed.error is None


def _finished(parsed: ParsedAction, scaffold: Scaffold) -> str:
    """The observation recorded for the last step (never shown to the model)."""
    if scaffold == "deepswe":
        return ""
    if parsed.function_name in ("finish", "submit"):
        return FINISHED_OBSERVATION
    return format_observation(parsed.function_name, "", "", 0)  # an invalid action's


class EpisodeEnd(Exception):
    """How an episode ends: raised by `ToolEnv` (and the loop), caught where the episode is run."""

    def __init__(self, ending: Ending, detail: str = "") -> None:
        super().__init__(detail)
        self.ending, self.detail = ending, detail


class ToolEnv:
    """The environment half of the loop: the chat so far, the sandbox behind the tools, the
    step and wall-time limits. `run_episode` asks a policy for each reply; the OpenEnv server
    (deepswe.eval.openenv) takes each from its client. Both go through `take`, so the two see
    the same observations."""

    def __init__(self, task: Task, policy: str, sandbox: Sandbox, limits: EpisodeLimits) -> None:
        public = task.public()
        self.task, self.sandbox, self.limits = task, sandbox, limits
        self.traj = Trajectory(
            instance_id=public.instance_id,
            policy=policy,
            messages=prompts.build_messages(
                public.problem_statement, limits.prompt_variant, limits.max_steps
            ),
            ending=Ending.INFRA_ERROR,
        )
        self.started = time.monotonic()  # the trajectory's wall_seconds count from here
        self.clock = self.started  # the wall-time limit counts from the end of `prepare`

    def prepare(self) -> None:
        """The sandbox made ready for the agent: grading material hidden, the start snapshot
        taken (the patch's "before"), the tools installed. SandboxError on failure."""
        if uses_r2e_layout(self.task):  # an R2E-Gym image's hidden tests and test script: gone
            hide_grading_material(self.sandbox, self.limits.workdir)
        take_snapshot(self.sandbox, self.limits.workdir)
        install_tools(self.sandbox, self.limits.scaffold)
        self.clock = time.monotonic()

    def seconds_left(self) -> float:
        """Seconds left of the trajectory's wall time; EpisodeEnd(TIMEOUT) when none are."""
        left = self.limits.wall_timeout_s - (time.monotonic() - self.clock)
        if left <= 0:
            raise EpisodeEnd(
                Ending.TIMEOUT, f"trajectory wall time {self.limits.wall_timeout_s:.0f}s used"
            )
        return left

    def take(self, reply: Reply, model_seconds: float = 0.0) -> str:
        """Record `reply`, run its tool call and return the next user message (observation and
        step reminder). EpisodeEnd(SUBMITTED) after a `finish`, (MAX_STEPS) after the last step."""
        limits, traj, i = self.limits, self.traj, len(self.traj.steps)
        parsed = parse_action(reply.text)
        shown = reply.text if limits.keep_thinking else prompts.strip_thinking(reply.text)
        traj.messages.append({"role": "assistant", "content": shown})
        ends = _ends(parsed, limits.scaffold)
        if ends:
            observation, step = _finished(parsed, limits.scaffold), Step(index=i, assistant="")
            step.action = Action(name=parsed.function_name, parameters=parsed.parameters)
        else:
            left = limits.wall_timeout_s - (time.monotonic() - self.clock)
            observation, step = _observe(parsed, self.sandbox, limits, left)
        step.index, step.assistant, step.observation = i, reply.text, observation
        step.model_seconds = model_seconds
        step.prompt_tokens, step.completion_tokens = reply.prompt_tokens, reply.completion_tokens
        step.token_ids, step.logprobs = reply.token_ids, reply.logprobs
        traj.steps.append(step)
        if ends:
            raise EpisodeEnd(Ending.SUBMITTED)
        message = observation + prompts.step_reminder(
            limits.max_steps, i + 1, limits.prompt_variant
        )
        traj.messages.append({"role": "user", "content": message})
        if i + 1 >= limits.max_steps:
            raise EpisodeEnd(Ending.MAX_STEPS, f"{limits.max_steps} steps")
        return message

    def end(self, exc: EpisodeEnd | SandboxError) -> None:
        """Record how the episode ended (an EpisodeEnd, or a sandbox failure: infra_error)."""
        if isinstance(exc, EpisodeEnd):
            self.traj.ending, self.traj.ending_detail = exc.ending, exc.detail
        else:
            self.traj.ending, self.traj.ending_detail = Ending.INFRA_ERROR, str(exc)

    def finish(self) -> Trajectory:
        """The trajectory with the agent's patch taken (unless it already ended infra_error)."""
        traj = self.traj
        if traj.ending is not Ending.INFRA_ERROR:
            try:
                traj.patch = agent_patch(self.sandbox, self.limits.workdir)
            except PatchNotTaken as exc:  # the agent destroyed its repository: no change
                traj.ending_detail = "; ".join(filter(None, [traj.ending_detail, f"patch: {exc}"]))
            except SandboxError as exc:  # never an empty patch: nobody's answer is known
                traj.ending, traj.ending_detail = Ending.INFRA_ERROR, f"taking the patch: {exc}"
        traj.wall_seconds = time.monotonic() - self.started
        return traj


def _loop(policy: Policy, env: ToolEnv) -> None:
    """Ask `policy` for each reply until `env` ends the episode (always by raising)."""
    limits, last = env.limits, None
    while True:
        left = env.seconds_left()
        used = _context_tokens(policy, env.traj.messages, last)
        if used >= limits.max_context_tokens:
            raise EpisodeEnd(Ending.MAX_CONTEXT, f"{used} tokens >= {limits.max_context_tokens}")
        t0 = time.monotonic()
        last = policy.reply(env.traj.messages, timeout=min(limits.model_timeout_s, left))
        env.take(last, time.monotonic() - t0)


def run_episode(
    task: Task, policy: Policy, sandbox: Sandbox, limits: EpisodeLimits | None = None
) -> Trajectory:
    """Run one episode in `sandbox` (started from the task's image; not closed here)."""
    env = ToolEnv(task, policy.name, sandbox, limits or EpisodeLimits())
    try:
        env.prepare()
        _loop(policy, env)
    except (EpisodeEnd, SandboxError) as exc:
        env.end(exc)
    except ContextExceeded as exc:
        env.traj.ending, env.traj.ending_detail = Ending.MAX_CONTEXT, str(exc)
    except PolicyError as exc:
        env.traj.ending = Ending.INFRA_ERROR if exc.infra else Ending.AGENT_ERROR
        env.traj.ending_detail = str(exc)
    return env.finish()
