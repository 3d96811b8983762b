"""The OpenEnv server (deepswe.eval.openenv) against real Docker sandboxes, driven over its
WebSocket sessions by openenv-core's own clients (our typed `SWEEnvClient`, a subclass of
openenv's EnvClient, and openenv's `GenericEnvClient`, unmodified), and over plain HTTP by
openenv's runtime validator. The server is a `deepswe-eval serve` process, so its sandboxes can
be counted by its pid and a client can be killed.

Concurrency is checked with 4 sessions at once (the issue's 32 are a size for a bench, not for
a 2-core CI machine).
"""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

import pytest
import requests

from deepswe.data.task import EnvironmentSpec
from deepswe.data.toy import make_toy_tasks, write_tasks
from deepswe.env.agent.loop import EpisodeLimits
from deepswe.env.episode import run_task
from deepswe.env.images.task import ensure_task_image
from deepswe.env.policies.scripted import FINISH, GoldPolicy, ScriptedPolicy, patch_to_actions
from deepswe.env.sandbox import SandboxLimits
from deepswe.eval.attacks import AttackPolicy

pytest.importorskip("openenv", reason="the openenv extra (evaluation[openenv]) is not installed")

from openenv.core.generic_client import GenericEnvClient  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from openenv_fixtures import (  # noqa: E402
    SANDBOX,
    final_line,
    health_manifest,
    play,
    run_client,
    start_server,
)

from deepswe.eval.openenv.client import SWEEnvClient  # noqa: E402
from deepswe.eval.openenv.models import SWEAction  # noqa: E402

pytestmark = pytest.mark.docker

MAX_STEPS = 8
SICK = "toycalc__toycalc-neg"
BROKEN = "toycalc__broken-image"


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    """4 toy tasks (one image), a fifth whose image cannot be built, and a health manifest that
    calls `neg` unhealthy."""
    root = tmp_path_factory.mktemp("openenv")
    tasks = make_toy_tasks(root, n=4)
    ensure_task_image(tasks[0], log=lambda _: None)  # one image serves all four
    broken = tasks[0].model_copy(
        update={
            "instance_id": BROKEN,
            "environment": EnvironmentSpec(source=str(root / "no-such-repo"), pip=["pytest"]),
        }
    )
    data = write_tasks([*tasks, broken], root / "tasks.jsonl")
    health = health_manifest(tasks, {SICK: "flaky: gold resolved 1 of 3 runs"}, root / "h.json")
    return root, {t.instance_id: t for t in tasks}, data, health


@pytest.fixture(scope="module")
def server(toy):
    root, _, data, health = toy
    srv = start_server(
        root, data, health=str(health), max_sessions=6, episode={"max_steps": MAX_STEPS}
    )
    yield srv
    srv.stop()
    assert not srv.wait_for_no_containers(), "the server left sandboxes behind"


def test_gold_through_the_tools_resolves(server, toy):
    task = toy[1]["toycalc__toycalc-add"]
    first, seen = play(server.url, GoldPolicy(task.gold_patch), task.instance_id)
    assert task.problem_statement in first.messages[1]["content"]
    assert first.tools == ["file_editor", "execute_bash", "search", "finish"]
    assert all(t in first.messages[0]["content"] for t in first.tools)  # their descriptions
    end = seen[-1]
    assert (end.done, end.ending, end.outcome, end.reward) == (True, "submitted", "resolved", 1.0)
    assert "return a + b" in end.patch


def test_empty_submission_is_unresolved_through_the_generic_client(server, toy):
    """openenv's GenericEnvClient, dicts only: no package of ours on the client's side."""
    with GenericEnvClient(base_url=server.url, message_timeout_s=300).sync() as env:
        env.reset(task_id="toycalc__toycalc-mul")
        result = env.step({"tool": "finish", "parameters": {"command": "submit"}})
    assert result.done and result.reward == 0.0
    assert result.observation["outcome"] == "unresolved" and result.observation["patch"] == ""


def test_an_audit_attack_is_not_resolved(server, toy):
    _, seen = play(server.url, AttackPolicy("conftest-hookwrapper"), "toycalc__toycalc-sub")
    assert seen[-1].outcome in ("tampered", "unresolved") and seen[-1].reward == 0.0
    assert "conftest.py" in seen[-1].patch


def test_unhealthy_and_unknown_tasks_are_refused_naming_why(server, toy):
    with SWEEnvClient(base_url=server.url).sync() as env:
        with pytest.raises(RuntimeError, match=f"{SICK} is refused: unhealthy .*flaky"):
            env.reset(task_id=SICK)
        with pytest.raises(RuntimeError, match="nope is not in this server's task set"):
            env.reset(task_id="nope")
        with pytest.raises(RuntimeError, match="unknown argument.*colour"):
            env.reset(colour="red")
        with pytest.raises(RuntimeError, match="no episode is running: call reset first"):
            env.step(SWEAction(tool="finish"))
        # resets without a task id walk the healthy tasks only
        ids = {env.reset(seed=s).observation.instance_id for s in range(12)}
        assert ids <= (set(toy[1]) | {BROKEN}) - {SICK} and len(ids) > 1


