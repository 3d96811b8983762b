"""The `openenv` rollout source (data.source: openenv): episodes played on a real
`deepswe-eval serve` process through openenv's own client, unmodified, over its WebSocket.

The same task and the same scripted policy through the `spine` source and through the server
give the same trajectory (messages, observations, patch, outcome, reward); one GRPO++ step runs
on episodes the trainer's engine played on the server; the config is checked at load.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from deepswe.data.profile import ConfigError
from deepswe.data.toy import make_toy_tasks, write_tasks
from deepswe.env.images.task import ensure_task_image
from deepswe.env.policies.scripted import GoldPolicy
from deepswe.train.config import validate
from deepswe.train.models import build_test_model

MAX_STEPS = 3
SANDBOX = {"memory": "1g", "pids": 256}


def _cfg(tmp: Path, data: dict, **sections) -> object:
    doc = {
        "run": {"steps": 1, "tensorboard": False},
        "model": {"path": str(tmp / "no-model")},
        "data": data,
        "episode": {"max_steps": MAX_STEPS, "scaffold": "deepswe", "sandbox": SANDBOX},
        **sections,
    }
    return validate(doc, "test")


@pytest.mark.parametrize(
    ("openenv", "says"),
    [
        ({}, "data.openenv.url: the openenv source needs the server's URL"),
        ({"url": "localhost:8000"}, "data.openenv.url"),
        ({"url": "ftp://host:21"}, "not an http"),
        ({"url": "http://h:1", "message_timeout_s": 0}, "data.openenv.message_timeout_s"),
    ],
)
def test_the_openenv_source_is_refused_at_load_naming_the_field(tmp_path, openenv, says):
    data = {"source": "openenv", "path": "tasks.jsonl", "openenv": openenv}
    with pytest.raises(ConfigError, match=says):
        _cfg(tmp_path, data)


def test_the_openenv_source_needs_the_task_file_too(tmp_path):
    with pytest.raises(ConfigError, match="data.path: the openenv source needs a task file"):
        _cfg(tmp_path, {"source": "openenv", "openenv": {"url": "http://127.0.0.1:8000/"}})
    ok = _cfg(tmp_path, {"source": "openenv", "path": "t.jsonl", "openenv": {"url": "ws://h:9/"}})
    assert ok.data.openenv.url == "ws://h:9"


# --- against a real server (Docker) ----------------------------------------------------------

pytest.importorskip("openenv", reason="the openenv extra (evaluation[openenv]) is not installed")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "evaluation" / "tests"))
from openenv_fixtures import start_server  # noqa: E402

from deepswe.train.sources.openenv import OpenEnvSource  # noqa: E402
from deepswe.train.sources.spine import SpineSource  # noqa: E402


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """Two toy tasks (one image) and a server of them whose episodes have MAX_STEPS steps."""
    root = tmp_path_factory.mktemp("openenv-source")
    tasks = make_toy_tasks(root, n=2)
    ensure_task_image(tasks[0], log=lambda _: None)
    data = write_tasks(tasks, root / "tasks.jsonl")
    episode = {"max_steps": MAX_STEPS, "scaffold": "deepswe", "prompt_variant": "train"}
    server = start_server(root, data, max_sessions=4, episode=episode)
    yield root, tasks, data, server
    server.stop()
    assert not server.wait_for_no_containers(), "the server left sandboxes behind"


def _source_cfg(root: Path, data: Path, url: str, **sections):
    src = {"source": "openenv", "path": str(data), "openenv": {"url": url}, "shuffle": False}
    return _cfg(root, src, **sections)


@pytest.mark.docker
def test_gold_through_the_server_and_through_the_spine_gives_the_same_trajectory(served):
    root, tasks, data, server = served
    task = tasks[0]
    cfg = _source_cfg(root, data, server.url)
    via_server = OpenEnvSource(cfg).rollout(task, GoldPolicy(task.gold_patch))
    in_process = SpineSource(cfg, [task]).rollout(task, GoldPolicy(task.gold_patch))
    for t in (via_server, in_process):
        assert (t.ending.value, t.outcome.value, t.reward) == ("submitted", "resolved", 1.0)
    assert via_server.messages == in_process.messages
    assert [s.observation for s in via_server.steps] == [s.observation for s in in_process.steps]
    assert [s.action for s in via_server.steps] == [s.action for s in in_process.steps]
    assert via_server.patch == in_process.patch and via_server.patch
    assert via_server.grade.statuses == in_process.grade.statuses


@pytest.mark.docker
def test_a_server_of_other_episode_limits_is_refused_naming_both(served):
    root, tasks, data, server = served
    cfg = _source_cfg(root, data, server.url)
    cfg = cfg.model_copy(update={"episode": cfg.episode.model_copy(update={"max_steps": 7})})
    with pytest.raises(ValueError, match=f"episode.max_steps is 7 .* {MAX_STEPS} steps"):
        OpenEnvSource(cfg).rollout(tasks[0], GoldPolicy(tasks[0].gold_patch))


@pytest.mark.docker
def test_a_server_of_another_prompt_is_refused_naming_the_field(served):
    root, tasks, data, server = served
    cfg = _source_cfg(root, data, server.url)
    cfg = cfg.model_copy(
        update={"episode": cfg.episode.model_copy(update={"prompt_variant": "eval"})}
    )
    with pytest.raises(ValueError, match="another prompt than episode.prompt_variant='eval'"):
        OpenEnvSource(cfg).rollout(tasks[0], GoldPolicy(tasks[0].gold_patch))


@pytest.mark.docker
def test_a_dead_server_is_infra_error_never_a_reward(served):
    root, tasks, data, _ = served
    cfg = _source_cfg(root, data, "http://127.0.0.1:9")  # nothing listens on port 9
    traj = OpenEnvSource(cfg).rollout(tasks[0], GoldPolicy(tasks[0].gold_patch))
    assert (traj.ending.value, traj.outcome.value, traj.reward) == ("infra_error",) * 2 + (None,)
    assert "openenv server" in traj.ending_detail


@pytest.mark.docker
def test_one_grpo_step_on_episodes_played_on_the_server(served, tmp_path):
    from deepswe.train.trainer import Trainer

    root, tasks, data, server = served
    cfg = _source_cfg(
        root,
        data,
        server.url,
        model={"path": str(build_test_model(tmp_path / "tiny"))},
        rollout={"tasks_per_step": 1, "group_size": 2, "concurrency": 2, "max_tokens_per_turn": 16},
        algo={"loss_constant": 64, "mask_endings": []},  # train on the cut-off episodes
    )
    trainer = Trainer.setup(cfg, tmp_path / "run")
    (record,) = trainer.train()
    trajs = [json.loads(x) for x in (tmp_path / "run/trajectories/step-000001.jsonl").open()]
    assert len(trajs) == 2
    for t in trajs:
        assert t["ending"] != "infra_error", t["ending_detail"]
        # A random tiny model does not fix the bug: graded by the server's reward run.
        assert (t["outcome"], t["reward"]) == ("unresolved", 0.0), t["grade"]
        assert t["grade"]["outcome"] == "unresolved" and t["messages"][0]["role"] == "system"
        assert all(s["token_ids"] and len(s["token_ids"]) == len(s["logprobs"]) for s in t["steps"])
    assert record["filter/trained"] == 2 and record["tokens/response"] > 0
    assert record["rollout/logprob_diff"] < 1e-3  # the sampled ids are the ones trained on
    assert all(s["step"] == 1 for s in trainer.backend.optimizer.state.values())
