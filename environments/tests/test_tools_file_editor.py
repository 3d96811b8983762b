"""The file_editor script, run for real as a subprocess on temp files, under several Pythons."""

from __future__ import annotations

import glob
import subprocess
import sys
from pathlib import Path

import pytest

from deepswe.env.tools import ToolCall, run_tool_locally

# Task images bring their own python3 (3.6 to 3.12 in R2E-Gym/SWE-bench images): run the
# scripts under every interpreter this machine has, the host's first.
PYTHONS = [sys.executable] + sorted(
    glob.glob("/root/.pyenv/versions/3.6*/bin/python3.6")
    + glob.glob("/root/.pyenv/versions/3.9*/bin/python3.9")
    + glob.glob("/root/.pyenv/versions/3.13*/bin/python3.13")
)


@pytest.fixture(params=PYTHONS, ids=lambda p: Path(p).name)
def edit(request, tmp_path):
    """edit(command, path, **params) -> stdout of one file_editor run (stderr must be empty)."""
    state = tmp_path / "state.json"

    def run(command: str, path: Path | str, **params: str) -> str:
        call = ToolCall("file_editor", {"command": command, "path": str(path), **params})
        result = run_tool_locally(call, tmp_path, python=request.param, state_file=state)
        assert result.exit_code == 0
        assert result.stderr == ""
        return result.stdout

    return run


def test_create_then_refuses_existing_file(edit, tmp_path):
    target = tmp_path / "new.py"
    out = edit("create", target, file_text="a = 1\nb = 2")
    assert out == (
        f"File created at {target}. Here's the result of running `cat -n` on {target}:\n"
        "     1\ta = 1\n     2\tb = 2\n"
        "Review the file and make sure that it is as expected. Edit the file if necessary.\n"
    )
    assert target.read_text() == "a = 1\nb = 2"
    again = edit("create", target, file_text="other")
    assert again == f"ERROR: File already exists at: {target}. Cannot overwrite with 'create'.\n"
    assert target.read_text() == "a = 1\nb = 2"


def test_view_numbers_lines_and_ranges(edit, tmp_path):
    target = tmp_path / "m.py"
    target.write_text("".join(f"x{i} = {i}\n" for i in range(1, 11)))
    out = edit("view", target, view_range="[2, 3]")
    assert out == (
        f"Here's the result of running `cat -n` on the file: {target}:\n"
        "     2 x2 = 2\n     3 x3 = 3\n"
    )
    assert edit("view", target, view_range="[9, -1]").endswith("     9 x9 = 9\n    10 x10 = 10\n")


@pytest.mark.parametrize(
    ("view_range", "message"),
    [
        ("[0, 2]", "Invalid view_range [0, 2]: start line must be in [1, 10]"),
        ("[11, 12]", "Invalid view_range [11, 12]: start line must be in [1, 10]"),
        (
            "[5, 11]",
            "Invalid view_range [5, 11]: end must be >= start and <= 10, or -1 to view until end.",
        ),
        (
            "[5, 4]",
            "Invalid view_range [5, 4]: end must be >= start and <= 10, or -1 to view until end.",
        ),
    ],
)
def test_view_range_out_of_bounds(edit, tmp_path, view_range, message):
    target = tmp_path / "m.py"
    target.write_text("".join(f"x{i} = {i}\n" for i in range(1, 11)))
    # R2E-Gym prints the empty output, then "ERROR: <message>".
    assert edit("view", target, view_range=view_range) == f"\nERROR: {message}\n"


def test_view_refuses_non_python_files(edit, tmp_path):
    target = tmp_path / "notes.txt"
    target.write_text("hello\n")
    assert edit("view", target) == (
        "\nERROR: ERROR: Viewing non-Python files is disallowed for saving context. "
        "File 'notes.txt' is not a .py file.\n"
    )


def test_view_nonexistent_path(edit, tmp_path):
    missing = tmp_path / "nope.py"
    assert edit("view", missing) == f"ERROR: The path '{missing}' does not exist.\n"


def test_edit_on_directory_is_refused(edit, tmp_path):
    out = edit("str_replace", tmp_path, old_str="a", new_str="b")
    assert (
        out
        == f"ERROR: The path '{tmp_path}' is a directory. Only 'view' can be used on directories.\n"
    )


def test_directory_view_two_levels_python_only_no_hidden(edit, tmp_path):
    root = tmp_path / "repo"
    (root / "pkg" / "sub" / "deep").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / ".git" / "config.py").write_text("")
    (root / ".hidden.py").write_text("")
    (root / "setup.py").write_text("")
    (root / "README.md").write_text("")
    (root / "pkg" / "mod.py").write_text("")
    (root / "pkg" / "sub" / "inner.py").write_text("")  # depth 3: not listed
    out = edit("view", root)
    assert out == (
        f"Here's the files and directories up to 2 levels deep in {root}, excluding hidden:\n"
        f"{root}\n{root}/pkg\n{root}/pkg/mod.py\n{root}/pkg/sub\n{root}/setup.py\n\n"
    )


