"""The issue's reproduction, run as a plain script after the tests (strict rules, rows that carry
one: swe-mini's `hidden.reproduction`): a fix must work outside any test runner too.

A fix that turns itself on only under pytest (`"pytest" in sys.modules`, `PYTEST_CURRENT_TEST`,
the runner's argv) passes the graded tests and leaves the bug for every user. The reproduction the
statement shows is run as a person would run it, the way swe-mini's synthesis ran it to write the
statement (`deepswe.data.swemini.snippet`): a fresh interpreter of the task's, as the tester, an
empty working directory, PYTHONHASHSEED=0, TZ=UTC, the code executed as `__main__`; the last line
it printed and the exception it raised are compared with what the row says the fix does
(`Reproduction.fixed`). What it prints is the code under test's: a patch that prints the
statement's value outside pytest passes here, but not the graded tests, unless it hard-codes
them too.

The result is not read from the process's output, which the code under test writes too (an atexit
handler printing a report of its own after the harness's): the grader's reproduction launcher
(`bin/deepswe_repro.py`) posts it through the same sealed vault as the tests' results, keyed by a
secret only root and the vault hold, and root reads it only from a report whose MAC holds.

    reproduction + the task's interpreter -> the launcher, as the tester -> the vault's report
    -> read_result -> judge() -> "" or why it fails
"""

from __future__ import annotations

import json
import secrets
import shlex
from dataclasses import dataclass, field

from deepswe.data.swemini.failure import short
from deepswe.data.task import Reproduction
from deepswe.env.grading.owned import REPRO_LAUNCHER, SCRIPT_PYTHON_FUNCTION, SEAL
from deepswe.env.grading.report import read_report
from deepswe.env.grading.tester import REPORT_FD, run_as_tester
from deepswe.env.sandbox import Sandbox

TIMEOUT_S = 60.0


_RESULT = "# deepswe-grader: REPRODUCTION "


def run_script(interpreter: str, grader_dir: str, workdir: str) -> str:
    """Bash (run as the tester) that runs `grader_dir/repro.py` through the grader's launcher in
    an empty folder with the task's interpreter (a name, a path relative to the repository, or the
    shell expression `own_pytest_command` gives), its settings on descriptor 5."""
    g, w = shlex.quote(grader_dir), shlex.quote(workdir)
    launcher = shlex.quote(f"{grader_dir}/{REPRO_LAUNCHER.name}")
    return f"""{SCRIPT_PYTHON_FUNCTION}cd {w} || exit 90
py={interpreter}
case "$py" in /*) ;; */*) py="$PWD/$py";; *) py=$(command -v "$py") || exit 91;; esac
cd "$(mktemp -d)" || exit 92
PYTHONHASHSEED=0 TZ=UTC LC_ALL=C.UTF-8 "$py" {launcher} 5 {g}/repro.py {w}
"""


@dataclass(frozen=True)
class Result:
    """What the reproduction's run showed, as the launcher's vault reported it."""

    last: str | None = None
    """The last non-empty line the code printed."""
    raised: bool = False
    exception: str | None = None
    """The exception's last line as Python prints it ("KeyError: 'x'")."""
    exception_types: list[str] = field(default_factory=list)
    """Its class's name and its bases'."""


@dataclass(frozen=True)
class Checked:
    """Why the reproduction still shows the bug ("" when it does what the fix does), and what the
    seal caught while it ran (the run is then tampered)."""

    why: str
    tampered: list[str] = field(default_factory=list)


def read_result(raw: bytes, key: bytes) -> tuple[Result | None, list[str]]:
    """(the result, tampered reasons) from the launcher's report: None when no authentic result
    was reported (the interpreter died, the code ended the process, the report was forged)."""
    rep = read_report(raw, key)
    if rep.returned is None or not rep.authentic:
        return None, list(rep.tampered)
    result = None
    for line in rep.summary.splitlines():
        if line.startswith(_RESULT):
            try:
                last, raised, exception, types = line[len(_RESULT) :].split(" ")
                result = Result(
                    _text(last),
                    raised == "1",
                    _text(exception),
                    [_text(t) or "" for t in types.split(",")] if types != "-" else [],
                )
            except ValueError:
                return None, [*rep.tampered, "a reproduction result that does not read"]
    return result, list(rep.tampered)


def _text(field: str) -> str | None:
    """A field of the vault's result line: UTF-8 in hex, "-" for none (ValueError otherwise)."""
    return None if field == "-" else bytes.fromhex(field).decode("utf-8", "replace")


def judge(repro: Reproduction, result: Result | None, timed_out: bool = False) -> str:
    """Why the run shows the bug still ("" when it does what the fix does)."""
    if timed_out:
        return f"it did not end within {TIMEOUT_S:.0f} s"
    if result is None:
        return "it ended without a report (the interpreter died, or the code ended it)"
    if repro.fixed == "raises":
        if repro.expected in result.exception_types:
            return ""
        return f"it should raise {repro.expected}, but " + (
            f"raised {result.exception}" if result.raised else "it returned normally"
        )
    if result.raised:
        return f"it raised {result.exception}"
    if repro.fixed == "runs":
        return ""
    # the value as synthesis wrote it into the row: addresses dropped, long ones cut with "..."
    last = short(result.last or "")
    want = repro.expected
    return "" if last == want else f"it printed {last[:200]!r}, the fix prints {want[:200]!r}"


def check(
    sandbox: Sandbox,
    grader_dir: str,
    repro: Reproduction,
    interpreter: str,
    workdir: str,
    protected: list[str] = (),
) -> Checked:
    """Run the reproduction as the tester through the grader's launcher, a fresh key for its
    report, after the tests' run in the same sandbox (which gave the repository to the tester and
    kept `protected`, the graded files, root's: not done again)."""
    key = secrets.token_bytes(32)
    settings = {
        "report_fd": REPORT_FD,
        "key": key.hex(),
        "grader_dir": grader_dir,
        "protected": list(protected),
    }
    for part in (REPRO_LAUNCHER, SEAL):
        sandbox.write_file(f"{grader_dir}/{part.name}", part.read_text())
    sandbox.write_file(f"{grader_dir}/repro.py", repro.code)
    script = run_script(interpreter, grader_dir, workdir)
    ran = run_as_tester(
        sandbox,
        grader_dir,
        script,
        workdir,
        TIMEOUT_S,
        list(protected),
        json.dumps(settings),
        hand_over=False,
    )
    result, tampered = read_result(ran.report, key)
    return Checked(judge(repro, result, ran.result.timed_out), tampered)


__all__ = ["TIMEOUT_S", "Checked", "Result", "check", "judge", "read_result", "run_script"]
