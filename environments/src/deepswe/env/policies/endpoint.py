"""Before the first request: is an OpenAI-compatible endpoint there, does it take our key, does
it serve our model?

One GET {base_url}/models through the `openai` client, so a typo in a model name or a URL, or
a wrong key, fails in a second with one line saying what the server offers, instead of every
episode of a run ending infra_error. The answer also says what is served: vLLM reports each
model's `root` (the folder or hub id it loaded), which a run card records.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Protocol

from deepswe.env.policies import PolicySpec
from deepswe.env.policies.openai import OpenAIPolicyConfig

# The check is one small GET; a server that cannot answer it in this time is not ready.
CHECK_TIMEOUT_S = 30.0


class EndpointError(Exception):
    """The endpoint cannot serve the configured model; the message is one line saying why."""


class EndpointUnreachable(EndpointError):
    """No HTTP answer at all: connection refused, DNS, TLS, timeout."""


class KeyRefused(EndpointError):
    """The server answered 401 or 403 to our key."""


class ModelNotServed(EndpointError):
    """The server answers but does not list the model; `served` is what it lists."""

    def __init__(self, message: str, served: list[str]) -> None:
        super().__init__(message)
        self.served = served


@dataclass(frozen=True)
class ServedModel:
    """A model an endpoint serves: its id and, when the server says (vLLM), its `root`."""

    id: str
    root: str | None


class EndpointConfig(Protocol):
    """What the check needs; OpenAIPolicyConfig and the verifiers' endpoint judge have it."""

    base_url: str
    model: str
    api_key_env: str
    retries: int


def check_endpoint(config: EndpointConfig, timeout_s: float = CHECK_TIMEOUT_S) -> ServedModel:
    """The served model `config.model` at `config.base_url`, asked with the key in
    $`config.api_key_env`. Raises EndpointUnreachable, KeyRefused, ModelNotServed, or
    EndpointError (any other refusal), each with a one-line message naming the URL."""
    import openai  # only when an endpoint is used

    url = config.base_url
    key = os.environ.get(config.api_key_env)
    client = openai.OpenAI(
        base_url=url, api_key=key or "EMPTY", max_retries=config.retries, timeout=timeout_s
    )
    try:
        listed = list(client.models.list())
    except openai.APIConnectionError as exc:  # APITimeoutError included
        raise EndpointUnreachable(f"cannot reach {url} (GET /models): {_cause(exc)}") from exc
    except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
        env, why = config.api_key_env, f"HTTP {exc.status_code}: {_one_line(exc.message)}"
        raise KeyRefused(
            f"the key in ${env} was refused by {url} ({why})"
            if key
            else f"${env} is unset and {url} refused the placeholder key 'EMPTY' ({why}); "
            f"set ${env} to the server's key"
        ) from exc
    except openai.APIStatusError as exc:
        raise EndpointError(
            f"GET {url}/models answered HTTP {exc.status_code} ({_one_line(exc.message)}); is "
            f"{url} an OpenAI-compatible endpoint (the URL usually ends in /v1)?"
        ) from exc
    models = {m.id: ServedModel(m.id, _root(m)) for m in listed}
    if config.model not in models:
        served = sorted(models)
        raise ModelNotServed(
            f"model {config.model!r} is not served at {url}; it serves: "
            + (", ".join(served) if served else "nothing"),
            served,
        )
    return models[config.model]


def check_policy_endpoint(spec: PolicySpec) -> ServedModel | None:
    """check_endpoint for the endpoint `make_policy(spec, ...)` would use (its key from
    $OPENAI_API_KEY); None for a policy without one (gold, empty, replay, plugged-in)."""
    if spec.name != "openai":
        return None
    if not (spec.base_url and spec.model):
        raise ValueError(
            "policy openai needs a base_url and a model (deepswe-env episode: --base-url, "
            "--model; deepswe-eval: eval.policy.base_url=, eval.policy.model=)"
        )
    return check_endpoint(OpenAIPolicyConfig(base_url=spec.base_url, model=spec.model))


def _root(model: object) -> str | None:
    """vLLM's `root` (not part of OpenAI's schema: the client keeps it as an extra field)."""
    extra = getattr(model, "model_extra", None) or {}
    root = extra.get("root")
    return str(root) if root else None


def _cause(exc: BaseException) -> str:
    """The innermost cause's words (openai says only "Connection error.")."""
    inner = exc
    while inner.__cause__ is not None:
        inner = inner.__cause__
    text = _one_line(str(inner)) or type(inner).__name__
    return text if inner is exc else f"{type(inner).__name__}: {text}"


def _one_line(text: str) -> str:
    return " ".join(str(text).split())[:300]


__all__ = [
    "CHECK_TIMEOUT_S",
    "EndpointConfig",
    "EndpointError",
    "EndpointUnreachable",
    "KeyRefused",
    "ModelNotServed",
    "ServedModel",
    "check_endpoint",
    "check_policy_endpoint",
]
