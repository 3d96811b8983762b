"""The openai policy through the harness against a real HTTP endpoint: a small
OpenAI-compatible server in this process that answers with each task's gold edits, and a dead
endpoint, which must come out as infra_error after the retries, never as unresolved."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from deepswe.data.toy import make_toy_tasks, write_tasks
from deepswe.env.images.task import ensure_task_image
from deepswe.env.policies import PolicySpec
from deepswe.env.policies.fake_endpoint import FakeEndpoint, chat_completion
from deepswe.env.policies.scripted import FINISH, patch_to_actions
from deepswe.env.sandbox import SandboxLimits
from deepswe.eval.config import EvalConfig
from deepswe.eval.runner import run_all
from deepswe.eval.store import EpisodeStatus, RunStore

pytestmark = pytest.mark.docker
CLI = str(Path(sys.executable).with_name("deepswe-eval"))


def _server(tasks, root: str | None = None) -> FakeEndpoint:
    """Replies turn i of the task named in the chat with its i-th gold action; reports usage.
    GET /v1/models lists `toy-model`, loaded from `root` (vLLM's field)."""
    scripts = {t.instance_id: [*patch_to_actions(t.gold_patch), FINISH] for t in tasks}
    by_statement = {t.problem_statement: t.instance_id for t in tasks}

    def answer(body: dict) -> tuple[int, dict]:
        chat = body["messages"]
        iid = next(v for k, v in by_statement.items() if k in chat[1]["content"])
        turn = sum(m["role"] == "assistant" for m in chat)
        text = scripts[iid][min(turn, len(scripts[iid]) - 1)]
        prompt = sum(len(m["content"]) for m in chat) // 4
        return 200, chat_completion(text, model=body["model"], usage=(prompt, 11))

    return FakeEndpoint(answer, models={"toy-model": root})


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    root = tmp_path_factory.mktemp("toy")
    tasks = make_toy_tasks(root, n=2)
    ensure_task_image(tasks[0], log=lambda _: None)
    return tasks, write_tasks(tasks, root / "tasks.jsonl")


def test_served_model_is_evaluated_with_its_token_counts(toy, tmp_path):
    """...and the run card records what the endpoint served: its root and weights' digest."""
    from deepswe.eval.weights import weights_digest

    tasks, data = toy
    ckpt = tmp_path / "toy-model"
    ckpt.mkdir()
    (ckpt / "model.safetensors").write_bytes(b"\x01" * 1024)
    srv = _server(tasks, root=str(ckpt))
    out = tmp_path / "run"
    try:
        res = subprocess.run(
            [
                CLI,
                "run",
                "--dataset",
                str(data),
                "eval.policy.name=openai",
                "eval.runs=2",
                "eval.workers=2",
            ]
            + [f"eval.policy.base_url={srv.base_url}", "eval.policy.model=toy-model"]
            + ["eval.policy.temperature=0.7", "eval.sandbox.memory=1g", "--out", str(out)],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "OPENAI_API_KEY": "k"},
        )
    finally:
        srv.close()
    assert res.returncode == 0, res.stderr[-2000:]
    seen = {(b["model"], b.get("temperature")) for b in srv.requests}
    assert seen == {("toy-model", 0.7)}
    m = json.loads((out / "metrics.json").read_text())
    assert m["counts"] == {"resolved": 4}
    assert m["completion_tokens"]["min"] == 11 * 2  # one edit + finish per episode, 11 each
    assert m["prompt_tokens"]["min"] > 0
    card = json.loads((out / "config.json").read_text())
    policy = card["eval"]["policy"]
    assert (policy["model"], policy["temperature"]) == ("toy-model", 0.7)
    assert card["served_weights"] == {
        "model": "toy-model",
        "root": str(ckpt),
        "digest": weights_digest(ckpt),
    }
    pred = json.loads((out / "predictions/run-1.jsonl").read_text().splitlines()[0])
    assert pred["model_name_or_path"] == "toy-model" and "+    return a + b" in pred["model_patch"]


def test_dead_endpoint_is_infra_error_after_retries(toy, tmp_path):
    tasks, _ = toy
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = EvalConfig(
        policy=PolicySpec(name="openai", base_url=f"http://127.0.0.1:{port}/v1", model="m"),
        runs=1,
        infra_retries=1,
        sandbox=SandboxLimits(memory="1g"),
    )
    store = RunStore(tmp_path / "run")
    log = io.StringIO()
    counts = run_all(tasks[:1], cfg, store, console=Console(file=log))
    assert counts == {"infra_error": 1}
    # not a terminal: one plain progress line per episode instead of a live bar
    assert (
        f"episode 1/1: {tasks[0].instance_id} run 0: infra_error (resolved so far 0)"
        in log.getvalue()
    )
    (rec,) = store.records()
    assert (rec.status, rec.attempts) == (EpisodeStatus.INFRA_ERROR, 2)
    assert rec.trajectory.ending == "infra_error"
