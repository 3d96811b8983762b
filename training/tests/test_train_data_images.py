"""deepswe-train train says which images its R2E-Gym rows will use and stops before it starts
when a row has neither R2E-Gym's image nor a mirror to build it from."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from deepswe.data.loaders.r2e_gym import load_r2e_gym

FIXTURES = Path(os.environ["DEEPSWE_R2E_FIXTURES"])
CONFIGS = Path(__file__).resolve().parents[2] / "configs"


@pytest.fixture
def rows(monkeypatch):
    if not FIXTURES.is_dir():
        pytest.skip(f"no R2E-Gym fixtures at {FIXTURES} (set DEEPSWE_R2E_FIXTURES)")
    monkeypatch.delenv("DEEPSWE_HOST_PYTHONS", raising=False)
    return load_r2e_gym(FIXTURES)


@pytest.mark.docker  # the plan asks the engine which images it has
def test_training_stops_before_it_starts_naming_the_mirror(rows, tmp_path, capsys):
    """deepswe-train train's data check (the spine source's own planning)."""
    from deepswe.data.toy import write_tasks
    from deepswe.train.config import load_config
    from deepswe.train.preflight import data_problems

    path = write_tasks(rows, tmp_path / "rows.jsonl")
    cfg = load_config(CONFIGS / "deepswe-32b.yaml", [f"data.path={path}"])
    problems = data_problems(cfg)
    assert len(problems) == 1 and "set data.repo_mirror" in problems[0]
    assert "images for 5 R2E-Gym rows" in capsys.readouterr().err
    missing = load_config(CONFIGS / "deepswe-32b.yaml", [f"data.path={tmp_path}/none.jsonl"])
    assert "no such file (make data PROFILE=... writes it)" in data_problems(missing)[0]


def test_training_leaves_out_a_task_strict_rules_refuse(tmp_path, capsys):
    """Its reward would be read from what its tests print: left out, said on stderr."""
    from deepswe.data.toy import make_toy_tasks
    from deepswe.train.sources.task_list import without_refused

    good, bad = make_toy_tasks(tmp_path, n=2)
    spec = bad.test_spec.model_copy(update={"command": "./tests/runtests.py admin_views"})
    bad = bad.model_copy(update={"test_spec": spec})
    assert without_refused([good, bad]) == [good]
    assert f"{bad.instance_id} left out: strict rules" in capsys.readouterr().err
