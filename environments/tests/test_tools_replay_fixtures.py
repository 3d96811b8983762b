"""Replay real R2E-Gym trajectories through our parser, tools and observation strings.

Each fixture in tests/data/r2e-gym is a recorded DeepSWE-style run. Its dataset row
holds the pre-fix contents of the files the fix touches, so every `file_editor` call on those
files (and on files the agent created) can be replayed on a copy: model output -> parse_action
-> to_command -> our script -> format_observation must give the recorded observation exactly.

R2E-Gym ran the editor with the image's Python, and the condensed view depends on it (before
3.8 `ast` has no end_lineno and a fallback guesses function-body starts), so each repository
is replayed with an interpreter of the kind its image had: aiohttp 3.9, Orange3 3.7, Pillow any.
The copy lives at `<tmp>/testbedX/`, a path as long as `/testbed`, so the 10,000-character clip
falls on the same character.
"""

from __future__ import annotations

import glob
import json
import os
import sys
from pathlib import Path

import pytest

from deepswe.env.agent.parser import parse_action
from deepswe.env.tools import ToolCall, run_tool_locally

FIXTURES = Path(os.environ["DEEPSWE_R2E_FIXTURES"])
FIXTURE_FILES = sorted(FIXTURES.glob("trajectory_*.json"))


def _pyenv(version: str) -> str | None:
    found = sorted(glob.glob(f"/root/.pyenv/versions/{version}*/bin/python{version}"))
    return found[0] if found else None


def _interpreter(repo: str) -> str | None:
    if repo == "orange3":  # its images ran Python < 3.8
        return _pyenv("3.7") or _pyenv("3.6")
    return sys.executable  # aiohttp (3.9) and pillow behave as any Python >= 3.8


def _replay(path: Path, tmp_path: Path) -> list[tuple[int, str, str]]:
    """Returns (step, expected, got) for every replayable file_editor step."""
    record = json.loads(path.read_text())
    row = record["ds"] or record["env_args"]["ds"]
    python = _interpreter(path.name.split("_")[1])
    if python is None:
        pytest.skip("needs a Python < 3.8 interpreter (pyenv 3.6/3.7) to match this image")
    root = tmp_path / "testbedX"
    known = set()
    for diff in json.loads(row["parsed_commit_content"])["file_diffs"]:
        rel, old = diff["header"]["file"]["path"], diff.get("old_file_content")
        if old:
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(old)
            known.add("/testbed/" + rel)
    results = []
    for step in record["trajectory_steps"]:
        parsed = parse_action(step["action"])
        target = parsed.parameters.get("path", "")
        if parsed.function_name != "file_editor":
            continue
        if parsed.parameters.get("command") == "create":
            known.add(target)
        if target not in known:
            continue
        params = {**parsed.parameters, "path": target.replace("/testbed/", "testbedX/", 1)}
        run = run_tool_locally(
            ToolCall("file_editor", params),
            tmp_path,
            python=python,
            state_file=tmp_path / "editor_state.json",
        )
        got = run.observation.replace("testbedX/", "/testbed/")
        results.append((step["step_idx"], step["observation"], got))
    return results


@pytest.mark.parametrize("fixture", FIXTURE_FILES, ids=lambda p: p.stem)
def test_file_editor_observations_match_recorded_trajectory(fixture: Path, tmp_path: Path):
    results = _replay(fixture, tmp_path)
    assert results, "no replayable file_editor step"
    for step, expected, got in results:
        assert got == expected, f"step {step} differs"


def test_replay_covers_every_editor_command():
    """The fixtures exercise view (plain, ranged, condensed, clipped), create, str_replace
    (edited, 0 and 2 occurrences), insert and a view_range error; guard against losing them."""
    seen = set()
    for path in FIXTURE_FILES:
        for step in json.loads(path.read_text())["trajectory_steps"]:
            parsed = parse_action(step["action"])
            if parsed.function_name == "file_editor":
                seen.add(parsed.parameters["command"])
    assert {"view", "create", "str_replace", "insert"} <= seen