def test_a_task_whose_image_fails_is_infra_error_without_a_reward(server):
    with SWEEnvClient(base_url=server.url).sync() as env:
        result = env.reset(task_id=BROKEN)
    assert result.done and result.reward is None
    assert result.observation.outcome == "infra_error"
    assert "image failed to build" in result.observation.reason


SCRIPT = [
    "Let me look.\n<function=file_editor>\n<parameter=command>view</parameter>\n"
    "<parameter=path>/testbed/toycalc/ops.py</parameter>\n</function>",
    "<function=search>\n<parameter=search_term>def </parameter>\n"
    "<parameter=path>/testbed/toycalc</parameter>\n</function>",
    "<function=execute_bash>\n<parameter=cmd>cat tests/test_smoke.py; exit 3</parameter>\n"
    "</function>",
    "No call in this reply.",
    "<function=str_replace>\n<parameter=old_str>a</parameter>\n</function>",
]


@pytest.mark.parametrize("ending", ["submitted", "max_steps"])
def test_server_and_loop_give_identical_observations_and_reward(server, toy, ending):
    """A recorded (scripted) trajectory replayed through the server and through our own loop
    (run_task, the code deepswe-eval and training run)."""
    task = toy[1]["toycalc__toycalc-add"]
    fix = patch_to_actions(task.gold_patch)
    script = (
        SCRIPT + fix + ([FINISH] if ending == "submitted" else ["<function=x>\n</function>"] * 9)
    )
    ours = run_task(
        task,
        ScriptedPolicy(script),
        limits=EpisodeLimits(max_steps=MAX_STEPS),
        sandbox_limits=SandboxLimits(**SANDBOX),
    )
    first, seen = play(server.url, ScriptedPolicy(script), task.instance_id)
    assert first.messages == ours.messages[:2]
    user = [m["content"] for m in ours.messages[2:] if m["role"] == "user"]
    assert [o.text for o in seen if o.text] == user
    assert [o.tool_output for o in seen] == [s.observation for s in ours.steps]
    end = seen[-1]
    assert (end.ending, end.outcome, end.reward, end.patch) == (
        ours.ending.value,
        ours.outcome.value,
        ours.reward,
        ours.patch,
    )
    assert end.ending == ending


def test_concurrent_sessions_and_a_killed_client_leave_no_sandbox(server, toy):
    """4 sessions at once, each its own sandbox; one client is SIGKILLed mid-episode: its
    sandbox goes while the server runs on, the others resolve."""
    tasks = toy[1]
    gold = [run_client(server.url, tasks[i], "gold") for i in list(tasks)[:3] if i != SICK]
    hang = run_client(server.url, tasks["toycalc__toycalc-add"], "hang")
    assert hang.stdout.readline().strip() == "stepped", hang.stderr.read()
    assert len(server.containers()) >= 1
    hang.send_signal(signal.SIGKILL)
    hang.wait()
    assert [final_line(p)["outcome"] for p in gold] == ["resolved"] * len(gold)
    assert server.proc.poll() is None
    assert not server.wait_for_no_containers(30), "a killed client's sandbox was left"


def test_plain_http_routes_pass_openenvs_runtime_validation(server):
    from openenv.cli._validation import validate_running_environment

    report = validate_running_environment(server.url, timeout_s=30)
    assert report["passed"], report["criteria"]
    schema = requests.get(f"{server.url}/schema", timeout=10).json()
    assert {"message", "tool", "parameters"} <= set(schema["action"]["properties"])
    assert requests.get(f"{server.url}/metadata", timeout=10).json()["name"] == "deepswe-swe"
    # openenv 0.3.0's HTTP /step makes a fresh environment per request: no episode, said so
    step = requests.post(f"{server.url}/step", json={"action": {"tool": "finish"}}, timeout=10)
    assert step.status_code == 409 and "call reset first" in step.json()["detail"]
    reset = requests.post(f"{server.url}/reset", json={"task_id": SICK}, timeout=10)
    assert reset.status_code == 404 and "unhealthy" in reset.json()["detail"]


def test_a_session_idle_past_its_ttl_is_closed_and_says_so(toy):
    root, _, data, _ = toy
    srv = start_server(root, data, session_ttl_s=3, episode={"action_timeout_s": 2})
    try:
        with SWEEnvClient(base_url=srv.url).sync() as env:
            env.reset(task_id="toycalc__toycalc-add")
            assert len(srv.containers()) == 1
            time.sleep(9)  # openenv's reaper looks every max(ttl / 4, 5 s)
            with pytest.raises(RuntimeError, match=r"closed after \d+ s idle .*session_ttl_s"):
                env.step(SWEAction(tool="finish"))
        assert not srv.wait_for_no_containers(30)
    finally:
        srv.stop()
