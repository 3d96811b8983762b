"""Read test statuses from a pytest log's "short test summary info" section, the way R2E-Gym
names tests (r2egym/repo_analysis/execution_log_parser.py: parse_log_pytest).

A summary line "PASSED r2e_tests/test_1.py::TestX::test_y" names the test "TestX.test_y" (the
file part dropped, the rest joined with "."), and " - message" after a FAILED/ERROR id is cut
off. ANSI colour codes are kept here, as R2E-Gym keeps them; `decolor` strips them the way its
decolor_dict_keys does. Used to label R2E-Gym tests fail-to-pass / pass-to-pass from the
old- and new-commit runs stored in each row; grading has its own parser in the registry.
"""

from __future__ import annotations

import re

_ANSI = re.compile("\x1b\\[\\d+m")  # R2E-Gym's decolor_dict_keys pattern
_STATUSES = ("PASSED", "FAILED", "ERROR")


def decolor(name: str) -> str:
    return _ANSI.sub("", name)


def summary_statuses(log: str) -> dict[str, str]:
    """Test name -> "PASSED" | "FAILED" | "ERROR" from the summary section ({} if none)."""
    marker = "short test summary info"
    if marker not in log:
        return {}
    statuses: dict[str, str] = {}
    for line in log.split(marker, 1)[1].strip().split("\n"):
        status = next((s for s in _STATUSES if s in line), None)
        if status is None:
            continue
        name = ".".join(line.split("::")[1:])
        if status != "PASSED":
            name = name.split(" - ")[0]
        statuses[name] = status
    return statuses
