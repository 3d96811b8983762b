"""The grader runs pytest itself: a task's test command rewritten onto the grader's launcher,
and the launcher's report read back (pure functions; the launcher is `bin/deepswe_pytest.py`).

    PYTHONWARNINGS=x .venv/bin/python -W ignore -m pytest -rA r2e_tests
 -> PYTHONWARNINGS=x .venv/bin/python -W ignore /tmp/deepswe-grader-<k>/deepswe_pytest.py \
        /tmp/deepswe-grader-<k>/report -rA r2e_tests

Only a command with exactly one line that is one simple pytest invocation is taken over: its
environment assignments, an `xvfb-run`/`env` wrapper, the interpreter and its options are kept,
`-m pytest` (or a bare `pytest` console script) becomes the launcher. Anything else (Django's
runtests.py, sympy's bin/test, pipes) runs as the task wrote it, and grading says so.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

LAUNCHER = Path(__file__).parent / "bin" / "deepswe_pytest.py"
SHADOW_PROBE = Path(__file__).parent / "bin" / "deepswe_shadow.py"

# The launcher's report (see bin/deepswe_pytest.py).
STARTED = "# deepswe-grader report v1"
_RETURNED = re.compile(r"^=+ deepswe-grader: pytest\.main returned (-?\d+) (\S*) =+$", re.MULTILINE)
_TAMPERED = re.compile(r"^# deepswe-grader: TAMPERED (.*)$", re.MULTILINE)

_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_PYTHON = re.compile(r"^python[0-9.]*$")
_PYTEST = ("pytest", "py.test")
_PY_OPTIONS_WITH_VALUE = ("-W", "-X", "-Q")
_OPERATOR = re.compile(r"^[();<>|&]+$")


@dataclass(frozen=True)
class OwnedCommand:
    """A test command rewritten so the grader's launcher runs pytest."""

    command: str
    interpreter: str
    """The interpreter as the command names it (a path or a name on PATH), or a shell
    expression that finds a bare `pytest` script's interpreter."""


def _tokens(line: str) -> list[str] | None:
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:  # unbalanced quotes
        return None
    return None if any(_OPERATOR.match(t) for t in tokens) else tokens


def _rewrite(tokens: list[str], launcher: str, report: str) -> tuple[str, str] | None:
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
    tail = [shlex.quote(launcher), shlex.quote(report)]
    exe = Path(tokens[i]).name
    if exe in _PYTEST:
        # A console script: its own interpreter, read from its #! line.
        interp = f'"$(deepswe_script_python {shlex.quote(tokens[i])})"'
        rest = tokens[i + 1 :]
        return " ".join([*head, interp, *tail, *map(shlex.quote, rest)]), interp
    if not _PYTHON.match(exe):
        return None
    interp = shlex.quote(tokens[i])
    j, options = i + 1, []
    while j < n and tokens[j] != "-m":
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
    return " ".join([*head, interp, *options, *tail, *map(shlex.quote, rest)]), interp


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


def own_pytest_command(command: str, launcher: str, report: str) -> OwnedCommand | None:
    """`command` with its one pytest invocation run by `launcher` writing `report`; None when
    the command has no such line, or more than one."""
    lines = command.splitlines()
    found: list[tuple[int, tuple[str, str]]] = []
    for k, line in enumerate(lines):
        tokens = _tokens(line)
        rewritten = _rewrite(tokens, launcher, report) if tokens else None
        if rewritten is not None:
            found.append((k, rewritten))
    if len(found) != 1:
        return None
    k, (line, interp) = found[0]
    lines[k] = line
    return OwnedCommand(command=SCRIPT_PYTHON_FUNCTION + "\n".join(lines), interpreter=interp)


@dataclass(frozen=True)
class LauncherReport:
    """What the launcher wrote: the `-rA` section graded, and how the process ended."""

    started: bool
    returned: int | None
    """pytest.main's exit status; None when the process ended before it returned."""
    summary: str
    """The report without its closing line: the short-summary section the parsers read."""
    tampered: list[str] = field(default_factory=list)


def read_report(text: str, nonce: str) -> LauncherReport:
    """The launcher's report; its closing line counts only with the grader's `nonce`."""
    returned = next((m for m in _RETURNED.finditer(text) if m[2] == nonce), None)
    summary = text[: returned.start()] if returned else text
    return LauncherReport(
        started=text.startswith(STARTED),
        returned=int(returned[1]) if returned else None,
        summary=summary,
        tampered=[m.strip() for m in _TAMPERED.findall(text)],
    )


__all__ = [
    "LAUNCHER",
    "SCRIPT_PYTHON_FUNCTION",
    "SHADOW_PROBE",
    "LauncherReport",
    "OwnedCommand",
    "own_pytest_command",
    "read_report",
]
