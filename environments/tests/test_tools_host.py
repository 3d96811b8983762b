"""Host side of the tools: calls -> commands, installation, observation strings."""

from __future__ import annotations

import ast
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from deepswe.env.tools import (
    TOOL_NAMES,
    ToolCall,
    ToolError,
    error_observation,
    format_observation,
    shell_command,
    timeout_observation,
    to_command,
    tool_files,
    truncate_observation,
)


def test_tool_names_in_prompt_order():
    assert TOOL_NAMES == ("file_editor", "execute_bash", "search", "finish")


def test_to_command_layout():
    call = ToolCall(
        "file_editor", {"command": "view", "path": "/testbed/x.py", "view_range": "[1, 20]"}
    )
    assert to_command(call) == [
        "file_editor",
        "--path=/testbed/x.py",
        "--view_range=[1, 20]",
        "--",
        "view",
    ]
    assert to_command(ToolCall("search", {"search_term": "foo", "path": "/testbed"})) == [
        "search",
        "--search_term=foo",
        "--path=/testbed",
    ]
    assert to_command(ToolCall("execute_bash", {"cmd": "ls -la"})) == [
        "execute_bash",
        "--cmd=ls -la",
    ]
    assert to_command(ToolCall("finish", {})) == ["finish"]


def test_finish_is_never_refused():
    """R2E-Gym ends the episode on any finish call; extra parameters must not block it."""
    call = ToolCall("finish", {"command": "submit", "summary": "fixed it"})
    assert to_command(call) == ["finish", "--", "submit"]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (ToolCall("rm_rf", {}), "Input action: rm_rf"),
        (
            ToolCall("file_editor", {"command": "view"}),
            "Missing required parameter 'path' for 'file_editor'.",
        ),
        (
            ToolCall("execute_bash", {"command": "ls"}),
            "Missing required parameter 'cmd' for 'execute_bash'.",
        ),
        (
            ToolCall("search", {"search_term": "x", "depth": "3"}),
            "Unknown parameter 'depth' for 'search'.",
        ),
        (ToolCall("execute_bash", {"cmd": "echo \x00"}), "contains a NUL byte"),
    ],
)
def test_invalid_calls_raise_tool_error(call, message):
    with pytest.raises(ToolError, match=None) as info:
        to_command(call)
    assert message in str(info.value)


@pytest.fixture
def installed(tmp_path: Path) -> dict[str, str]:
    """The tools installed as a sandbox would: executable, extension-less, on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, source in tool_files().items():
        target = bin_dir / name
        shutil.copyfile(source, target)
        target.chmod(target.stat().st_mode | stat.S_IXUSR)
    return {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "DEEPSWE_EDITOR_STATE": str(tmp_path / "s"),
    }


def test_tool_files_are_python3_scripts():
    for name, path in tool_files().items():
        assert path.is_file(), name
        assert path.read_text().startswith("#!/usr/bin/env python3\n")


def test_scripts_parse_as_python_36_and_avoid_37_only_arguments():
    for path in tool_files().values():
        source = path.read_text()
        tree = ast.parse(source, feature_version=(3, 6))
        keywords = {
            kw.arg for node in ast.walk(tree) if isinstance(node, ast.Call) for kw in node.keywords
        }
        assert not keywords & {"capture_output", "text"}, path.name  # subprocess args of 3.7+
        futures = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
        assert "annotations" not in futures, path.name


def test_shell_command_quotes_hostile_values(installed, tmp_path):
    target = tmp_path / "q.py"
    target.write_text("x = 1\n")
    nasty = "y = '$(touch pwned)' \"`id`\" ; rm -rf / # \\n"
    call = ToolCall(
        "file_editor",
        {"command": "str_replace", "path": str(target), "old_str": "x = 1", "new_str": nasty},
    )
    proc = subprocess.run(
        ["/bin/sh", "-c", shell_command(call)], env=installed, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert target.read_text() == nasty + "\n"
    assert not (tmp_path / "pwned").exists()


def test_installed_tools_run_by_name(installed, tmp_path):
    proc = subprocess.run(
        to_command(ToolCall("execute_bash", {"cmd": "echo hi"})),
        env=installed,
        capture_output=True,
        text=True,
    )
    assert proc.stdout == "[STDOUT]\n\nhi \n\n[STDERR]\n\n\n"


def test_format_observation_forms():
    assert (
        format_observation("execute_bash", "out\n", "", 0)
        == "Exit code: 0\nExecution output of [execute_bash]:\nout\n"
    )
    assert format_observation("execute_bash", "", "boom\n", 2).startswith(
        "Exit code: Error: Exit code 2\nExecution output of [execute_bash]:\nboom"
    )
    assert (
        format_observation("search", "Found 1 matches\n", "", 0)
        == "Execution output of [search]:\nFound 1 matches\n"
    )
    assert format_observation("finish", "<<<Finished>>>\n", "", 0) == "<<< Finished >>>"
    # docker.py strips colour codes and carriage returns
    assert (
        format_observation("file_editor", "\x1b[31mred\x1b[0m\r\n", "", 0)
        == "Execution output of [file_editor]:\nred\n"
    )


def test_truncate_observation_keeps_40_first_and_last_lines():
    text = "\n".join(str(i) for i in range(1, 82))  # 81 lines
    out = truncate_observation(text)
    lines = out.splitlines()
    assert lines[:40] == [str(i) for i in range(1, 41)]
    assert lines[40:43] == [
        "-" * 50,
        "<Observation truncated in middle for saving context>",
        "-" * 50,
    ]
    assert lines[43:] == [str(i) for i in range(42, 82)]
    exactly_80 = "\n".join(str(i) for i in range(80))
    assert truncate_observation(exactly_80) == exactly_80


def test_only_execute_bash_output_is_line_truncated():
    long = "\n".join(["x"] * 200)
    assert "<Observation truncated" in format_observation("execute_bash", long, "", 0)
    assert "<Observation truncated" not in format_observation("search", long, "", 0)
    assert "<Observation truncated" not in format_observation(
        "execute_bash", long, "", 0, truncate=False
    )


def test_timeout_and_error_observations():
    assert timeout_observation(90) == (
        "Exit code: -1\nExecution output of [execute_bash]:\nThe command took too long to execute (>90s)"
    )
    assert timeout_observation(90.0, "search") == (
        "Execution output of [search]:\nThe command took too long to execute (>90s)"
    )
    assert error_observation(
        "file_editor", "Missing required parameter 'path' for 'file_editor'."
    ) == (
        "Execution output of [file_editor]:\nMissing required parameter 'path' for 'file_editor'.\n"
    )
