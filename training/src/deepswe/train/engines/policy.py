"""EnginePolicy: any InferenceEngine as the spine's `Policy`, for one episode.

The agent loop hands over the chat as messages; this adapter keeps the episode's token sequence
itself (deepswe.train.rollout.build_sequence): earlier replies enter the context as the ids that
were sampled, not re-tokenised text, so the model sees exactly the sequence it is trained on.
One instance per episode (it remembers that episode's samples); the engine is shared.
"""

from __future__ import annotations

from deepswe.env.policies import ContextExceeded, Reply
from deepswe.train.engines import InferenceEngine
from deepswe.train.rollout import ChatRenderer, build_sequence


class EnginePolicy:
    """Implements deepswe.env.policies.Policy over an engine; seeds derive from `seed`."""

    def __init__(
        self,
        engine: InferenceEngine,
        *,
        temperature: float = 1.0,
        max_tokens: int = 32768,
        max_context_tokens: int | None = None,
        seed: int | None = None,
    ) -> None:
        self.engine = engine
        self.name = f"{engine.name}-engine"
        self.renderer = ChatRenderer(engine.tokenizer)
        self.temperature, self.max_tokens = temperature, max_tokens
        self.max_context_tokens = max_context_tokens
        self.seed = seed
        self.samples: list[tuple[list[int], list[float]]] = []
        # The loop counts tokens, then asks for a reply, on the same chat: render it once.
        self._cached: tuple[tuple[int, int, str], list[int]] | None = None

    def context(self, messages: list[dict[str, str]]) -> list[int]:
        """Token ids of `messages` + the assistant header, earlier replies as sampled."""
        n_assistant = sum(m["role"] == "assistant" for m in messages)
        if n_assistant != len(self.samples):
            raise ValueError(
                f"this policy sampled {len(self.samples)} replies but the chat holds "
                f"{n_assistant}: use one EnginePolicy per episode"
            )
        key = (len(messages), len(self.samples), messages[-1]["content"] if messages else "")
        if self._cached is None or self._cached[0] != key:
            seq = build_sequence(self.renderer, messages, self.samples, generation_prompt=True)
            self._cached = (key, seq.ids)
        return list(self._cached[1])

    def reply(self, messages: list[dict[str, str]], *, timeout: float) -> Reply:
        # `timeout` is not enforced in-process: the loop's wall-clock limit still applies.
        ids = self.context(messages)
        budget = self.max_tokens
        if self.max_context_tokens is not None:
            budget = min(budget, self.max_context_tokens - len(ids))
            if budget < 1:
                raise ContextExceeded(f"{len(ids)} prompt tokens >= {self.max_context_tokens}")
        seed = None if self.seed is None else self.seed + len(self.samples)
        s = self.engine.sample(ids, 1, self.temperature, budget, seed=seed)[0]
        self.samples.append((s.token_ids, s.logprobs))
        return Reply(
            text=s.text,
            prompt_tokens=len(ids),
            completion_tokens=len(s.token_ids),
            token_ids=s.token_ids,
            logprobs=s.logprobs,
        )

    def count_tokens(self, messages: list[dict[str, str]]) -> int | None:
        return len(self.context(messages))
