"""Policies: given the chat so far, the next assistant message.

Backends (one per sibling file), looked up by name or `module:Class` path: `openai` (any
OpenAI-compatible endpoint), `gold` (scripted: replays a known patch through the tools),
`gold-patch` (the gold patch graded as a patch, no episode: a policy with a `submission`),
`empty` (submits at once), `replay` (replays a recorded trajectory's messages). `PolicySpec` says which
policy an episode gets and `make_policy` builds it: the one factory every command uses.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from deepswe.env.registry import resolve

if TYPE_CHECKING:
    from deepswe.data.task import Task


class PolicyError(Exception):
    """The policy could not answer (after its own retries).

    `infra=True` (the endpoint was unreachable, overloaded or timed out, refused the key or
    no longer serves the model) ends the episode as infra_error, which training drops instead
    of scoring 0; otherwise agent_error (the request was refused for what the episode sent,
    e.g. a malformed chat).
    """

    def __init__(self, message: str, *, infra: bool = False) -> None:
        super().__init__(message)
        self.infra = infra


class ContextExceeded(PolicyError):
    """The server refused the chat as longer than the model's context: ends as max_context."""


@dataclass
class Reply:
    """One assistant message; token ids and log-probs when the engine reports them."""

    text: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None


@runtime_checkable
class Policy(Protocol):
    name: str

    def reply(self, messages: list[dict[str, str]], *, timeout: float) -> Reply:
        """The next assistant message for `messages` (OpenAI chat format)."""
        ...

    def count_tokens(self, messages: list[dict[str, str]]) -> int | None:
        """Tokens `messages` take in the policy's own tokenizer; None when it has none."""
        ...


POLICIES: dict[str, str] = {
    "openai": "deepswe.env.policies.openai:OpenAIPolicy",
    "gold": "deepswe.env.policies.scripted:GoldPolicy",
    "gold-patch": "deepswe.env.policies.scripted:GoldPatchPolicy",
    "empty": "deepswe.env.policies.scripted:EmptyPolicy",
    "replay": "deepswe.env.policies.replay:ReplayPolicy",
}


def policy_class(name: str) -> type:
    """The policy class for a registered name or a `module:Class` path."""
    return resolve(POLICIES, name, "policy")


class PolicySpec(BaseModel):
    """Which policy answers an episode, and how it is set up."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(
        "gold",
        description="gold | gold-patch | empty | openai | replay, or a plugged-in `module:Class`",
    )
    args: dict[str, str] = Field(
        default_factory=dict, description="constructor arguments of a plugged-in policy"
    )
    model: str | None = Field(None, description="openai: the model's name at the endpoint")
    base_url: str | None = Field(None, description="openai: the endpoint, http://HOST:PORT/v1")
    temperature: float = Field(1.0, ge=0, description="openai: sampling temperature (DeepSWE 1.0)")
    max_tokens: int | None = Field(None, gt=0, description="openai: cap per reply; None: none")
    seed: int | None = Field(
        None,
        description="openai: sample reply i of (task, run) with a seed made from this, the "
        "task id, the run and i (vLLM honours it): two models evaluated with one seed see paired "
        "draws. None: the server's own randomness",
    )
    replay_dir: str | None = Field(
        None, description="replay: recorded trajectories (a run folder, or <dir>/<id>.json)"
    )


def make_policy(spec: PolicySpec, task: Task, run: int = 0) -> Policy:
    """A fresh policy for one episode of `task` (scripted policies keep per-episode state).

    Bad input (a gold policy for a task without a gold patch, no recording to replay, an
    openai policy without its endpoint) raises ValueError or FileNotFoundError.
    """
    if spec.name in ("gold", "gold-patch"):
        if not task.gold_patch:
            raise ValueError(
                f"{task.instance_id}: policy {spec.name} needs a gold patch; the task has none"
            )
        return policy_class(spec.name)(task.gold_patch)
    if spec.name == "empty":
        return policy_class("empty")()
    if spec.name == "replay":
        if spec.replay_dir is None:
            raise ValueError("policy replay needs a replay_dir (--replay-dir)")
        return policy_class("replay")(replay_path(Path(spec.replay_dir), task.instance_id, run))
    if spec.name == "openai":
        if not (spec.base_url and spec.model):
            raise ValueError(
                "policy openai needs a base_url and a model (deepswe-env episode: --base-url, "
                "--model; deepswe-eval: eval.policy.base_url=, eval.policy.model=)"
            )
        return policy_class("openai")(
            base_url=spec.base_url,
            model=spec.model,
            temperature=spec.temperature,
            max_tokens=spec.max_tokens,
            seed=None if spec.seed is None else episode_seed(spec.seed, task.instance_id, run),
        )
    return policy_class(spec.name)(**spec.args)  # a plugged-in policy


def episode_seed(seed: int, instance_id: str, run: int) -> int:
    """A stable 31-bit seed for run `run` of a task: the same on every machine and process."""
    import zlib

    return zlib.crc32(f"{seed}:{instance_id}:{run}".encode()) & 0x7FFFFFFF


def replay_path(root: Path, instance_id: str, run: int) -> Path:
    """The recorded trajectory for (task, run) under `root`: an evaluation run folder
    (episodes/<id>/run-<k>.json), <id>/run-<k>.json, or one file per task (<id>.json)."""
    for candidate in (
        root / "episodes" / instance_id / f"run-{run}.json",
        root / instance_id / f"run-{run}.json",
        root / f"{instance_id}.json",
    ):
        if candidate.exists():
            return candidate
    raise FileNotFoundError(f"no recorded trajectory for {instance_id} run {run} under {root}")
