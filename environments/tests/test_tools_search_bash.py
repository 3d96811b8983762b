"""The search, execute_bash and finish scripts, run for real as subprocesses."""

from __future__ import annotations

import glob
import subprocess
import sys
from pathlib import Path

import pytest

from deepswe.env.tools import ToolCall, run_tool_locally

PYTHONS = [sys.executable] + sorted(
    glob.glob("/root/.pyenv/versions/3.6*/bin/python3.6")
    + glob.glob("/root/.pyenv/versions/3.13*/bin/python3.13")
)


@pytest.fixture(params=PYTHONS, ids=lambda p: Path(p).name)
def python(request) -> str:
    return request.param


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A small real git repository."""
    root = tmp_path / "testbed"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "core.py").write_text("def target():\n    return 'target'\n")
    (root / "pkg" / "util.py").write_text("# no match here\n")
    (root / "README.md").write_text("target in docs\n")  # not .py: skipped by default
    (root / ".hidden.py").write_text("target\n")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "add", "."], cwd=root, check=True)
    subprocess.run(
        ["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "init"],
        cwd=root,
        check=True,
    )
    return root


def _search(repo: Path, python: str, **params: str):
    return run_tool_locally(ToolCall("search", params), repo, python=python)


def test_search_directory_lists_python_files_relative_to_cwd(repo, python):
    run = _search(repo, python, search_term="target", path=str(repo))
    assert run.exit_code == 0
    assert run.stdout == (
        f'Found 2 matches for "target" in {repo}:\n'
        "./pkg/core.py (2 matches)\n"
        f'End of matches for "target" in {repo}\n'
    )


def test_search_default_path_is_cwd(repo, python):
    run = _search(repo, python, search_term="no match")
    assert run.stdout.splitlines()[1] == "./pkg/util.py (1 matches)"


def test_search_no_match(repo, python):
    run = _search(repo, python, search_term="absent_term", path=str(repo))
    assert (run.exit_code, run.stdout) == (0, f'No matches found for "absent_term" in {repo}\n')


def test_search_single_file_uses_grep_n(repo, python):
    core = repo / "pkg" / "core.py"
    run = _search(repo, python, search_term="return", path=str(core))
    assert run.stdout == f"Matches for \"return\" in {core}:\n2:    return 'target'\n"


def test_search_missing_path(repo, python):
    run = _search(repo, python, search_term="x", path=str(repo / "nowhere"))
    assert (run.exit_code, run.stdout) == (
        1,
        f"Directory '{repo / 'nowhere'}' not found or not a directory.\n",
    )


def test_search_more_than_100_files_asks_to_narrow(tmp_path, python):
    for i in range(101):
        (tmp_path / f"m{i:03}.py").write_text("needle\n")
    run = _search(tmp_path, python, search_term="needle", path=str(tmp_path))
    assert (
        run.stdout
        == f'More than 101 files matched for "needle" in {tmp_path}. Please narrow your search.\n'
    )
    (tmp_path / "m000.py").unlink()
    assert _search(tmp_path, python, search_term="needle").stdout.startswith("Found 100 matches")


def _bash(cwd: Path, python: str, cmd: str):
    return run_tool_locally(ToolCall("execute_bash", {"cmd": cmd}), cwd, python=python)


def test_execute_bash_success_layout(tmp_path, python):
    run = _bash(tmp_path, python, "echo out; echo err 1>&2")
    assert (run.exit_code, run.stdout) == (0, "[STDOUT]\n\nout \n\n[STDERR]\n\nerr\n")
    assert (
        run.observation
        == "Exit code: 0\nExecution output of [execute_bash]:\n[STDOUT]\n\nout \n\n[STDERR]\n\nerr\n"
    )


def test_execute_bash_failure_layout_and_status(tmp_path, python):
    run = _bash(tmp_path, python, "echo partial; exit 3")
    assert run.exit_code == 3
    assert run.stdout == "Error executing command:\n\n[STDOUT]\n\npartial \n\n[STDERR]\n\n\n"
    assert run.observation.startswith(
        "Exit code: Error: Exit code 3\nExecution output of [execute_bash]:\n"
    )


@pytest.mark.parametrize("word", ["git", "ipython", "jupyter", "nohup"])
def test_execute_bash_refuses_blocked_first_word(repo, python, word):
    run = _bash(repo, python, f"  {word} status")
    assert (run.exit_code, run.stdout) == (
        1,
        f"Bash command '{word}' is not allowed. Please use a different command or tool.\n",
    )


def test_execute_bash_blocks_only_the_first_word(repo, python):
    run = _bash(repo, python, "cd . && git status --short")
    assert run.exit_code == 0  # R2E-Gym checks only the first word


def test_execute_bash_runs_in_cwd_with_closed_stdin(tmp_path, python):
    (tmp_path / "f.txt").write_text("content\n")
    run = _bash(tmp_path, python, "cat f.txt; cat")  # `cat` alone must see EOF, not hang
    assert run.stdout == "[STDOUT]\n\ncontent \n\n[STDERR]\n\n\n"


def test_execute_bash_empty_command_fails_like_r2egym(tmp_path, python):
    run = _bash(tmp_path, python, "   ")
    assert run.exit_code == 1
    assert "IndexError" in run.stderr


def test_execute_bash_long_output_truncated_in_observation(tmp_path, python):
    run = _bash(tmp_path, python, "seq 1 200")
    lines = run.stdout.splitlines()  # "[STDOUT]", "", "1" ... "199", "200 ", "", "[STDERR]", "", ""
    divider = "-" * 50
    expected = "\n".join(
        lines[:40]
        + [divider, "<Observation truncated in middle for saving context>", divider]
        + lines[-40:]
    )
    assert run.observation == f"Exit code: 0\nExecution output of [execute_bash]:\n{expected}"
    assert lines[39] == "38" and lines[-40] == "165"


def test_finish_submit(tmp_path, python):
    run = run_tool_locally(
        ToolCall("finish", {"command": "submit", "result": "done"}), tmp_path, python=python
    )
    assert (run.exit_code, run.stdout) == (0, "<<<Finished>>>\n")
    assert run.observation == "<<< Finished >>>"
