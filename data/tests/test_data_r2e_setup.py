"""Which Python R2E-Gym's install kept for a row, read from the setup log in the five real rows."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from deepswe.data.loaders.r2e_setup import setup_pins, setup_python

FIXTURES = Path(os.environ["DEEPSWE_R2E_FIXTURES"])


@pytest.fixture
def fixtures() -> Path:
    if not FIXTURES.is_dir():
        pytest.skip(f"no R2E-Gym fixtures at {FIXTURES} (set DEEPSWE_R2E_FIXTURES)")
    return FIXTURES


def test_the_setup_log_names_the_python_r2e_gym_kept(fixtures):
    pythons = {}
    for path in sorted(fixtures.glob("trajectory_*.json")):
        doc = json.loads(path.read_text())
        row = doc.get("ds") or doc["env_args"]["ds"]
        pythons[path.stem.split("_", 1)[1]] = setup_python(
            json.loads(row["execution_result_content"])
        )
    assert pythons == {
        "aiohttp_0813710e": "3.9",
        "aiohttp_216e0828": "3.9",
        "orange3_2d9617bd": "3.7",
        "orange3_56706b60": "3.7",
        "pillow_0836e388": "3.9",
    }
    assert (
        setup_python({"setup_res_stderr": "Using CPython 3.7.9\nUsing CPython 3.8.20\n"}) == "3.8"
    )
    assert setup_python({}) is None


def test_the_pins_are_what_the_kept_attempts_installs_added(fixtures):
    """orange3's real log: uv built psycopg2 2.9.9 from source (the wheel-only resolution here
    picked 2.7.7, whose import warning showed in 8 replayed steps); the project's own line
    (`+ orange3==... (from file:///...)`) is not a pin."""
    doc = json.loads((fixtures / "trajectory_orange3_56706b60.json").read_text())
    row = doc.get("ds") or doc["env_args"]["ds"]
    pins = setup_pins(json.loads(row["execution_result_content"]))
    assert "psycopg2==2.9.9" in pins and "numpy==1.17.5" in pins
    names = [p.split("==")[0] for p in pins]
    assert names == sorted(names) and not any(n.startswith("orange3") for n in names)
    log = (
        "Using CPython 3.7.9\n + numpy==1.17.5\n + six==1.16.0\n"  # an attempt given up
        "Using CPython 3.8.20\n + numpy==1.20.3\n - numpy==1.20.3\n + numpy==1.21.0\n"
        " + Proj==1.0 (from file:///testbed)\n"
    )
    assert setup_pins({"setup_res_stderr": log}) == ["numpy==1.21.0"]
    assert setup_pins({}) == []
