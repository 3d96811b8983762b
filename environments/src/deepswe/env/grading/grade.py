"""Verdicts, pure functions: `judge(task, test_output, facts)` for a reward run, which knows its
facts as values; `grade(task, log)` for a log made elsewhere (SWE-bench's harness, a recorded run),
whose facts can only be read from its marker lines. Containers only make the output.

Stages: harness outcomes (infra error, patch apply failure, timeout) -> parse the test-output
section -> judge it by the task's rule:
- R2E-Gym tasks (`hidden.expected_statuses` set): every expected test has exactly its
  expected status and the log holds no other recorded test (R2E-Gym's `_calculate_reward`);
- parser "swebench": SWE-bench's own verdict (`get_resolution_status == RESOLVED_FULL`);
- otherwise: every FAIL_TO_PASS and PASS_TO_PASS test is PASSED or XFAIL (SWE-bench's
  `test_passed`); a missing or SKIPPED test fails it.
Under strict rules (`TestSpec.grading_rules`) a listed test passes only when PASSED (an XFAIL
can be raised by the code under test), SWE-bench-format tasks included, and a test run the
reward run rejected (its report incomplete or contradicted) is never resolved, nor is a patch
whose added non-test lines reach for the test machinery (the static gate's tier 1), and one whose
canaries or integrity checks show the test process taken over is `tampered` (reward 0, counted
apart). Test-infrastructure changes the reward run noted are carried into the result.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from deepswe.env.grading import markers
from deepswe.env.grading.outcomes import (
    PASSING,
    GateFlag,
    GradeResult,
    Outcome,
    RunFacts,
    TestInfraChange,
    TestStatus,
)
from deepswe.env.grading.parsers import get_parser

if TYPE_CHECKING:
    from deepswe.data.task import Task


def _harness_outcome(facts: RunFacts) -> tuple[Outcome, str] | None:
    if facts.infra_error:
        return Outcome.INFRA_ERROR, f"the harness failed: {facts.infra_error[:300]}"
    if not facts.applied:
        return Outcome.PATCH_APPLY_FAILED, "the patch did not apply" + (
            f" ({facts.apply_why[:300]})" if facts.apply_why else ""
        )
    if facts.timed_out:
        return Outcome.TEST_TIMEOUT, "the test run timed out"
    return None


def _judge_expected(task: Task, parser: str, statuses: dict[str, TestStatus]) -> GradeResult:
    from deepswe.env.grading.parsers.r2e_gym import expected_statuses

    expected = expected_statuses(task)
    missing = [t for t in expected if t not in statuses]
    mismatched = [t for t in expected if t in statuses and statuses[t] != expected[t]]
    unexpected = [t for t in statuses if t not in expected]
    ok = bool(expected) and not (missing or mismatched or unexpected)
    if ok:
        reason = f"all {len(expected)} expected statuses matched"
    elif not expected:
        reason = "task lists no expected statuses"
    elif not statuses:
        reason = f"no tests found in the log; {len(expected)} expected"
    else:
        reason = (
            f"{len(mismatched)} mismatched, {len(missing)} missing, "
            f"{len(unexpected)} unexpected of {len(expected)} expected"
        )
    return GradeResult(
        outcome=Outcome.RESOLVED if ok else Outcome.UNRESOLVED,
        parser=parser,
        reason=reason,
        statuses=statuses,
        missing=missing,
        mismatched=mismatched,
        unexpected=unexpected,
    )


def _judge_f2p_p2p(task: Task, parser: str, statuses: dict[str, TestStatus]) -> GradeResult:
    f2p, p2p = task.hidden.fail_to_pass, task.hidden.pass_to_pass
    strict = task.test_spec.grading_rules == "strict"
    passing = frozenset({TestStatus.PASSED}) if strict else PASSING
    f2p_failed = [t for t in f2p if statuses.get(t) not in passing]
    p2p_failed = [t for t in p2p if statuses.get(t) not in passing]
    missing = [t for t in [*f2p, *p2p] if t not in statuses]
    if strict:
        ok = bool(f2p or p2p) and not (f2p_failed or p2p_failed)
        rule = "strict F2P+P2P (PASSED only)"
    elif parser == "swebench":
        from deepswe.env.grading.parsers.swebench_lib import resolved

        ok = resolved(statuses, task)
        rule = "swebench"
    else:
        ok = bool(f2p or p2p) and not (f2p_failed or p2p_failed)
        rule = "F2P+P2P"
    total = len(f2p) + len(p2p)
    if ok:
        reason = f"{rule}: all {total} listed tests pass"
    elif not total:
        reason = "task lists no FAIL_TO_PASS or PASS_TO_PASS tests"
    elif not statuses:
        reason = f"no tests found in the log; {total} listed"
    else:
        reason = (
            f"{rule}: {len(f2p_failed)}/{len(f2p)} FAIL_TO_PASS and "
            f"{len(p2p_failed)}/{len(p2p)} PASS_TO_PASS not passing ({len(missing)} missing)"
        )
    return GradeResult(
        outcome=Outcome.RESOLVED if ok else Outcome.UNRESOLVED,
        parser=parser,
        reason=reason,
        statuses=statuses,
        f2p_failed=f2p_failed,
        p2p_failed=p2p_failed,
        missing=missing,
    )


def judge(task: Task, test_output: str, facts: RunFacts) -> GradeResult:
    """Grade one reward run from values: `test_output` is the section the task's parser reads
    (the grader's own report under strict rules, the test command's output otherwise), `facts`
    what the run knew besides. Nothing here searches text for a marker."""
    parser = task.test_spec.log_parser
    recorded = {
        "rules": task.test_spec.grading_rules,
        "grader_ran_tests": facts.grader_ran_tests,
        "test_infra": list(facts.test_infra),
        "static_gate": list(facts.static_gate),
    }
    harness = _harness_outcome(facts)
    if harness is not None:
        return GradeResult(outcome=harness[0], parser=parser, reason=harness[1], **recorded)
    statuses = get_parser(parser)(test_output, task)
    if task.hidden.expected_statuses is not None:
        result = _judge_expected(task, parser, statuses)
    else:
        result = _judge_f2p_p2p(task, parser, statuses)
    update: dict = dict(recorded)
    if facts.tampered:
        more = f" (and {len(facts.tampered) - 1} more)" if len(facts.tampered) > 1 else ""
        update["outcome"] = Outcome.TAMPERED
        update["reason"] = f"tampered: {facts.tampered[0][:300]}{more}"
    elif facts.rejected:
        update["outcome"] = Outcome.UNRESOLVED
        update["reason"] = f"test run rejected: {facts.rejected[:300]}"
    elif result.resolved and recorded["rules"] == "strict":
        gated = [f for f in facts.static_gate if f.tier == 1]
        if facts.reproduction:
            update["outcome"] = Outcome.UNRESOLVED
            update["reason"] = (
                f"the issue's reproduction, run as a plain script: {facts.reproduction[:300]}"
            )
        elif gated:
            update["outcome"] = Outcome.UNRESOLVED
            update["reason"] = (
                f"static gate: {gated[0].path}:{gated[0].line} reaches for {gated[0].rule}"
                + (f" (and {len(gated) - 1} more)" if len(gated) > 1 else "")
            )
    return result.model_copy(update=update)


def grade(
    task: Task,
    log: str,
    *,
    apply_ok: bool = True,
    timed_out: bool = False,
    infra_error: bool = False,
) -> GradeResult:
    """Grade a log made elsewhere (SWE-bench's harness, a recorded run), where text is all there
    is: its facts are read from whole marker lines outside the test-output section (`read_facts`).
    The reward run never comes here: it knows its facts as values (`judge`)."""
    facts, section = read_facts(
        log, apply_ok=apply_ok, timed_out=timed_out, infra_error=infra_error
    )
    return judge(task, section, facts)


def read_facts(
    log: str, *, apply_ok: bool = True, timed_out: bool = False, infra_error: bool = False
) -> tuple[RunFacts, str]:
    """(the facts a text log states, its test-output section): SWE-bench's marker lines, and ours
    a log written before verdicts were values carried."""
    harness, section = markers.split_log(log)
    why = ""
    for marker in (markers.INFRA_ERROR, markers.RESET_FAILED):
        line = markers.marker_line(harness, marker)
        if line is not None:
            why = why or line
    if infra_error and not why:
        why = "the sandbox reported an infrastructure failure"
    tampered = markers.marker_line(harness, markers.TEST_RUN_TAMPERED)
    rejected = markers.marker_line(harness, markers.TEST_RUN_REJECTED)
    facts = RunFacts(
        infra_error=why,
        applied=apply_ok and not markers.has_marker(harness, markers.APPLY_PATCH_FAIL),
        timed_out=timed_out or markers.has_marker(harness, markers.TESTS_TIMEOUT),
        grader_ran_tests=markers.has_marker(harness, markers.GRADER_RAN_TESTS),
        tampered=[tampered[len(markers.TEST_RUN_TAMPERED) :].strip()] if tampered else [],
        rejected=rejected[len(markers.TEST_RUN_REJECTED) :].strip() if rejected else "",
        test_infra=_infra_changes(harness),
        static_gate=_gate_flags(harness),
    )
    return facts, section


def _infra_changes(harness: str) -> list[TestInfraChange]:
    out = []
    for line in markers.marker_lines(harness, markers.TEST_INFRA):
        try:
            out.append(TestInfraChange.model_validate_json(line[len(markers.TEST_INFRA) :]))
        except ValueError:
            continue  # not a line the reward run wrote
    return out


def _gate_flags(harness: str) -> list[GateFlag]:
    out = []
    for line in markers.marker_lines(harness, markers.STATIC_GATE):
        try:
            out.append(GateFlag.model_validate_json(line[len(markers.STATIC_GATE) :]))
        except ValueError:
            continue
    return out


def gate_line(flag: GateFlag) -> str:
    """The harness line that records `flag` for `grade` to read."""
    return f"{markers.STATIC_GATE} {json.dumps(flag.model_dump(), sort_keys=True)}"


def infra_change_line(change: TestInfraChange) -> str:
    """The harness line that records `change` for `grade` to read."""
    return f"{markers.TEST_INFRA} {json.dumps(change.model_dump(), sort_keys=True)}"
