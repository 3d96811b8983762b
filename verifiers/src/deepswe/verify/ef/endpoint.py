"""The judge behind any OpenAI-compatible chat endpoint (vLLM, with the judge's LoRA or merged).

One request per prompt at temperature 0 with `logprobs` and `top_logprobs`; the answer is read
by content (deepswe.verify.ef.answer). The `openai` client retries with exponential backoff
(`retries`); a connection error, timeout, 5xx or rate limit after those is UNREACHABLE (a resume
asks again), any other refusal (a 400: prompt too long for the server, top_logprobs over the
server's max_logprobs) is ERROR with the server's words.
"""

from __future__ import annotations

import os
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from deepswe.verify.ef.answer import Judgement, TokenLogprob, read_answer
from deepswe.verify.ef.render import Messages
from deepswe.verify.ef.tokens import ChatTokens, load_tokenizer
from deepswe.verify.types import VerdictStatus


class EndpointJudgeConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str = Field(description="endpoint, e.g. http://localhost:8000/v1")
    model: str = Field(description="the judge's name as the server knows it (a LoRA's name)")
    tokenizer: str = Field(description="the judge's tokenizer: a local folder or cached model id")
    api_key_env: str = Field("OPENAI_API_KEY", description="env var holding the key")
    top_logprobs: int = Field(20, ge=1, le=20, description="alternatives per token (vLLM <= 20)")
    max_tokens: int = Field(16, ge=1, description="reply budget: the tag and the word fit in 16")
    retries: int = Field(3, ge=0, description="client retries with exponential backoff")
    timeout_s: float = Field(300.0, gt=0, description="per request")
    extra_body: dict[str, Any] = Field(
        default_factory=dict, description="sent as is, e.g. {chat_template_kwargs: {...}}"
    )


class EndpointJudge:
    """A Judge (deepswe.verify.ef.score) served over HTTP."""

    def __init__(self, config: EndpointJudgeConfig) -> None:
        import openai  # only when this judge is chosen

        self.config = config
        self.name = f"endpoint:{config.model}"
        self.count_tokens = ChatTokens(load_tokenizer(config.tokenizer))
        self._openai = openai
        self._client = openai.OpenAI(
            base_url=config.base_url,
            api_key=os.environ.get(config.api_key_env, "EMPTY"),
            max_retries=config.retries,
            timeout=config.timeout_s,
        )

    def judge(self, messages: Messages) -> Judgement:
        c, errors = self.config, self._openai
        try:
            r = self._client.chat.completions.create(
                model=c.model,
                messages=messages,  # type: ignore[arg-type]
                temperature=0.0,
                max_tokens=c.max_tokens,
                logprobs=True,
                top_logprobs=c.top_logprobs,
                extra_body=c.extra_body or None,
            )
        except (errors.APIConnectionError, errors.InternalServerError, errors.RateLimitError) as e:
            where = f"{c.base_url} ({c.model}) after {c.retries} retries"
            return Judgement(VerdictStatus.UNREACHABLE, detail=f"{where}: {e}")
        except errors.APIStatusError as e:
            return Judgement(VerdictStatus.ERROR, detail=f"{c.base_url} ({c.model}): {e}")
        return reply_judgement(r)


def reply_judgement(response: Any) -> Judgement:
    """The judgement in a chat completion (openai's response object)."""
    if not response.choices:
        return Judgement(VerdictStatus.NO_ANSWER, detail="the server returned no choice")
    choice = response.choices[0]
    content = choice.logprobs.content if choice.logprobs is not None else None
    if not content:
        text = (choice.message.content or "")[:120]
        return Judgement(VerdictStatus.NO_ANSWER, detail=f"no log-probs in reply {text!r}")
    tokens = [
        TokenLogprob(t.token, t.logprob, tuple((a.token, a.logprob) for a in t.top_logprobs or ()))
        for t in content
    ]
    return read_answer(tokens)
