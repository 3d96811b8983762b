"""The grader runs pytest itself: a task's test command rewritten onto the grader's launcher,
and the launcher's report read back (pure functions; the launcher is `bin/deepswe_pytest.py`).

    PYTHONWARNINGS=x .venv/bin/python -W ignore -m pytest -rA r2e_tests
 -> PYTHONWARNINGS=x .venv/bin/python -W ignore /tmp/deepswe-grader-<k>/deepswe_pytest.py \
        /tmp/deepswe-grader-<k>/settings.json -rA r2e_tests

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
from dataclasses import dataclass, field
from pathlib import Path

from deepswe.data.task import TestSpec

LAUNCHER = Path(__file__).parent / "bin" / "deepswe_pytest.py"
UNITTEST_LAUNCHER = Path(__file__).parent / "bin" / "deepswe_unittest.py"
SHADOW_PROBE = Path(__file__).parent / "bin" / "deepswe_shadow.py"

# The launcher's report (see bin/deepswe_pytest.py).
STARTED = "# deepswe-grader report v2"
_RETURNED = re.compile(
    r"^=+ deepswe-grader: (?:pytest\.main|unittest) returned (-?\d+) (\S*) =+$", re.MULTILINE
)
_TAMPERED = re.compile(r"^# deepswe-grader: TAMPERED (.*)$", re.MULTILINE)

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


# What each canary must report (the launcher adds three tests of its own beside the graded ones).
CANARY_WANTED = {"pass": "PASSED", "fail": "FAILED", "error": "ERROR"}
_CANARY = re.compile(r"^# deepswe-grader: CANARY (\S+) (\S+)\s*$", re.MULTILINE)
_NO_CANARIES = re.compile(r"^# deepswe-grader: NO-CANARIES", re.MULTILINE)


@dataclass(frozen=True)
class LauncherReport:
    """What the launcher reported: the `-rA` section graded, its canaries, how it ended."""

    started: bool
    returned: int | None
    """pytest.main's exit status; None when the process ended before it returned."""
    summary: str
    """The report up to its closing line: the short-summary section the parsers read."""
    tampered: list[str] = field(default_factory=list)
    canaries: dict[str, list[str]] = field(default_factory=dict)
    """role (pass, fail, error) -> every status word reported for it (one, when all is well:
    a teardown that errors adds a second)."""
    no_canaries: bool = False
    """No test was collected, so no canary could be placed."""

    def canary_problems(self) -> list[str]:
        """Each canary missing or reported with another status than it must have."""
        if self.no_canaries:
            return []
        return [
            f"the grader's {role} canary was {'/'.join(self.canaries.get(role, [])) or 'not reported'}"
            for role, want in CANARY_WANTED.items()
            if self.canaries.get(role, []) != [want]
        ]


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


def read_report(text: str, nonce: str) -> LauncherReport:
    """The launcher's report. Its closing line counts only with the grader's `nonce`, and
    nothing after the first such line is read (the channel is append-only: what code under test
    writes at exit comes after it)."""
    returned = next((m for m in _RETURNED.finditer(text) if m[2] == nonce), None)
    summary = text[: returned.start()] if returned else text
    canaries: dict[str, list[str]] = {}
    for role, status in _CANARY.findall(summary):
        canaries.setdefault(role, []).append(status)
    return LauncherReport(
        started=text.startswith(STARTED),
        returned=int(returned[1]) if returned else None,
        summary=summary,
        tampered=[m.strip() for m in _TAMPERED.findall(summary)],
        canaries=canaries,
        no_canaries=bool(_NO_CANARIES.search(summary)),
    )


# Above this exit status pytest did not report (2 interrupted, 3 internal error, 4 usage error,
# 5 no tests): the statuses read decide, as they would for any run.
_PYTEST_FAILED = 1


def _failures(summary: str) -> bool:
    return any(line.startswith(("FAILED ", "ERROR ")) for line in summary.splitlines())


def missing_canaries(rep: LauncherReport) -> list[str]:
    """Canaries with the wrong status. A run that stopped at a real failure (`-x`) or ended
    before pytest returned may not reach them: missing canaries count only where nothing else
    already keeps the run from resolving."""
    problems = rep.canary_problems()
    if rep.returned is None or _failures(rep.summary):
        problems = [p for p in problems if "not reported" not in p]
    return problems


def rejection(rep: LauncherReport, exit_code: int, runner: str = "pytest") -> str:
    """Why a finished run's report cannot be trusted, or "" (statuses then decide).

    The process's own exit status is not compared with pytest's: what runs after pytest returns
    (atexit handlers, a C extension crashing at shutdown) cannot change the report, and a
    wrapper such as xvfb-run may change the status. The must-fail canary makes a run that
    reached it exit 1 whatever the real tests did."""
    if rep.returned is None:
        return f"the test process ended before {runner} returned (exit {exit_code})"
    if runner != "pytest":
        return ""  # a runner script's exit status is its own convention
    failures = _failures(rep.summary) or "FAILED" in rep.canaries.get("fail", [])
    if rep.returned == 0 and failures:
        return "pytest exited 0 with failures in its report"
    if rep.returned == _PYTEST_FAILED and not failures:
        return "pytest exited 1 with no failure in its report"
    return ""


__all__ = [
    "CANARY_WANTED",
    "LAUNCHER",
    "SCRIPT_PYTHON_FUNCTION",
    "SHADOW_PROBE",
    "UNITTEST_LAUNCHER",
    "LauncherReport",
    "missing_canaries",
    "OwnedCommand",
    "own_pytest_command",
    "read_report",
    "rejection",
    "strict_refusal",
]
