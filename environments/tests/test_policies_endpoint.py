"""The endpoint check before a run's first episode, driven by the unmodified `openai` client
against a real HTTP server on loopback (the root conftest's `models_endpoint`) that answers
GET /v1/models as vLLM does (with `root`) and checks the bearer key.

What this does not prove: that vLLM itself answers so; training/tests/test_train_vllm.py checks
the same call against a real vLLM server.
"""

from __future__ import annotations

import pytest

from deepswe.env.policies import PolicySpec
from deepswe.env.policies.endpoint import (
    EndpointError,
    EndpointUnreachable,
    KeyRefused,
    ModelNotServed,
    ServedModel,
    check_endpoint,
    check_policy_endpoint,
)
from deepswe.env.policies.openai import OpenAIPolicyConfig

KEY = "sk-test-key"  # the key the root conftest's server takes
TINY = {"tiny-qwen3": "/models/tiny-qwen3"}


@pytest.fixture
def server(models_endpoint):
    """The test server's origin (no /v1)."""
    assert models_endpoint.key == KEY
    return models_endpoint.serve(TINY).removesuffix("/v1")


def config(url: str, model: str = "tiny-qwen3", env: str = "DEEPSWE_TEST_KEY"):
    return OpenAIPolicyConfig(base_url=url, model=model, api_key_env=env, retries=0)


def test_a_served_model_is_answered_with_its_root(server, monkeypatch):
    monkeypatch.setenv("DEEPSWE_TEST_KEY", KEY)
    assert check_endpoint(config(f"{server}/v1")) == ServedModel("tiny-qwen3", "/models/tiny-qwen3")


def test_a_wrong_model_name_names_what_the_server_serves(server, monkeypatch):
    monkeypatch.setenv("DEEPSWE_TEST_KEY", KEY)
    url = f"{server}/v1"
    with pytest.raises(ModelNotServed) as err:
        check_endpoint(config(url, model="wrong-name"))
    assert str(err.value) == f"model 'wrong-name' is not served at {url}; it serves: tiny-qwen3"
    assert err.value.served == ["tiny-qwen3"]


@pytest.mark.parametrize("key", [None, "sk-wrong", "forbidden"], ids=["unset", "401", "403"])
def test_a_refused_key_names_its_variable(server, monkeypatch, key):
    if key is None:
        monkeypatch.delenv("DEEPSWE_TEST_KEY", raising=False)
    else:
        monkeypatch.setenv("DEEPSWE_TEST_KEY", key)
    with pytest.raises(KeyRefused) as err:
        check_endpoint(config(f"{server}/v1"))
    msg = str(err.value)
    assert "$DEEPSWE_TEST_KEY" in msg and f"{server}/v1" in msg and "\n" not in msg
    assert ("is unset" in msg) == (key is None)
    assert ("HTTP 403" if key == "forbidden" else "HTTP 401") in msg
    assert key is None or "sk-wrong" not in msg  # the key itself is never printed


def test_an_unreachable_url_names_it_and_the_error():
    url = "http://127.0.0.1:9/v1"  # the discard port: nothing listens there
    with pytest.raises(EndpointUnreachable) as err:
        check_endpoint(config(url))
    assert str(err.value).startswith(f"cannot reach {url} (GET /models): ConnectError")
    assert "Connection refused" in str(err.value)


def test_a_url_that_is_not_an_openai_endpoint_says_so(server, monkeypatch):
    monkeypatch.setenv("DEEPSWE_TEST_KEY", KEY)
    with pytest.raises(EndpointError, match=r"answered HTTP 404 .* usually ends in /v1"):
        check_endpoint(config(server))  # no /v1


def test_only_the_openai_policy_has_an_endpoint_to_check(server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)  # what make_policy's client sends
    spec = PolicySpec(name="openai", base_url=f"{server}/v1", model="tiny-qwen3")
    assert check_policy_endpoint(spec) == ServedModel("tiny-qwen3", "/models/tiny-qwen3")
    assert check_policy_endpoint(PolicySpec(name="gold")) is None
    with pytest.raises(ValueError, match="needs a base_url and a model"):
        check_policy_endpoint(PolicySpec(name="openai", model="m"))


def test_deepswe_env_episode_checks_the_endpoint_before_the_sandbox(
    server, calc_task, tmp_path, monkeypatch
):
    from typer.testing import CliRunner

    from deepswe.env.cli import app

    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(calc_task.model_dump_json() + "\n")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    args = ["episode", "--tasks", str(tasks), "--id", calc_task.instance_id, "--policy", "openai"]
    r = CliRunner().invoke(app, [*args, "--base-url", f"{server}/v1", "--model", "wrong-name"])
    assert r.exit_code == 2
    assert f"model 'wrong-name' is not served at {server}/v1; it serves: tiny-qwen3" in r.output
