"""What the OpenEnv tests share: a toy task set with a health manifest, and a server process
(`deepswe-eval serve`) whose sandboxes can be counted by its pid."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from deepswe.data.task import Task
from deepswe.env.sandbox.docker import client
from deepswe.env.sandbox.owner import PID
from deepswe.eval.audit_manifest import AuditManifest, AuditSummary, TaskAudit
from deepswe.eval.openenv.process import ServeProcess, free_port, start_serve

SANDBOX = {"memory": "1g", "pids": 256}


def health_manifest(tasks: list[Task], unhealthy: dict[str, str], path: Path) -> Path:
    """A health.json calling the tasks of `unhealthy` unhealthy (id -> reason), the rest healthy."""
    rows = {
        t.instance_id: TaskAudit(
            gold="unresolved" if t.instance_id in unhealthy else "resolved",
            empty="unresolved",
            attacks={},
            healthy=t.instance_id not in unhealthy,
            reasons=[unhealthy[t.instance_id]] if t.instance_id in unhealthy else [],
        )
        for t in tasks
    }
    summary = AuditSummary(
        tasks=len(rows),
        healthy=len(rows) - len(unhealthy),
        unhealthy=sorted(unhealthy),
        holes={},
        undecided={},
        outcomes={},
    )
    manifest = AuditManifest(
        kind="health",
        dataset="tasks.jsonl",
        harness_version="test",
        attacks={},
        tasks=rows,
        summary=summary,
    )
    path.write_text(manifest.model_dump_json(indent=1))
    return path


@dataclass
class Server(ServeProcess):
    """A `deepswe-eval serve` process (deepswe.eval.openenv.process) and its sandboxes."""

    def containers(self) -> list:
        """The sandboxes this server process made that still exist. Sparse: the engine's list
        alone, since inspecting each one races with its removal (a 404 for one just gone)."""
        label = {"label": f"{PID}={self.proc.pid}"}
        return client().containers.list(all=True, sparse=True, filters=label)

    def wait_for_no_containers(self, timeout: float = 60.0) -> list:
        deadline = time.monotonic() + timeout
        while (left := self.containers()) and time.monotonic() < deadline:
            time.sleep(0.5)
        return left


def start_server(folder: Path, tasks_file: Path, **openenv) -> Server:
    """`deepswe-eval serve` on a free port with an `openenv:` section of `openenv` (on top of
    the tasks, a free port and small sandboxes); waits until /health answers."""
    port = openenv.pop("port", None) or free_port()
    section = {"tasks": str(tasks_file), "port": port, "sandbox": SANDBOX, **openenv}
    up = start_serve(section, folder, name=f"openenv-{port}")
    return Server(up.url, up.proc, up.log)


def run_client(url: str, task: Task, mode: str) -> subprocess.Popen:
    """openenv_client.py in its own process (so it can be killed), the gold patch on stdin."""
    script = str(Path(__file__).with_name("openenv_client.py"))
    proc = subprocess.Popen(
        [sys.executable, script, url, task.instance_id, mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    proc.stdin.write(task.gold_patch or "")
    proc.stdin.close()
    return proc


def play(url: str, policy, task_id: str, timeout: float = 300):
    """One episode through the typed client (openenv's EnvClient, over /ws): the reset
    observation and every step's observation, the chat kept as our loop keeps it."""
    from deepswe.eval.openenv.client import SWEEnvClient
    from deepswe.eval.openenv.models import SWEAction

    with SWEEnvClient(base_url=url, message_timeout_s=timeout).sync() as env:
        first = env.reset(task_id=task_id).observation
        chat, seen, done = list(first.messages), [], False
        while not done:
            reply = policy.reply(chat, timeout=60).text
            result = env.step(SWEAction(message=reply))
            seen.append(result.observation)
            chat += [{"role": "assistant", "content": reply}]
            chat += [{"role": "user", "content": result.observation.text}]
            done = result.done
        assert env.state().done and env.state().reward == result.reward
    return first, seen


def final_line(proc: subprocess.Popen, timeout: float = 300) -> dict:
    out = proc.stdout.read()
    proc.wait(timeout=timeout)
    assert proc.returncode == 0, proc.stderr.read()
    return json.loads(out.strip().splitlines()[-1])
