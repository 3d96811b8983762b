"""R2E-Gym's reading of its `run_tests.sh` (pytest -rA) logs, and test-name normalisation.

What R2E-Gym does (R2E-Gym/R2E-Gym: src/r2egym/repo_analysis/execution_log_parser.py
`parse_log_pytest` and `decolor_dict_keys`; src/r2egym/agenthub/runtime/docker.py
`run_tests`, `_calculate_reward_r2e`), restated here in our own code:
- ANSI codes and \\r are stripped from the log; only the short test summary is read;
- a PASSED/FAILED/ERROR line names the test `"::".join(nodeid parts after the file)` with
  `::` turned into `.` (so `tests/t.py::Cls::test_a[x]` -> `Cls.test_a[x]`); SKIPPED,
  XFAIL and XPASS lines are not recorded;
- keys of both the parsed map and `expected_output_json` are decoloured and cut at the
  first " - " before comparing.

Where we differ, on purpose: the status is the line's leading word (R2E-Gym tests for the
substring "PASSED" first, so `FAILED t - assert 'PASSED' == x` would read as a pass), and a
collection error on a file keeps the file path as its key instead of an empty name (which
R2E-Gym skips in the comparison loop, so a one-test task could be scored 1.0 on it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from deepswe.env.grading.markers import strip_ansi
from deepswe.env.grading.outcomes import TestStatus
from deepswe.env.grading.parsers.pytest_summary import iter_entries, merge_status, summary_lines

if TYPE_CHECKING:
    from deepswe.data.task import Task

RECORDED = frozenset({TestStatus.PASSED, TestStatus.FAILED, TestStatus.ERROR})


def r2e_key(name: str) -> str:
    """The comparison key R2E-Gym uses for a test name: decoloured, cut at ' - '."""
    return strip_ansi(name).split(" - ")[0]


def r2e_name(nodeid: str) -> str:
    """`path.py::Cls::test_x[p]` -> `Cls.test_x[p]`; a bare path (collection error) stays."""
    parts = nodeid.split("::")
    return ".".join(parts[1:]) if len(parts) > 1 else nodeid


def parse(log: str, task: Task | None = None) -> dict[str, TestStatus]:
    """Map each R2E-Gym test name in `log` to its status (PASSED, FAILED or ERROR)."""
    statuses: dict[str, TestStatus] = {}
    for nodeid, status in iter_entries(summary_lines(log)):
        if status in RECORDED:
            merge_status(statuses, r2e_key(r2e_name(nodeid)), status)
    return statuses


def expected_statuses(task: Task) -> dict[str, TestStatus]:
    """The task's expected statuses keyed like `parse`'s output.

    Raises ValueError naming the task and key when a status is not a known test status.
    """
    raw = task.hidden.expected_statuses or {}
    expected: dict[str, TestStatus] = {}
    for key, value in raw.items():
        try:
            expected[r2e_key(key)] = TestStatus(value)
        except ValueError:
            raise ValueError(
                f"task {task.instance_id}: expected_statuses[{key!r}] = {value!r} is not one "
                f"of {[s.value for s in TestStatus]}"
            ) from None
    return expected
