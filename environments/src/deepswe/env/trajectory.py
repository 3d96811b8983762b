"""What one episode leaves behind: every message, action, observation, count and timing.

GRPO++'s compact filtering reads `ending`; evaluation reads `grade`; the execution-free verifier
renders `messages`.
"""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel, ConfigDict, Field

from deepswe.env.grading.outcomes import GradeResult, Outcome


class Ending(str, Enum):
    """Why an episode ended. Only SUBMITTED means the agent chose to stop."""

    SUBMITTED = "submitted"
    MAX_STEPS = "max_steps"
    MAX_CONTEXT = "max_context"
    TIMEOUT = "timeout"
    AGENT_ERROR = "agent_error"  # the policy's request was refused for what the episode sent
    INFRA_ERROR = "infra_error"  # sandbox, endpoint, patch taking or grading failed: no reward


class Action(BaseModel):
    """A parsed tool call."""

    model_config = ConfigDict(extra="forbid")

    name: str
    parameters: dict[str, str] = Field(default_factory=dict)


class Step(BaseModel):
    """One model turn and what the environment answered."""

    model_config = ConfigDict(extra="forbid")

    index: int
    assistant: str = Field(description="the model's full reply, thinking included")
    action: Action | None = Field(None, description="None when the reply held no valid call")
    observation: str = ""
    exit_code: int | None = None
    action_timed_out: bool = False
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    model_seconds: float = 0.0
    tool_seconds: float = 0.0
    token_ids: list[int] | None = Field(None, description="sampled ids, when the engine gives them")
    logprobs: list[float] | None = Field(None, description="their log-probs, same length")


TEST_LOG_MAX_CHARS = 1 << 20  # a test log kept per episode: 1 Mi characters at most


def capped_log(text: str, limit: int = TEST_LOG_MAX_CHARS) -> str:
    """`text`, or its first and last halves of `limit` with a line saying what was cut."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters cut ...]\n{text[-half:]}"


class Trajectory(BaseModel):
    """One episode, from the first prompt to the grade."""

    model_config = ConfigDict(extra="forbid")

    instance_id: str
    policy: str
    messages: list[dict[str, str]] = Field(description="the chat as the model last saw it")
    steps: list[Step] = Field(default_factory=list)
    ending: Ending
    ending_detail: str = ""
    patch: str = ""
    outcome: Outcome | None = Field(None, description="the grader's outcome, once graded")
    reward: float | None = Field(None, description="1.0 iff resolved; None when not graded")
    grade: GradeResult | None = Field(None, description="the grader's verdict in full")
    test_log: str = Field(
        "",
        description="the reward run's log and the test process's output, what swebench keeps "
        "as test_output.txt (deepswe.env.reward.RewardRun.text; head and tail kept past "
        "TEST_LOG_MAX_CHARS)",
    )
    wall_seconds: float = 0.0
    grade_seconds: float = 0.0
    policy_version: int | None = Field(
        None,
        description="training: the optimizer steps done on the weights that sampled it "
        "(deepswe.train.trainer); None outside training",
    )

    @property
    def prompt_tokens(self) -> int:
        return sum(s.prompt_tokens or 0 for s in self.steps)

    @property
    def completion_tokens(self) -> int:
        return sum(s.completion_tokens or 0 for s in self.steps)

    def summary(self) -> dict:
        """The one-line JSON the CLI prints."""
        return {
            "instance_id": self.instance_id,
            "outcome": self.outcome.value if self.outcome else None,
            "reward": self.reward,
            "ended": self.ending.value,
            "steps": len(self.steps),
            "seconds": round(self.wall_seconds + self.grade_seconds, 2),
        }
