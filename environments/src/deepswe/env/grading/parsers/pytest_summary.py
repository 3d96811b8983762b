"""Parser for pytest's `-rA` short test summary: `STATUS nodeid[ - message]` lines.

Handles ANSI colour codes, parametrized ids holding spaces, brackets and ` - `, output
before the summary (captured stdout can print anything), several pytest runs in one log,
and pytest's folded `SKIPPED [N] path:line: reason` lines, which name no test.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from deepswe.env.grading.markers import strip_ansi
from deepswe.env.grading.outcomes import TestStatus

if TYPE_CHECKING:
    from deepswe.data.task import Task

_STATUS_LINE = re.compile(r"^(PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS)\s+(\S.*)$")
_SUMMARY_HEADER = "short test summary info"
_FOLDED_COUNT = re.compile(r"^\[\d+\]\s+")  # the "[N] " of a folded SKIPPED line
_LOCATION = re.compile(r"^.+:\d+:?$")  # "path.py:12:", a source location, not a node id

# When one test is reported twice (a PASSED call and an ERROR teardown both appear in
# `-rA`), the worse status wins, so a teardown error can never read as a pass.
_SEVERITY = {
    TestStatus.PASSED: 0,
    TestStatus.XFAIL: 0,
    TestStatus.SKIPPED: 1,
    TestStatus.XPASS: 1,
    TestStatus.FAILED: 2,
    TestStatus.ERROR: 2,
}


def merge_status(statuses: dict[str, TestStatus], name: str, status: TestStatus) -> None:
    """Record `status` for `name` unless a strictly worse one is already recorded."""
    old = statuses.get(name)
    if old is None or _SEVERITY[status] >= _SEVERITY[old]:
        statuses[name] = status


def split_nodeid(rest: str) -> str | None:
    """The node id at the start of `rest` (`nodeid`, `nodeid - msg`, `nodeid: reason`).

    A parametrized id runs to the `]` that closes its first `[` (ids may contain spaces,
    brackets and ` - `); otherwise node ids hold no spaces, so the first token is the id.
    """
    rest = rest.strip()
    if not rest:
        return None
    first_space = rest.find(" ")
    open_at = rest.find("[")
    if open_at != -1 and (first_space == -1 or open_at < first_space):
        depth = 0
        for i in range(open_at, len(rest)):
            if rest[i] == "[":
                depth += 1
            elif rest[i] == "]":
                depth -= 1
                tail = rest[i + 1 :]
                if depth == 0 and (not tail or tail[0] in " :"):
                    return rest[: i + 1]
        # Unbalanced brackets in the id: end at the last "]" before a message separator.
        ends = [m.start() + 1 for m in re.finditer(r"\](?= - |:? |$)", rest)]
        if ends:
            return rest[: ends[-1]]
    token = rest if first_space == -1 else rest[:first_space]
    return token.rstrip(":") if "::" in token else token


def parse_summary_line(line: str) -> tuple[str, TestStatus] | None:
    """`(nodeid, status)` for one uncoloured summary line, or None if it names no test."""
    match = _STATUS_LINE.match(line.strip())
    if match is None:
        return None
    status, rest = TestStatus(match[1]), match[2]
    if status is TestStatus.SKIPPED:
        rest = _FOLDED_COUNT.sub("", rest)
    nodeid = split_nodeid(rest)
    if nodeid is None or (status is TestStatus.SKIPPED and _LOCATION.match(nodeid)):
        return None
    return nodeid, status


def summary_lines(log: str) -> list[str]:
    """Lines inside every short-test-summary section of `log`, uncoloured.

    A section starts at its `=== short test summary info ===` header and ends at the
    `=== N passed ... ===` line. A log with no header at all (truncated, or a runner that
    prints only status lines) is read whole, like SWE-bench's parser does.
    """
    lines = strip_ansi(log).splitlines()
    found, inside, picked = False, False, []
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("=") and _SUMMARY_HEADER in stripped:
            found, inside = True, True
        elif inside and stripped.startswith("="):
            inside = False
        elif inside:
            picked.append(line)
    return picked if found else lines


def iter_entries(lines: Iterable[str]) -> Iterator[tuple[str, TestStatus]]:
    """Every `(nodeid, status)` named by `lines`, in order."""
    for line in lines:
        entry = parse_summary_line(line)
        if entry is not None:
            yield entry


def parse_pytest_log(log: str) -> dict[str, TestStatus]:
    """Map each pytest node id in `log`'s short test summary to its status."""
    statuses: dict[str, TestStatus] = {}
    for nodeid, status in iter_entries(summary_lines(log)):
        merge_status(statuses, nodeid, status)
    return statuses


def parse(log: str, task: Task | None = None) -> dict[str, TestStatus]:
    """Registry entry point: the task is not needed to read a pytest log."""
    return parse_pytest_log(log)
