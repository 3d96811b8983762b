"""The OpenEnv server's door and config without Docker: which tasks a reset gets, which are
refused and why, and configs and actions refused naming the field."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from deepswe.data.profile import ConfigError
from deepswe.data.toy import make_toy_tasks

pytest.importorskip("openenv", reason="the openenv extra (evaluation[openenv]) is not installed")

from deepswe.eval.openenv.config import load_openenv_config  # noqa: E402
from deepswe.eval.openenv.door import TaskRefused, open_door  # noqa: E402
from deepswe.eval.openenv.models import SWEAction  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from openenv_fixtures import health_manifest  # noqa: E402


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    return make_toy_tasks(tmp_path_factory.mktemp("door"), n=4)


def test_the_manifests_unhealthy_tasks_are_refused_with_their_reason(tasks, tmp_path):
    sick = tasks[1].instance_id
    manifest = health_manifest(tasks, {sick: "needs the network: FAILED t::b"}, tmp_path / "h")
    door = open_door(tasks, health=manifest)
    assert sick not in door.tasks and len(door.tasks) == 3
    with pytest.raises(TaskRefused, match=f"{sick} is refused: unhealthy in .*needs the network"):
        door.pick(sick)
    assert sick in open_door(tasks, health=manifest, include_unhealthy=True).tasks


def test_a_reset_gets_its_task_by_id_by_seed_or_the_next_in_a_seeded_order(tasks):
    door, again = open_door(tasks, seed=3), open_door(tasks, seed=3)
    assert door.pick(tasks[2].instance_id) is tasks[2]
    assert door.pick(seed=7).instance_id == again.pick(seed=7).instance_id
    walk = [door.pick().instance_id for _ in range(8)]
    assert walk == [again.pick().instance_id for _ in range(8)]
    assert sorted(walk[:4]) == sorted(t.instance_id for t in tasks) and walk[4:] == walk[:4]
    with pytest.raises(TaskRefused, match="nope is not in this server's task set"):
        door.pick("nope")


def test_a_door_with_nothing_to_serve_says_why(tasks):
    with pytest.raises(TaskRefused, match="no task left to serve .*no image here"):
        open_door(tasks[:1], unsupported={tasks[0].instance_id: "no image here"})


def test_the_config_names_a_bad_field(tmp_path):
    profile = tmp_path / "p.yaml"
    profile.write_text("openenv:\n  tasks: t.jsonl\n  max_session: 4\n")
    with pytest.raises(ConfigError, match="openenv.max_session: unknown key"):
        load_openenv_config(profile)
    with pytest.raises(ConfigError, match=r"session_ttl_s \(60\) must exceed"):
        load_openenv_config(None, ["openenv.tasks=t", "openenv.session_ttl_s=60"])
    cfg = load_openenv_config(None, ["openenv.tasks=t", "openenv.episode.max_steps=50"])
    assert cfg.episode.max_steps == 50 and cfg.max_sessions == 8


def test_an_action_is_a_reply_or_a_call_never_both():
    call = SWEAction(tool="execute_bash", parameters={"cmd": "ls"})
    assert call.text() == "<function=execute_bash>\n  <parameter=cmd>ls</parameter>\n</function>"
    with pytest.raises(ValueError, match="exactly one of `message`"):
        SWEAction(message="hi", tool="finish")
    with pytest.raises(ValueError, match="exactly one of `message`"):
        SWEAction()
