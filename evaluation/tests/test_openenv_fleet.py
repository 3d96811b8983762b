"""The issue's size for the OpenEnv server (#46): 32 sessions at once, each its own sandbox, two
of the clients SIGKILLed mid-episode; the server runs on, the other 30 end graded, and no
container is left behind. A `deepswe-eval serve` process, real containers, the unmodified
openenv client: 30 sessions on threads of this process, the 2 to kill in processes of their own
(evaluation/tests/openenv_client.py, `hang` mode). Slow: 32 sandboxes and 30 reward runs on a
2-core machine take minutes.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from deepswe.data.toy import make_toy_tasks, write_tasks
from deepswe.env.images.task import ensure_task_image

pytest.importorskip("openenv", reason="the openenv extra (evaluation[openenv]) is not installed")

sys.path.insert(0, str(Path(__file__).parent))
from openenv_fixtures import run_client, start_server  # noqa: E402

from deepswe.eval.openenv.client import SWEEnvClient  # noqa: E402
from deepswe.eval.openenv.models import SWEAction  # noqa: E402

pytestmark = [pytest.mark.docker, pytest.mark.slow]

SESSIONS, KILLED = 32, 2
TRUE = SWEAction(tool="execute_bash", parameters={"cmd": "true"})
SUBMIT = SWEAction(tool="finish", parameters={"command": "submit"})


def _session(url: str, task_id: str, stepped: threading.Barrier, go: threading.Event):
    """One session: reset, a step, wait at the barrier (every session holds a sandbox) and
    for `go`, then submit: (outcome, reward)."""
    with SWEEnvClient(base_url=url, message_timeout_s=600).sync() as env:
        env.reset(task_id=task_id)
        env.step(TRUE)
        stepped.wait(timeout=600)
        go.wait(timeout=600)
        result = env.step(SUBMIT)
    return result.observation.outcome, result.reward


def test_32_sessions_at_once_and_two_killed_clients_leave_no_container(tmp_path):
    tasks = make_toy_tasks(tmp_path, n=4)
    ensure_task_image(tasks[0], log=lambda _: None)  # one image serves all four
    data = write_tasks(tasks, tmp_path / "tasks.jsonl")
    srv = start_server(tmp_path, data, max_sessions=SESSIONS, episode={"max_steps": 4})
    stepped, go = threading.Barrier(SESSIONS - KILLED + 1), threading.Event()
    doomed: list[subprocess.Popen] = []
    try:
        with ThreadPoolExecutor(max_workers=SESSIONS - KILLED) as pool:
            futures = [
                pool.submit(_session, srv.url, tasks[i % 4].instance_id, stepped, go)
                for i in range(SESSIONS - KILLED)
            ]
            doomed = [run_client(srv.url, tasks[i], "hang") for i in range(KILLED)]
            for p in doomed:
                assert p.stdout.readline().strip() == "stepped", p.stderr.read()
            stepped.wait(timeout=600)  # every session has reset and stepped
            assert len(srv.containers()) == SESSIONS  # one sandbox each, all at once
            for p in doomed:  # two clients die mid-episode
                p.send_signal(signal.SIGKILL)
                p.wait()
            go.set()
            finals = [f.result(timeout=600) for f in futures]
        assert finals == [("unresolved", 0.0)] * (SESSIONS - KILLED)
        assert srv.proc.poll() is None, "the server died"
        assert not srv.wait_for_no_containers(60), "a session's sandbox was left"
    finally:
        go.set()
        for p in doomed:
            if p.poll() is None:
                p.kill()
        srv.stop()
    assert not srv.wait_for_no_containers(30), "the server left sandboxes behind"