def test_directory_view_matches_find(tmp_path):
    """Same entries as the `find` command R2E-Gym runs (it prints them unsorted)."""
    root = tmp_path / "r"
    for rel in ["a/b/c/d.py", "a/x.py", "a/y.txt", "z.py", ".h/i.py", "a/.j.py", "e/f/g"]:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        if not rel.endswith("g"):
            (root / rel).write_text("")
    find = subprocess.run(
        [
            "find",
            "-L",
            str(root),
            "-maxdepth",
            "2",
            "-not",
            "-path",
            "*/.*",
            "(",
            "-type",
            "d",
            "-o",
            "-name",
            "*.py",
            ")",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    out = run_tool_locally(
        ToolCall("file_editor", {"command": "view", "path": str(root)}),
        tmp_path,
        state_file=tmp_path / "s",
    ).stdout
    assert sorted(out.splitlines()[1:-1]) == sorted(find)


def test_str_replace_zero_and_two_occurrences(edit, tmp_path):
    target = tmp_path / "t.py"
    target.write_text("x = 1\nx = 1\ny = 2\n")
    assert edit("str_replace", target, old_str="z = 3", new_str="w") == (
        f"ERROR: No occurrences of 'z = 3' found in {target} for replacement.\n"
    )
    assert edit("str_replace", target, old_str="x = 1", new_str="w") == (
        f"ERROR: Multiple occurrences of 'x = 1' found in {target}. "
        "Please ensure it is unique before using str_replace.\n"
    )
    assert target.read_text() == "x = 1\nx = 1\ny = 2\n"


def test_str_replace_snippet_and_undo_twice(edit, tmp_path):
    target = tmp_path / "t.py"
    original = "".join(f"line{i}\n" for i in range(1, 21))
    target.write_text(original)
    out = edit("str_replace", target, old_str="line10", new_str="ten\nTEN")
    # 4 lines of context before, 4 after (+1 for the added line), numbered from line 6.
    assert out == (
        f"The file {target} has been edited. Here's the result of running `cat -n` on a snippet of {target}:\n"
        "     6\tline6\n     7\tline7\n     8\tline8\n     9\tline9\n    10\tten\n    11\tTEN\n"
        "    12\tline11\n    13\tline12\n    14\tline13\n    15\tline14\n"
        "Review the changes and make sure they are as expected. Edit the file again if necessary.\n"
    )
    edit("insert", target, insert_line="0", new_str="# head")
    assert target.read_text().startswith("# head\nline1\n")
    first_undo = edit("undo_edit", target)
    assert first_undo.startswith(f"Last edit to {target} undone successfully. Here's the result")
    assert target.read_text() == original.replace("line10", "ten\nTEN")
    edit("undo_edit", target)
    assert target.read_text() == original
    assert edit("undo_edit", target) == f"ERROR: No previous edits found for {target} to undo.\n"


def test_insert_bounds_and_snippet(edit, tmp_path):
    target = tmp_path / "i.py"
    target.write_text("a\nb\nc")
    assert edit("insert", target, insert_line="4", new_str="z") == (
        "ERROR: Invalid insert_line 4. Must be in [0, 3].\n"
    )
    out = edit("insert", target, insert_line="3", new_str="d\ne")
    assert target.read_text() == "a\nb\nc\nd\ne"
    assert out == (
        f"The file {target} has been edited. Here's the result of running `cat -n` on a snippet of the edited file:\n"
        "     1\ta\n     2\tb\n     3\tc\n     4\td\n     5\te\n"
        "Review the changes and make sure they are as expected (correct indentation, no duplicate "
        "lines, etc). Edit the file again if necessary.\n"
    )


def test_huge_file_is_clipped_at_10000_characters(edit, tmp_path):
    target = tmp_path / "big.py"
    target.write_text("".join(f"value_{i} = {i}\n" for i in range(5000)))
    out = edit("view", target, view_range="[1, -1]")
    note = (
        "<response clipped><NOTE>To save on context only part of this file has been shown to you. "
        "You should retry this tool after you have searched inside the file with `grep -n` in order "
        "to find the line numbers of what you are looking for.</NOTE>\n"
    )
    assert out.endswith(note)
    assert len(out) == 10000 + len(note)


def test_long_python_file_gets_condensed_view(edit, tmp_path):
    target = tmp_path / "long.py"
    body = "".join(f"    v{i} = {i}\n" for i in range(150))
    target.write_text(f"import os\n\n\ndef big():\n{body}    return 0\n")
    out = edit("view", target)
    assert out.startswith(f"Here is a condensed view for file: {target}; [Note: Useful")
    assert "     4 def big():\n     5 ... eliding lines 5-155 ...\n" in out


def test_binary_file_reports_decode_error(edit, tmp_path):
    target = tmp_path / "blob.py"
    target.write_bytes(b"\x00\xff\xfe binary \x80")
    out = edit("str_replace", target, old_str="x", new_str="y")
    assert out.startswith(f"ERROR: Failed to read file {target}: 'utf-8' codec can't decode")


def test_unicode_content_round_trips(edit, tmp_path):
    target = tmp_path / "u.py"
    edit("create", target, file_text="s = 'héllo ✓'\n")
    edit("str_replace", target, old_str="héllo", new_str="wörld")
    assert target.read_text(encoding="utf-8") == "s = 'wörld ✓'\n"


def test_new_str_starting_with_dash_is_not_an_option(edit, tmp_path):
    """Regression: R2E-Gym passed `--new_str -x`, which argparse rejects as a missing value."""
    target = tmp_path / "d.py"
    target.write_text("items = []\n")
    edit("str_replace", target, old_str="items = []", new_str="- item one")
    assert target.read_text() == "- item one\n"


def test_unicode_under_c_locale(edit, tmp_path, monkeypatch):
    """Regression: Python 3.6 in a C locale decodes argv as ASCII (surrogate escapes) and
    prints ASCII; the editor must still write and show UTF-8."""
    monkeypatch.setenv("LC_ALL", "C")
    monkeypatch.setenv("LANG", "C")
    target = tmp_path / "c.py"
    out = edit("create", target, file_text="name = 'Zoë ✓'\n")
    assert "     1\tname = 'Zoë ✓'\n" in out
    assert target.read_text(encoding="utf-8") == "name = 'Zoë ✓'\n"
