"""The OpenEnv server's container image (`deepswe-eval serve-image`): built from our
registry-free base with no network, run as OpenEnv expects (the manifest's app on port 8000),
its sandboxes siblings on the host's engine. The unmodified openenv client plays gold through
it to resolved; a container killed mid-episode leaves no sandbox (what the engine has not removed
yet `deepswe-env gc` on the host reaps, since the container runs with the host's pids and
hostname). Slow: the first build
downloads and installs ~150 wheels (about 3 min here; 30-40 s when the image exists).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
import yaml

from deepswe.data.toy import make_toy_tasks, write_tasks
from deepswe.env.images.task import ensure_task_image
from deepswe.env.policies.scripted import GoldPolicy
from deepswe.env.sandbox.docker import client
from deepswe.env.sandbox.owner import PID

pytest.importorskip("openenv", reason="the openenv extra (evaluation[openenv]) is not installed")

sys.path.insert(0, str(Path(__file__).parent))
from openenv_fixtures import SANDBOX, free_port  # noqa: E402

from deepswe.eval.openenv.client import SWEEnvClient  # noqa: E402
from deepswe.eval.openenv.image import CONFIG, PORT, build_server_image  # noqa: E402
from deepswe.eval.openenv.models import SWEAction  # noqa: E402

pytestmark = [pytest.mark.docker, pytest.mark.slow]

CHECKOUT = Path(__file__).resolve().parents[2]
GC = str(Path(sys.executable).with_name("deepswe-env"))


def _sandboxes(pid: int) -> list:
    return client().containers.list(all=True, sparse=True, filters={"label": f"{PID}={pid}"})


def test_the_server_image_serves_episodes_and_a_killed_container_is_reaped(tmp_path):
    if not os.environ.get("DEEPSWE_SERVE_IMAGE"):
        # every change to the checkout is a new image: ~3.5 min of CI's budget each run
        pytest.skip("builds the server's image (about 3 min): set DEEPSWE_SERVE_IMAGE=1")
    tag = build_server_image(CHECKOUT, log=lambda _: None)
    tasks = make_toy_tasks(tmp_path, n=2)
    ensure_task_image(tasks[0], log=lambda _: None)
    data = write_tasks(tasks, tmp_path / "tasks.jsonl")
    profile = tmp_path / "profile.yaml"
    profile.write_text(yaml.safe_dump({"openenv": {"tasks": str(data), "sandbox": SANDBOX}}))
    port, name = free_port(), f"openenv-test-{free_port()}"
    run = ["docker", "run", "-d", "--rm", "--name", name, "-p", f"127.0.0.1:{port}:{PORT}"]
    run += ["--pid", "host", "--hostname", subprocess.check_output(["hostname"], text=True).strip()]
    run += ["-v", "/var/run/docker.sock:/var/run/docker.sock", "-v", f"{tmp_path}:{tmp_path}:ro"]
    run += ["-v", f"{profile}:{CONFIG}:ro", tag]
    subprocess.run(run, check=True, capture_output=True)
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_healthy(url, name)
        pid = int(_inspect(name, "{{.State.Pid}}"))  # the server (uvicorn), a host pid

        task = tasks[0]
        policy = GoldPolicy(task.gold_patch)
        with SWEEnvClient(base_url=url, message_timeout_s=300).sync() as env:
            result = env.reset(task_id=task.instance_id)
            chat = list(result.observation.messages)
            while not result.done:
                reply = policy.reply(chat, timeout=60).text
                result = env.step(SWEAction(message=reply))
                chat += [{"role": "assistant", "content": reply}]
                chat += [{"role": "user", "content": result.observation.text}]
        assert (result.observation.outcome, result.reward) == ("resolved", 1.0)

        env = SWEEnvClient(base_url=url, message_timeout_s=300).sync()
        env.connect()
        env.reset(task_id=tasks[1].instance_id)  # a session holding a sandbox ...
        assert len(_sandboxes(pid)) == 1
        subprocess.run(["docker", "kill", name], check=True, capture_output=True)  # ... killed
        # Its sandbox goes with it (the helper ends with its attach stream); what might remain
        # carries a dead host process's labels, which the host's gc reaps.
        deadline = time.monotonic() + 30
        while _sandboxes(pid) and time.monotonic() < deadline:
            time.sleep(0.5)
        subprocess.run([GC, "gc", "--selector", f"{PID}={pid}"], check=True, capture_output=True)
        assert not _sandboxes(pid)
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)


def _inspect(name: str, fmt: str) -> str:
    return subprocess.check_output(["docker", "inspect", "--format", fmt, name], text=True).strip()


def _wait_healthy(url: str, name: str) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if requests.get(f"{url}/health", timeout=2).ok:
                return
        except requests.RequestException:
            time.sleep(0.5)
    logs = subprocess.run(["docker", "logs", name], capture_output=True, text=True)
    raise AssertionError(f"the server's container did not answer: {logs.stderr[-2000:]}")
