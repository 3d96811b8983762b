"""The grader runs pytest itself: a task's test command rewritten onto the grader's launcher,
and the launcher's report read back (pure functions; the launcher is `bin/deepswe_pytest.py`).

    PYTHONWARNINGS=x .venv/bin/python -W ignore -m pytest -rA r2e_tests
 -> PYTHONWARNINGS=x .venv/bin/python -W ignore /tmp/deepswe-grader-<k>/deepswe_pytest.py 5 \
        -rA r2e_tests

(5: the descriptor the settings arrive on, `tester.SETTINGS_FD`; what the launcher reports is
read back by `report.read_report`.)

Only a command with exactly one line that is one simple pytest invocation is taken over: its
environment assignments, an `xvfb-run`/`env` wrapper, the interpreter and its options are kept,
`-m pytest` (or a bare `pytest` console script) becomes the launcher. A line that runs a unittest
runner script the hidden tests ship (`<python> r2e_tests/<runner>.py`, R2E-Gym's tornado and
Pillow rows) is taken over the same way by the unittest launcher (`bin/deepswe_unittest.py`).
Anything else (Django's runtests.py, sympy's bin/test, pipes) can only be graded from output the
code under test can print into: SWE-bench's rules run it as the task wrote it; strict rules refuse
the task before any run (`strict_refusal`), with the reason.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from deepswe.data.task import TestSpec

LAUNCHER = Path(__file__).parent / "bin" / "deepswe_pytest.py"
UNITTEST_LAUNCHER = Path(__file__).parent / "bin" / "deepswe_unittest.py"
REPRO_LAUNCHER = Path(__file__).parent / "bin" / "deepswe_repro.py"  # the reproduction's
SEAL = Path(__file__).parent / "bin" / "deepswe_seal.py"  # imported by every launcher
SHADOW_PROBE = Path(__file__).parent / "bin" / "deepswe_shadow.py"

_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_PYTHON = re.compile(r"^python[0-9.]*$")
_PYTEST = ("pytest", "py.test")
_PY_OPTIONS_WITH_VALUE = ("-W", "-X", "-Q")
_OPERATOR = re.compile(r"^[();<>|&]+$")
# A unittest runner script shipped with the hidden tests (R2E-Gym's tornado and Pillow rows): the
# grader's own file, put in place at grading only, so the patch cannot change it.
_RUNNER_SCRIPT = re.compile(r"^r2e_tests/[A-Za-z0-9_]+\.py$")


@dataclass(frozen=True)
class OwnedCommand:
    """A test command rewritten so the grader's launcher runs pytest."""

    command: str
    interpreter: str
    """The interpreter as the command names it (a path or a name on PATH), or a shell
    expression that finds a bare `pytest` script's interpreter."""
    runner: str = "pytest"
    """"pytest", or "unittest": a runner script of the hidden tests under the unittest launcher."""


def _tokens(line: str) -> list[str] | None:
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:  # unbalanced quotes
        return None
    return None if any(_OPERATOR.match(t) for t in tokens) else tokens


