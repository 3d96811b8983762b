"""Policy backends: the OpenAI-compatible client against a real HTTP server on loopback, the
replay policy on the R2E-Gym fixtures, the gold policy's patch-to-actions."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from deepswe.env.agent.parser import parse_action
from deepswe.env.policies import ContextExceeded, Policy, PolicyError, policy_class
from deepswe.env.policies.fake_endpoint import FakeEndpoint, chat_completion, error
from deepswe.env.policies.replay import ReplayPolicy
from deepswe.env.policies.scripted import FINISH, patch_to_actions

FIXTURES = Path(os.environ["DEEPSWE_R2E_FIXTURES"])


class _Server:
    """What the endpoint answers: mode 'ok' echoes the last message, 'context' is vLLM's context
    overflow, a number that status, else a server error; `seen` the request bodies."""

    mode = "ok"
    seen: list[dict] = []

    @staticmethod
    def answer(body: dict) -> tuple[int, dict]:
        _Server.seen.append(body)
        if _Server.mode == "ok":
            text = "echo: " + body["messages"][-1]["content"]
            return 200, chat_completion(text, model=body["model"], usage=(11, 3))
        if _Server.mode == "context":
            message = "This model's maximum context length is 65536 tokens"
            return error(400, message, "invalid_request_error")
        if _Server.mode.isdigit():  # that status, e.g. "401"
            return error(int(_Server.mode), "refused", "x")
        return error(500, "boom")


@pytest.fixture(scope="module")
def endpoint():
    with FakeEndpoint(_Server.answer) as server:
        yield server.base_url


def test_openai_policy_replies_with_usage(endpoint):
    _Server.mode = "ok"
    p = policy_class("openai")(
        base_url=endpoint, model="m", temperature=0.7, max_tokens=50, retries=0
    )
    assert isinstance(p, Policy) and p.name == "openai:m"
    r = p.reply([{"role": "user", "content": "hi"}], timeout=10)
    assert (r.text, r.prompt_tokens, r.completion_tokens) == ("echo: hi", 11, 3)
    assert _Server.seen[-1]["temperature"] == 0.7 and _Server.seen[-1]["max_tokens"] == 50


def test_a_seeded_policy_sends_seed_plus_reply_index_and_make_policy_pairs_episodes(endpoint):
    """Two models evaluated with one --seed see the same seeds: reply i of (task, run) gets
    episode_seed(seed, task, run) + i; another run or task gets another base; no seed, none sent."""
    from deepswe.data.task import HiddenTests, Task, TaskSource, TestSpec
    from deepswe.env.policies import PolicySpec, episode_seed, make_policy

    _Server.mode = "ok"
    task = Task(
        instance_id="t-1",
        repo="o/r",
        base_commit="0" * 40,
        problem_statement="s",
        source=TaskSource.CUSTOM,
        test_spec=TestSpec(command="pytest", log_parser="pytest"),
        hidden=HiddenTests(fail_to_pass=["t.py::t"]),
    )
    spec = PolicySpec(name="openai", base_url=endpoint, model="m", seed=7)
    for run in (0, 0, 1):
        p = make_policy(spec, task, run)
        for _ in range(2):
            p.reply([{"role": "user", "content": "hi"}], timeout=10)
    seeds = [body["seed"] for body in _Server.seen[-6:]]
    base0, base1 = episode_seed(7, "t-1", 0), episode_seed(7, "t-1", 1)
    assert seeds == [base0, base0 + 1, base0, base0 + 1, base1, base1 + 1] and base0 != base1
    assert episode_seed(7, "t-2", 0) != base0 and episode_seed(8, "t-1", 0) != base0
    make_policy(PolicySpec(name="openai", base_url=endpoint, model="m"), task).reply(
        [{"role": "user", "content": "hi"}], timeout=10
    )
    assert _Server.seen[-1].get("seed") is None


def test_server_errors_are_infra_and_context_overflow_is_its_own(endpoint):
    p = policy_class("openai")(base_url=endpoint, model="m", retries=0)
    _Server.mode = "fail"
    with pytest.raises(PolicyError) as err:
        p.reply([{"role": "user", "content": "hi"}], timeout=10)
    assert err.value.infra
    _Server.mode = "context"
    with pytest.raises(ContextExceeded):
        p.reply([{"role": "user", "content": "hi"}], timeout=10)


@pytest.mark.parametrize("status", ["401", "403", "404", "422"])
def test_an_endpoint_refusing_the_key_or_the_model_mid_run_is_infra(endpoint, status):
    """Regression (#23): a key revoked (401/403), a model gone (404: the server restarted with
    another) or a request shape refused (422) mid-run ended agent_error, which training scores
    as the model's reward 0; it is the endpoint's failure: infra (the loop ends it infra_error)."""
    _Server.mode = status
    p = policy_class("openai")(base_url=endpoint, model="m", retries=0)
    with pytest.raises(PolicyError) as err:
        p.reply([{"role": "user", "content": "hi"}], timeout=10)
    assert err.value.infra and f"Error code: {status}" in str(err.value)


def test_a_bad_request_that_is_not_about_context_stays_the_episodes(endpoint):
    """A 400 is about what the episode sent (agent_error), unlike the endpoint's own failures."""
    _Server.mode = "400"
    p = policy_class("openai")(base_url=endpoint, model="m", retries=0)
    with pytest.raises(PolicyError) as err:
        p.reply([{"role": "user", "content": "hi"}], timeout=10)
    assert not err.value.infra and not isinstance(err.value, ContextExceeded)


def test_unreachable_endpoint_is_infra():
    p = policy_class("openai")(base_url="http://127.0.0.1:9/v1", model="m", retries=0)
    with pytest.raises(PolicyError) as err:
        p.reply([{"role": "user", "content": "hi"}], timeout=5)
    assert err.value.infra


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("trajectory_*.json")), ids=lambda p: p.stem)
def test_replay_yields_the_recorded_actions(path):
    recorded = json.loads(path.read_text())["trajectory_steps"]
    policy = ReplayPolicy(path)
    for step in recorded:
        got = parse_action(policy.reply([], timeout=1).text)
        want = parse_action(step["action"])
        assert (got.function_name, got.parameters) == (want.function_name, want.parameters)
    with pytest.raises(PolicyError):
        policy.reply([], timeout=1)


def test_gold_actions_for_new_modified_and_deleted_files():
    patch = (
        "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1,2 +1,2 @@\n x = 1\n-y = 2\n+y = 3\n"
        "diff --git a/new.py b/new.py\nnew file mode 100644\n--- /dev/null\n+++ b/new.py\n@@ -0,0 +1 @@\n+z = 1\n"
        "diff --git a/old.py b/old.py\ndeleted file mode 100644\n--- a/old.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-w = 0\n"
    )
    calls = [parse_action(a) for a in patch_to_actions(patch) + [FINISH]]
    assert [(c.function_name, c.parameters.get("command")) for c in calls] == [
        ("file_editor", "str_replace"),
        ("file_editor", "create"),
        ("execute_bash", None),
        ("finish", "submit"),
    ]
    assert (
        calls[0].parameters["old_str"] == "x = 1\ny = 2"
        and calls[0].parameters["new_str"] == "x = 1\ny = 3"
    )
    assert calls[1].parameters == {
        "command": "create",
        "path": "/testbed/new.py",
        "file_text": "z = 1",
    }
    assert calls[2].parameters == {"cmd": "rm /testbed/old.py"}
