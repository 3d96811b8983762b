"""Policies: given the chat so far, the next assistant message.

Backends (one per sibling file), looked up by name or `module:Class` dotted path:
`openai` (any OpenAI-compatible endpoint), `gold` (scripted: replays a known patch through the
tools), `empty` (submits at once), `replay` (replays a recorded trajectory's messages).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from deepswe.env.registry import resolve


class PolicyError(Exception):
    """The policy could not answer (after its own retries).

    `infra=True` (the endpoint was unreachable, overloaded or timed out) ends the episode as
    infra_error, which training drops instead of scoring 0; otherwise agent_error (the request
    was refused for what the episode sent, e.g. a malformed chat).
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
    "empty": "deepswe.env.policies.scripted:EmptyPolicy",
    "replay": "deepswe.env.policies.replay:ReplayPolicy",
}


def policy_class(name: str) -> type:
    """The policy class for a registered name or a `module:Class` dotted path."""
    return resolve(POLICIES, name, "policy")
