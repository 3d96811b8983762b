"""parse_action on real model outputs: the R2E-Gym trajectories in tests/data/r2e-gym.

R2E-Gym records each step as `thought` (the reply before the call) and `action` (the parsed call
written back with Action.to_xml_string). Rebuilding the reply from them and parsing it must give
the recorded action again, and the recorded thought.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from deepswe.env.agent.parser import parse_action

FIXTURE_FILES = sorted(Path(os.environ["DEEPSWE_R2E_FIXTURES"]).glob("trajectory_*.json"))


def _steps(path: Path) -> list[dict]:
    return json.loads(path.read_text())["trajectory_steps"]


@pytest.mark.parametrize("fixture", FIXTURE_FILES, ids=lambda p: p.stem)
def test_reply_parses_to_recorded_action(fixture: Path):
    steps = _steps(fixture)
    assert steps
    for step in steps:
        reply = step["thought"] + "\n\n" + step["action"]
        parsed = parse_action(reply)
        assert parsed.to_xml() == step["action"], step["step_idx"]
        assert parsed.thought == step["thought"].strip()
        assert parsed.error is None, (step["step_idx"], parsed.error)
        assert parsed.call is not None


@pytest.mark.parametrize("fixture", FIXTURE_FILES, ids=lambda p: p.stem)
def test_recorded_thoughts_with_think_block(fixture: Path):
    """The raw replies start with Qwen3's <think> block; the call comes after it."""
    for step in _steps(fixture):
        assert "<function=" not in step["thought"]
    assert any(step["thought"].lstrip().startswith("<think>") for step in _steps(fixture))
