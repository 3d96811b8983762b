"""Which images a run over R2E-Gym rows will use (the five real fixture rows): R2E-Gym's own
when the engine has it, else built from source, and what stops a run before it starts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from deepswe.data.loaders.r2e_gym import load_r2e_gym
from deepswe.env.recipes.r2e_gym.plan import plan_images

FIXTURES = Path(os.environ["DEEPSWE_R2E_FIXTURES"])


@pytest.fixture
def rows(monkeypatch):
    if not FIXTURES.is_dir():
        pytest.skip(f"no R2E-Gym fixtures at {FIXTURES} (set DEEPSWE_R2E_FIXTURES)")
    monkeypatch.delenv("DEEPSWE_HOST_PYTHONS", raising=False)
    return load_r2e_gym(FIXTURES)


def test_images_on_the_engine_are_used_as_they_are(rows):
    plan = plan_images(rows, mode="auto", mirror=None, image_exists=lambda _: True)
    assert (plan.on_engine, plan.from_source, plan.missing, plan.unsupported) == (5, 0, {}, {})
    assert [t.image for t in plan.usable] == [t.image for t in rows]


def test_without_image_or_mirror_each_row_is_missing_and_says_what_to_do(rows):
    plan = plan_images(rows, mode="auto", mirror=None, image_exists=lambda _: False)
    # orange3's two rows need a Python the host lacks: unsupported, whatever the mirror
    assert len(plan.missing) == 3 and len(plan.unsupported) == 2 and plan.usable == []
    assert all("--repo-mirror" in why for why in plan.missing.values())
    lines = plan.lines(None)
    assert lines[0].startswith("images for 5 R2E-Gym rows: 0 R2E-Gym's own on this engine")
    assert any(line.startswith("  missing (2): R2E-Gym's image <row's> is not") for line in lines)


def test_image_only_mode_with_the_image_absent_is_missing(rows):
    plan = plan_images(rows[:1], mode="image", mirror=None, image_exists=lambda _: False)
    assert list(plan.missing) == [rows[0].instance_id]
    assert "r2e_env: image" in next(iter(plan.missing.values()))


@pytest.mark.docker
def test_the_images_verb_exits_2_naming_what_is_missing(rows):
    from typer.testing import CliRunner

    from deepswe.eval.cli import app

    res = CliRunner().invoke(app, ["images", "--dataset", str(FIXTURES)])
    assert res.exit_code == 2
    assert "3 row(s) have no image and cannot be built" in res.output
    assert "images for 5 R2E-Gym rows" in res.output
