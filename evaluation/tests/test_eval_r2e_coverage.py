"""`deepswe-eval envs` on R2E-Gym rows (the five real fixture rows): rows per repository, which
build here and why the others not; and `run` on a row whose image is absent without a mirror."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from deepswe.data.loaders.r2e_gym import load_r2e_gym
from deepswe.env.recipes.r2e_gym.coverage import coverage, markdown, summary
from deepswe.eval.cli import app

FIXTURES = Path(os.environ["DEEPSWE_R2E_FIXTURES"])


@pytest.fixture
def fixtures() -> Path:
    if not FIXTURES.is_dir():
        pytest.skip(f"no R2E-Gym fixtures at {FIXTURES} (set DEEPSWE_R2E_FIXTURES)")
    return FIXTURES


def test_rows_per_repository_and_why_orange3_needs_a_host_python(fixtures, monkeypatch):
    monkeypatch.delenv("DEEPSWE_HOST_PYTHONS", raising=False)
    repos = {r.repo: r for r in coverage(load_r2e_gym(fixtures), None)}
    assert {k: (r.rows, r.eligible) for k, r in repos.items()} == {
        "aiohttp": (2, 2),
        "orange3": (2, 0),
        "pillow": (1, 1),
    }
    assert dict(repos["orange3"].reasons) == {
        "needs Python 3.7: Python 3.7 is not in the Debian images": 2
    }
    assert dict(repos["aiohttp"].pythons) == {"3.9": 2}
    text = markdown(list(repos.values()), mirror_checked=False)
    assert "| biolab/orange3 | 2 | 3.7 (2) | 0 |" in text and "| all | 5 | | 3 | |" in text


def test_with_host_pythons_every_fixture_row_is_eligible(fixtures, tmp_path, monkeypatch):
    (tmp_path / "3.7.16" / "bin").mkdir(parents=True)
    (tmp_path / "3.7.16" / "bin" / "python3").write_text("")
    monkeypatch.setenv("DEEPSWE_HOST_PYTHONS", str(tmp_path))
    got = summary(coverage(load_r2e_gym(fixtures), None))
    assert got["rows"] == got["rows_eligible"] == 5
    assert got["rows_per_repository"] == {"aiohttp": 2, "orange3": 2, "pillow": 1}


def test_envs_verb_lists_r2e_rows_by_repository(fixtures, monkeypatch):
    monkeypatch.delenv("DEEPSWE_HOST_PYTHONS", raising=False)
    res = CliRunner().invoke(app, ["envs", "--dataset", str(fixtures)])
    assert res.exit_code == 0, res.output
    assert "| aio-libs/aiohttp | 2 | 3.9 (2) | 2 | - |" in res.output
    assert json.loads(res.output[res.output.index("{") :])["rows_eligible"] == 3


@pytest.mark.docker
@pytest.mark.parametrize("verb", [["run", "eval.policy.name=gold"], ["validate"]])
def test_without_the_image_or_a_mirror_exits_2_in_one_line(fixtures, tmp_path, verb):
    """The engine is asked whether R2E-Gym's image is there (it is not: nothing here can pull
    namanjain12/*), and with no --repo-mirror nothing could build it."""
    out = tmp_path / "run"
    res = CliRunner().invoke(
        app,
        [*verb, "--dataset", str(fixtures), "--ids", "aiohttp_0813710e", "--out", str(out)],
    )
    assert res.exit_code == 2, res.output
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "--repo-mirror DIR" in lines[0], res.output
    assert not out.exists()
