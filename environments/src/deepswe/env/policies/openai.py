"""Any OpenAI-compatible chat endpoint: vLLM, SGLang, `transformers serve`, hosted APIs.

Retries with exponential backoff live in the `openai` client (max_retries); usage is recorded
per reply. With `logprobs=True` (vLLM) the sampled tokens' log-probs come back too.

What the endpoint fails on (unreachable, overloaded, key refused, model not served) is an infra
PolicyError; what the server refuses in the chat itself (a 400) is the episode's.
`deepswe.env.policies.endpoint` checks the endpoint once before a run's first episode.
"""

from __future__ import annotations

import os

from pydantic import BaseModel, ConfigDict, Field

from deepswe.env.policies import ContextExceeded, PolicyError, Reply


class OpenAIPolicyConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    base_url: str = Field(description="endpoint, e.g. http://localhost:8000/v1")
    model: str = Field(description="model name as the server knows it")
    api_key_env: str = Field("OPENAI_API_KEY", description="env var holding the key")
    temperature: float = Field(1.0, ge=0, description="DeepSWE evaluates at T = 1.0")
    max_tokens: int | None = Field(None, gt=0, description="per reply; None: the server's")
    retries: int = Field(4, ge=0, description="client retries, exponential backoff")
    logprobs: bool = Field(False, description="ask for sampled log-probs (vLLM supports it)")
    seed: int | None = Field(
        None,
        description="reply i is requested with seed + i (vLLM samples reproducibly with "
        "it); None: no seed sent",
    )


class OpenAIPolicy:
    name = "openai"

    def __init__(self, config: OpenAIPolicyConfig | None = None, **kwargs: object) -> None:
        import openai  # only when this backend is chosen

        self.config = config or OpenAIPolicyConfig(**kwargs)
        c = self.config
        self.name = f"openai:{c.model}"
        self._client = openai.OpenAI(
            base_url=c.base_url,
            api_key=os.environ.get(c.api_key_env, "EMPTY"),
            max_retries=c.retries,
        )
        self._openai = openai
        self._replies = 0  # replies asked for: reply i is seeded seed + i

    def reply(self, messages: list[dict[str, str]], *, timeout: float) -> Reply:
        c = self.config
        seed = None if c.seed is None else (c.seed + self._replies) & 0x7FFFFFFF
        self._replies += 1
        try:
            r = self._client.chat.completions.create(
                model=c.model,
                messages=messages,  # type: ignore[arg-type]
                temperature=c.temperature,
                max_tokens=c.max_tokens,
                logprobs=c.logprobs or None,
                seed=seed,
                timeout=timeout,
            )
        except self._openai.BadRequestError as exc:
            if "context" in str(exc).lower() and "length" in str(exc).lower():
                raise ContextExceeded(f"{c.model}: {exc}") from exc
            raise PolicyError(f"{c.base_url} ({c.model}): {exc}") from exc
        except (
            self._openai.APIConnectionError,  # includes APITimeoutError
            self._openai.InternalServerError,
            self._openai.RateLimitError,
            # The endpoint, not the episode: a key refused (401, 403), a model no longer served
            # (404: the server was restarted with another), a request shape the server does not
            # take (422). Scored as agent_error they would train the model on a reward 0.
            self._openai.AuthenticationError,
            self._openai.PermissionDeniedError,
            self._openai.NotFoundError,
            self._openai.UnprocessableEntityError,
        ) as exc:
            raise PolicyError(f"{c.base_url} ({c.model}): {exc}", infra=True) from exc
        except self._openai.OpenAIError as exc:
            raise PolicyError(f"{c.base_url} ({c.model}): {exc}") from exc
        choice = r.choices[0]
        logprobs = None
        if choice.logprobs is not None and choice.logprobs.content is not None:
            logprobs = [t.logprob for t in choice.logprobs.content]
        return Reply(
            text=choice.message.content or "",
            prompt_tokens=r.usage.prompt_tokens if r.usage else None,
            completion_tokens=r.usage.completion_tokens if r.usage else None,
            logprobs=logprobs,
        )

    def count_tokens(self, messages: list[dict[str, str]]) -> int | None:
        return None  # the server counts; the loop uses reported usage
