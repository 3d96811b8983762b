"""Which Python R2E-Gym's install kept for a row, read from the setup log in the five real rows."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from deepswe.data.loaders.r2e_setup import setup_python

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
