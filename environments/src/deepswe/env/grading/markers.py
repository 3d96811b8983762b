"""Marker lines that scripts run in a sandbox print into the test log, and `grade` reads.

Where SWE-bench has a marker for the same event we use its exact text
(swebench 4.1.0, swebench/harness/constants/__init__.py), so logs stay readable by its tools.
"""

from __future__ import annotations

import re

# SWE-bench's markers (swebench.harness.constants: APPLY_PATCH_PASS, APPLY_PATCH_FAIL, ...).
APPLY_PATCH_PASS = ">>>>> Applied Patch"
APPLY_PATCH_FAIL = ">>>>> Patch Apply Failed"
RESET_FAILED = ">>>>> Reset Failed"
TESTS_TIMEOUT = ">>>>> Tests Timed Out"
START_TEST_OUTPUT = ">>>>> Start Test Output"
END_TEST_OUTPUT = ">>>>> End Test Output"

# Ours: the sandbox writes this line when the harness itself failed (container died, image
# missing, exec stream lost). SWE-bench has no such marker; the prefix matches its style.
INFRA_ERROR = ">>>>> Harness Infra Error"

# Ours, written by the reward run outside the test-output section (the code under test never
# writes there): a test-infrastructure file the patch changed, as JSON {"path", "why",
# "restored"}; a test run whose report cannot be trusted (why in parentheses); and that the
# grader ran pytest itself and the section holds its own report, not the process's output.
TEST_INFRA = ">>>>> Test Infrastructure Changed"
TEST_RUN_REJECTED = ">>>>> Test Run Rejected"
# Ours: a line the static gate flags in the patch, as JSON (outcomes.GateFlag).
STATIC_GATE = ">>>>> Static Gate"
# Ours: the grader's canaries or its integrity checks found the test process taken over.
TEST_RUN_TAMPERED = ">>>>> Test Run Tampered"
GRADER_RAN_TESTS = ">>>>> Tests Run By The Grader"
# Ours, for people: the reproduction run as a plain script after the tests (why it
# failed, in parentheses); the verdict reads RunFacts.reproduction, never this line.
REPRODUCTION_RUN = ">>>>> Reproduction Run"

# Every CSI escape sequence (colours, cursor moves) and carriage returns: test runners
# colour their output when they think they have a terminal.
_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\r")


def strip_ansi(text: str) -> str:
    """`text` without ANSI escape sequences and carriage returns."""
    return _ANSI_RE.sub("", text)


def has_marker(log: str, marker: str) -> bool:
    """True when some line of `log`, uncoloured and stripped, starts with `marker`.

    Whole-line matching (not substring) so that a marker quoted inside other output, e.g. in
    an assertion message, does not count.
    """
    return marker_line(log, marker) is not None


def marker_line(log: str, marker: str) -> str | None:
    """The first line of `log` that `has_marker` would match, stripped; None if there is none."""
    lines = marker_lines(log, marker)
    return lines[0] if lines else None


def marker_lines(log: str, marker: str) -> list[str]:
    """Every line of `log` that `has_marker` would match, stripped, in order."""
    return [
        line.strip() for line in strip_ansi(log).splitlines() if line.strip().startswith(marker)
    ]


def split_log(log: str) -> tuple[str, str]:
    """`(harness_text, test_output)` of a log from elsewhere (our reward runs carry their facts as
    values: `grade.judge`).

    The test output runs from the first line that is START to the last line that is END, each a
    whole line (SWE-bench's `get_logs_eval` parses the same section, ending at the first END). A
    marker inside a longer line (a reason, a file name) bounds nothing. Harness markers are looked
    for only in the rest: the code under test controls what it prints inside the section and
    must not be able to fake an infrastructure error. A log without both markers is all test
    output and all harness text.
    """
    lines = log.splitlines(keepends=True)
    bare = [strip_ansi(x).strip() for x in lines]
    starts = [k for k, x in enumerate(bare) if x == START_TEST_OUTPUT]
    ends = [k for k, x in enumerate(bare) if x == END_TEST_OUTPUT]
    if not starts or not ends or ends[-1] < starts[0]:
        return log, log
    start, end = starts[0], ends[-1]
    harness = "".join(lines[:start] + lines[end:])
    return harness, "".join(lines[start + 1 : end])
