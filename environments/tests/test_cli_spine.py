"""`deepswe-env` verbs a user runs: build, episode, grade, gc; on the real calc task."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from deepswe.env.cli import app
from deepswe.env.sandbox.docker import LABEL, client

pytestmark = pytest.mark.docker
runner = CliRunner()


@pytest.fixture(scope="module")
def tasks_file(calc_task, tmp_path_factory):
    path = tmp_path_factory.mktemp("tasks") / "tasks.jsonl"
    path.write_text(calc_task.model_dump_json() + "\n")
    return path


def test_episode_gold_prints_one_json_line(tasks_file, tmp_path):
    out = tmp_path / "traj.json"
    r = runner.invoke(
        app,
        [
            "episode",
            "--tasks",
            str(tasks_file),
            "--id",
            "calc__calc-1",
            "--policy",
            "gold",
            "--scaffold",
            "r2e-gym",
            "--out",
            str(out),
        ],
    )
    assert r.exit_code == 0, r.output
    assert json.loads(out.read_text())["steps"][-1]["observation"] == "<<< Finished >>>"
    line = json.loads(r.stdout.strip().splitlines()[-1])
    assert {k: line[k] for k in ("instance_id", "outcome", "reward", "ended")} == {
        "instance_id": "calc__calc-1",
        "outcome": "resolved",
        "reward": 1.0,
        "ended": "submitted",
    }
    assert line["steps"] == 2 and line["seconds"] > 0
    assert json.loads(out.read_text())["patch"].startswith("diff --git a/calc/ops.py")


def test_grade_a_patch_file(tasks_file, calc_task, tmp_path):
    patch = tmp_path / "fix.diff"
    patch.write_text(calc_task.gold_patch)
    r = runner.invoke(
        app, ["grade", "--tasks", str(tasks_file), "--id", "calc__calc-1", "--patch", str(patch)]
    )
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["outcome"] == "resolved"


def test_unknown_id_is_a_clear_error(tasks_file):
    r = runner.invoke(
        app, ["episode", "--tasks", str(tasks_file), "--id", "nope", "--policy", "empty"]
    )
    assert r.exit_code == 1 and "no task with id 'nope'" in r.output


def test_openai_policy_needs_its_endpoint(tasks_file):
    r = runner.invoke(
        app, ["episode", "--tasks", str(tasks_file), "--id", "calc__calc-1", "--policy", "openai"]
    )
    assert (
        r.exit_code == 2
        and "needs a base_url and a model (deepswe-env episode: --base-url" in r.output
    )


def test_gc_removes_orphans(base_image):
    orphan = client().containers.create(
        base_image, ["sleep", "infinity"], labels={LABEL: "1", "deepswe.owner-pid": "999999999"}
    )
    r = runner.invoke(app, ["gc"])
    assert r.exit_code == 0 and orphan.name in r.stdout
