"""The action, observation and state types of the SWE environment (openenv's base classes).

The action is one reply of the agent as our parser reads it (`message`: the model's text with
one `<function=...>` call), or the same call given as fields (`tool` and `parameters`), written
out in the form the parser reads. Observations carry the text our loop would append to the chat
(`text`) and, once the episode is over, the grader's verdict: `reward` is 1.0 iff resolved, 0.0
otherwise, and None (absent) for infra_error, which is never a reward.
"""

from __future__ import annotations

from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field, model_validator

from deepswe.env.agent.parser import ParsedAction
from deepswe.env.grading.outcomes import GradeResult


class SWEAction(Action):
    """One tool call: the agent's reply (`message`), or the call as fields (`tool`)."""

    message: str = Field("", description="the model's reply, one <function=NAME> call in it")
    tool: str | None = Field(
        None, description="file_editor | search | execute_bash | finish (instead of message)"
    )
    parameters: dict[str, str] = Field(default_factory=dict, description="the tool's parameters")

    @model_validator(mode="after")
    def _one_form(self) -> SWEAction:
        if (self.tool is None) == (not self.message):
            raise ValueError("give exactly one of `message` (the reply) or `tool` (+ parameters)")
        if self.tool is None and self.parameters:
            raise ValueError("`parameters` go with `tool`, not with `message`")
        return self

    def text(self) -> str:
        """The reply as the agent loop records it."""
        if self.tool is None:
            return self.message
        return ParsedAction(
            thought="", function_name=self.tool, parameters=self.parameters
        ).to_xml()


class SWEObservation(Observation):
    """What the agent sees. At reset: `messages` (system prompt with the tool descriptions, and
    the task's issue). At each step: `text`, the next user message as our loop writes it (the
    tool's output and the steps-remaining reminder). At the end (`done`): the ending, the
    grader's `outcome` and `reason`, the `patch`, and `reward` (None for infra_error)."""

    instance_id: str = Field("", description="the task")
    messages: list[dict[str, str]] = Field(
        default_factory=list, description="reset: the opening chat (system, user)"
    )
    tools: list[str] = Field(default_factory=list, description="reset: the tools' names")
    text: str = Field("", description="step: the next user message, as our agent loop shows it")
    tool_output: str = Field("", description="step: the tool's observation alone")
    exit_code: int | None = Field(None, description="step: the tool's exit status, if it ran")
    step: int = Field(0, ge=0, description="steps taken so far")
    ending: str | None = Field(
        None, description="submitted | max_steps | timeout | infra_error (done only)"
    )
    outcome: str | None = Field(
        None,
        description="resolved | unresolved | patch_apply_failed | test_timeout | tampered | "
        "infra_error (done only)",
    )
    reason: str = Field("", description="why the episode ended or the grader decided so")
    patch: str = Field("", description="done: the agent's change, as graded")
    grade: GradeResult | None = Field(
        None,
        description="done: the grader's verdict in full (test statuses, static-gate findings), "
        "as our own episodes record it; None when not graded",
    )
    grade_seconds: float = Field(0.0, ge=0, description="done: seconds the reward run took")


class SWEState(State):
    """The session's episode: which task, how far, how it ended."""

    instance_id: str | None = None
    max_steps: int = 0
    seconds_left: float | None = None
    done: bool = False
    ending: str | None = None
    outcome: str | None = None
    reward: float | None = None
    closed: str | None = Field(None, description="why the session was closed, once it is")
    tasks: int = Field(0, description="tasks this server serves")
    refused: int = Field(0, description="tasks it refuses (unhealthy, or not gradable here)")


__all__ = ["SWEAction", "SWEObservation", "SWEState"]