def _rewrite(
    tokens: list[str], launcher: str, settings: str, unittest: str | None
) -> tuple[str, str, str] | None:
    """(the line rewritten, its interpreter, "pytest" or "unittest"), or None."""
    i, n = 0, len(tokens)
    head: list[str] = []
    while i < n and _ASSIGNMENT.match(tokens[i]):
        name, _, value = tokens[i].partition("=")
        head.append(f"{name}={shlex.quote(value)}")
        i += 1
    while i < n and Path(tokens[i]).name in ("xvfb-run", "env"):
        head.append(shlex.quote(tokens[i]))
        i += 1
        while i < n and (tokens[i].startswith("-") or _ASSIGNMENT.match(tokens[i])):
            head.append(shlex.quote(tokens[i]))
            i += 1
    if i >= n:
        return None
    tail = [shlex.quote(launcher), shlex.quote(settings)]
    exe = Path(tokens[i]).name
    if exe in _PYTEST:
        # A console script: its own interpreter, read from its #! line.
        interp = f'"$(deepswe_script_python {shlex.quote(tokens[i])})"'
        rest = tokens[i + 1 :]
        return " ".join([*head, interp, *tail, *map(shlex.quote, rest)]), interp, "pytest"
    if not _PYTHON.match(exe):
        return None
    interp = shlex.quote(tokens[i])
    j, options = i + 1, []
    while j < n and tokens[j] != "-m":
        if unittest and _RUNNER_SCRIPT.match(tokens[j]):
            # A unittest runner the hidden tests ship: run by the grader's unittest launcher.
            tail = [shlex.quote(unittest), shlex.quote(settings)]
            rest = tokens[j:]
            line = " ".join([*head, interp, *options, *tail, *map(shlex.quote, rest)])
            return line, interp, "unittest"
        if not tokens[j].startswith("-") or tokens[j] in ("-c", "-"):
            return None  # a script or -c: not pytest
        options.append(shlex.quote(tokens[j]))
        if tokens[j] in _PY_OPTIONS_WITH_VALUE:
            j += 1
            if j >= n:
                return None
            options.append(shlex.quote(tokens[j]))
        j += 1
    if j + 1 >= n or tokens[j + 1] not in _PYTEST:
        return None
    rest = tokens[j + 2 :]
    return " ".join([*head, interp, *options, *tail, *map(shlex.quote, rest)]), interp, "pytest"


# Finds a console script's interpreter from its #! line (`#!/usr/bin/env python3` included);
# `python` when the line names none (pip's /bin/sh trampoline for long paths).
SCRIPT_PYTHON_FUNCTION = """\
deepswe_script_python() {
  _s=$(command -v "$1") || { echo python; return; }
  set -- $(sed -n '1s/^#![[:space:]]*//p' "$_s")
  case "$1" in */env) shift;; esac
  case "$1" in *python*) echo "$1";; *) echo python;; esac
}
"""


def own_pytest_command(
    command: str, launcher: str, settings: str, unittest_launcher: str | None = None
) -> OwnedCommand | None:
    """`command` with its one pytest invocation run by `launcher` reading `settings` (or, given
    `unittest_launcher`, its one unittest runner from the hidden tests, `r2e_tests/<x>.py`, run
    by that launcher); None when the command has no such line, or more than one."""
    lines = command.splitlines()
    found: list[tuple[int, tuple[str, str, str]]] = []
    for k, line in enumerate(lines):
        tokens = _tokens(line)
        rewritten = _rewrite(tokens, launcher, settings, unittest_launcher) if tokens else None
        if rewritten is not None:
            found.append((k, rewritten))
    if len(found) != 1:
        return None
    k, (line, interp, runner) = found[0]
    lines[k] = line
    return OwnedCommand(
        command=SCRIPT_PYTHON_FUNCTION + "\n".join(lines), interpreter=interp, runner=runner
    )


def strict_refusal(spec: TestSpec) -> str | None:
    """Why strict rules cannot grade a task with `spec`, or None when they can (or when the task
    is graded by SWE-bench's rules). Strict rules read results only from the grader's own
    launcher; a command it cannot take over (one pytest line, or one unittest runner the hidden
    tests ship) would be graded from output the code under test can print into."""
    if spec.grading_rules != "strict" or own_pytest_command(spec.command, "l", "s", "u"):
        return None
    shown = " ".join(spec.command.split())
    shown = shown if len(shown) <= 120 else shown[:117] + "..."
    return (
        f"strict rules grade only tests the grader runs itself (one pytest line, or one "
        f"unittest runner of the hidden tests), not `{shown}`: grade this task under swebench "
        f"rules (grading_rules: swebench)"
    )


__all__ = [
    "LAUNCHER",
    "REPRO_LAUNCHER",
    "SCRIPT_PYTHON_FUNCTION",
    "SEAL",
    "SHADOW_PROBE",
    "UNITTEST_LAUNCHER",
    "OwnedCommand",
    "own_pytest_command",
    "strict_refusal",
]
