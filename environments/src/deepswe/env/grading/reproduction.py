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

    reproduction + the task's interpreter -> run as the tester -> judge() -> "" or why it fails
"""

from __future__ import annotations

import json
import shlex

from deepswe.data.swemini.failure import short
from deepswe.data.swemini.snippet import SNIPPET_HARNESS
from deepswe.data.task import Reproduction
from deepswe.env.grading.owned import SCRIPT_PYTHON_FUNCTION
from deepswe.env.grading.tester import run_as_tester
from deepswe.env.sandbox import Sandbox

TIMEOUT_S = 60.0


def run_script(interpreter: str, grader_dir: str, workdir: str) -> str:
    """Bash (run as the tester) that runs `grader_dir/repro.py` through the harness in an empty
    folder with the task's interpreter (a name, a path relative to the repository, or the shell
    expression `own_pytest_command` gives)."""
    g, w = shlex.quote(grader_dir), shlex.quote(workdir)
    return f"""{SCRIPT_PYTHON_FUNCTION}cd {w} || exit 90
py={interpreter}
case "$py" in /*) ;; */*) py="$PWD/$py";; *) py=$(command -v "$py") || exit 91;; esac
cd "$(mktemp -d)" || exit 92
PYTHONHASHSEED=0 TZ=UTC LC_ALL=C.UTF-8 "$py" -c {shlex.quote(SNIPPET_HARNESS)} < {g}/repro.py
"""


def judge(repro: Reproduction, output: str, timed_out: bool = False) -> str:
    """Why the run shows the bug still ("" when it does what the fix does)."""
    if timed_out:
        return f"it did not end within {TIMEOUT_S:.0f} s"
    lines = [x for x in output.splitlines() if x.strip()]
    try:
        report = json.loads(lines[-1]) if lines else None
    except ValueError:
        report = None
    if not isinstance(report, dict):
        return "it ended without a report (the interpreter died, or the code ended it)"
    raised = report.get("exception")
    if repro.fixed == "raises":
        if repro.expected in report.get("exception_types", []):
            return ""
        return f"it should raise {repro.expected}, but " + (
            f"raised {raised}" if raised else "it returned normally"
        )
    if raised:
        return f"it raised {raised}"
    if repro.fixed == "runs":
        return ""
    # the value as synthesis wrote it into the row: addresses dropped, long ones cut with "..."
    last = short(report.get("last") or "")
    want = repro.expected
    return "" if last == want else f"it printed {last[:200]!r}, the fix prints {want[:200]!r}"


def check(
    sandbox: Sandbox, grader_dir: str, repro: Reproduction, interpreter: str, workdir: str
) -> str:
    """Run the reproduction as the tester; why it still shows the bug, or ""."""
    sandbox.write_file(f"{grader_dir}/repro.py", repro.code)
    script = run_script(interpreter, grader_dir, workdir)
    ran, _ = run_as_tester(sandbox, grader_dir, script, workdir, TIMEOUT_S)
    return judge(repro, ran.stdout, ran.timed_out)


__all__ = ["TIMEOUT_S", "check", "judge", "run_script"]
