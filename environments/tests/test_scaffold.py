"""The two scaffolds (deepswe.env.tools.scaffold): R2E-Gym's observable behaviour, which
DeepSWE-Preview was trained on, against the clearer messages. The loop's text is checked without
a sandbox; the editor's decoding by running the real script; one Docker episode runs all three."""

from __future__ import annotations

import pytest

from deepswe.env.agent.loop import EpisodeLimits, _ends, _finished, _observe
from deepswe.env.agent.parser import parse_action
from deepswe.env.tools import FINISHED_OBSERVATION, ToolCall, run_tool_locally
from deepswe.env.tools.scaffold import decoder_wheel

R2E, OURS = EpisodeLimits(scaffold="r2e-gym"), EpisodeLimits(scaffold="deepswe")
INVALID = "<function=str_replace>\n<parameter=path>/testbed/a.py</parameter>\n</function>"


def test_an_invalid_function_shows_r2e_gyms_empty_output():
    """R2E-Gym's run_action catches its own "Invalid Action" assertion and returns ""."""
    parsed = parse_action(INVALID)
    assert _observe(parsed, None, R2E, 60)[0] == "Execution output of [str_replace]:\n"
    ours = _observe(parsed, None, OURS, 60)[0]
    assert "Invalid Action" in ours and "file_editor" in ours  # says which tools exist
    # a known tool with a bad parameter is the tool's own usage error under both
    bad = parse_action("<function=search><parameter=nope>x</parameter></function>")
    assert _observe(bad, None, R2E, 60)[0] == _observe(bad, None, OURS, 60)[0]


@pytest.mark.parametrize(
    ("name", "r2e_ends", "r2e_seen"),
    [
        ("finish", True, FINISHED_OBSERVATION),
        ("submit", True, FINISHED_OBSERVATION),
        ("finish_task", True, "Execution output of [finish_task]:\n"),  # invalid, still done
        ("execute_bash", False, None),
    ],
)
def test_what_ends_the_episode_and_what_is_recorded(name, r2e_ends, r2e_seen):
    parsed = parse_action(f"<function={name}>\n<parameter=command>submit</parameter>\n</function>")
    assert _ends(parsed, "r2e-gym") is r2e_ends
    assert _ends(parsed, "deepswe") is (name == "finish")
    if r2e_ends:
        assert _finished(parsed, "r2e-gym") == r2e_seen
        assert _finished(parsed, "deepswe") == ""
    assert not _ends(parse_action("no call at all"), "r2e-gym")


# A short UTF-8 file with one non-ASCII character, as Orange3's discretize.py (f"≥ {...}"):
# chardet 5.2.0 guesses Windows-1252, and R2E-Gym's editor showed `â‰¥` (k-l-lambda/R2E-Gym
# collected_data/trajectory_orange3_ef8363b6.json, step 2).
SOURCE = 'def label(low):\n    return f"\u2265 {low}"\n'


@pytest.fixture(scope="module")
def wheel():
    """chardet 5.2.0's wheel: fetched from PyPI once, then cached. Without it the r2e-gym
    scaffold cannot run, so its absence fails here rather than skipping."""
    return decoder_wheel()


def test_the_editor_decodes_as_r2e_gyms_with_the_decoder(tmp_path, wheel):
    (tmp_path / "m.py").write_text(SOURCE, encoding="utf-8")
    call = ToolCall("file_editor", {"command": "view", "path": str(tmp_path / "m.py")})
    state = tmp_path / "state.json"
    r2e = run_tool_locally(call, tmp_path, state_file=state, decoder=wheel).stdout
    assert 'return f"\u00e2\u2030\u00a5 {low}"' in r2e  # â‰¥
    ours = run_tool_locally(call, tmp_path, state_file=state).stdout
    assert 'return f"\u2265 {low}"' in ours


def test_an_edit_under_the_decoder_keeps_r2e_gyms_text(tmp_path, wheel):
    """R2E-Gym wrote back what it read, in UTF-8: the mojibake is in the file afterwards."""
    (tmp_path / "m.py").write_text(SOURCE, encoding="utf-8")
    edit = {
        "command": "str_replace",
        "path": str(tmp_path / "m.py"),
        "old_str": "low)",
        "new_str": "lo)",
    }
    run_tool_locally(
        ToolCall("file_editor", edit), tmp_path, state_file=tmp_path / "s", decoder=wheel
    )
    assert "\u00e2\u2030\u00a5" in (tmp_path / "m.py").read_text(encoding="utf-8")
