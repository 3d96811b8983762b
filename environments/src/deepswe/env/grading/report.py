"""What the grader's launchers reported, read back by root (pure functions): authenticated by its
MAC, its canaries judged, the section the task's parser reads (bin/deepswe_seal.py writes it).

    raw report bytes + the run's key -> read_report -> LauncherReport
    LauncherReport + root's canaries -> judge_report -> (statuses section, tampered, rejected)

Root reads up to the first closing line. That line carries an HMAC-SHA256, keyed with the key
only root and the launcher's vault hold, of every byte before it: a line anything else wrote on
the pipe, dropped from it or changed on it makes the MAC fail (tampered). A report with no closing
line ended before the runner returned (rejected: never resolved).
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass, field

from deepswe.env.grading.canaries import Canaries

STARTED = "# deepswe-grader report v3"
_CLOSING = re.compile(
    rb"^=+ (deepswe-grader: (?:pytest\.main|unittest|reproduction) returned (-?\d+) (\S+)) ([0-9a-f]{64}) =+$",
    re.MULTILINE,
)
_TAMPERED = re.compile(r"^# deepswe-grader: TAMPERED (.*)$", re.MULTILINE)
_STATUS = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (.+)$")
# Above this exit status pytest did not report (2 interrupted, 3 internal error, 4 usage error,
# 5 no tests): the statuses read decide, as they would for any run.
_PYTEST_FAILED = 1


@dataclass(frozen=True)
class LauncherReport:
    """What the launcher reported: the section graded, how it ended, whether its MAC holds."""

    started: bool
    returned: int | None
    """The runner's exit status (pytest.main's); None when no closing line was written."""
    summary: str
    """Everything before the closing line (all of it when there is none)."""
    authentic: bool = False
    """The closing line's MAC holds for every byte before it."""
    facts: dict[str, int] = field(default_factory=dict)
    """The vault's counts: collected, unreported, sealed (1: an audit hook held the key)."""
    tampered: list[str] = field(default_factory=list)


def read_report(raw: bytes, key: bytes) -> LauncherReport:
    """The report, up to its first closing line, checked against the run's `key`."""
    m = _CLOSING.search(raw)
    before = raw[: m.start()] if m else raw
    summary = before.decode("utf-8", errors="replace")
    tampered = [t.strip() for t in _TAMPERED.findall(summary)]
    if m is None:
        return LauncherReport(summary.startswith(STARTED), None, summary, tampered=tampered)
    mac = hmac.new(key, before + m[1], hashlib.sha256).hexdigest()
    authentic = hmac.compare_digest(mac, m[4].decode())
    if not authentic:
        tampered.append("the report holds lines the launcher did not write (its MAC fails)")
    facts = {}
    for part in m[3].decode().split(","):
        name, _, value = part.partition("=")
        if value.isdigit():
            facts[name] = int(value)
    return LauncherReport(
        summary.startswith(STARTED), int(m[2]), summary, authentic, facts, tampered
    )


@dataclass(frozen=True)
class Judged:
    """A report judged: the section the task's parser reads (canaries dropped), and why the run
    cannot stand (tampered: taken over; rejected: incomplete or contradicted)."""

    section: str
    tampered: list[str]
    rejected: str = ""


def _canary_problems(outcomes: dict[str, list[str]], failing: bool) -> list[str]:
    """Each canary reported with an outcome it cannot have. The fail canary passing is always
    one; the others count only where nothing else already keeps the run from resolving
    (`failing`: a graded failure, or a run that ended early, may have skipped them)."""
    problems = []
    for role, want in (("fail", {"FAILED", "ERROR"}), ("pass", {"PASSED"}), ("error", {"ERROR"})):
        got = outcomes.get(role, [])
        if role == "fail" and any(g not in want for g in got):
            problems.append(f"the grader's fail canary was {'/'.join(got)}")
        elif role != "fail" and not failing and (not got or any(g not in want for g in got)):
            problems.append(f"the grader's {role} canary was {'/'.join(got) or 'not reported'}")
    if not failing and not outcomes.get("fail"):
        problems.append("the grader's fail canary was not reported")
    return problems


def judge_report(
    rep: LauncherReport, canaries: Canaries | None, exit_code: int, runner: str = "pytest"
) -> Judged:
    """The section graded (the summary without canary lines) and what the report says against
    the run: tampered (a TAMPERED line, a MAC that fails, a canary out of place), or rejected."""
    lines, outcomes, failed = [], {}, False
    for line in rep.summary.splitlines():
        m = _STATUS.match(line)
        role = canaries.role_of(m[2].strip()) if (m and canaries) else None
        if role is not None:
            outcomes.setdefault(role, []).append(m[1])
            continue
        failed = failed or bool(m and m[1] in ("FAILED", "ERROR"))
        lines.append(line)
    section = "\n".join(lines)
    tampered = list(rep.tampered)
    if canaries is not None:
        tampered += _canary_problems(outcomes, failed or rep.returned is None)
    why = _rejection(rep, exit_code, runner, failed or bool(outcomes.get("fail")))
    return Judged(section, tampered, why)


def _rejection(rep: LauncherReport, exit_code: int, runner: str, failures: bool) -> str:
    """Why a finished run's report cannot be trusted, or "" (statuses then decide).

    The process's own exit status is not compared with pytest's: what runs after pytest returns
    (atexit handlers, a C extension crashing at shutdown) cannot change the report, and a
    wrapper such as xvfb-run may change the status. `failures`: the report holds a failure (the
    fail canary's included: it makes pytest exit 1 on every run that reaches it)."""
    if rep.returned is None:
        return f"the test process ended before {runner} returned (exit {exit_code})"
    if runner != "pytest":
        return ""  # a runner script's exit status is its own convention
    unreported = rep.facts.get("unreported", 0)
    if unreported:
        return f"{unreported} collected test(s) were never reported: the run stopped early"
    if rep.returned == 0 and failures:
        return "pytest exited 0 with failures in its report"
    if rep.returned == _PYTEST_FAILED and not failures:
        return "pytest exited 1 with no failure in its report"
    return ""


__all__ = ["STARTED", "Judged", "LauncherReport", "judge_report", "read_report"]
