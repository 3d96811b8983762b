"""`grade`: harness outcomes, markers, the F2P+P2P rule and the shape of GradeResult."""

from __future__ import annotations

import pytest

from deepswe.data.task import HiddenTests, Task, TaskSource, TestSpec
from deepswe.env.grading import (
    APPLY_PATCH_FAIL,
    END_TEST_OUTPUT,
    INFRA_ERROR,
    START_TEST_OUTPUT,
    TESTS_TIMEOUT,
    GradeResult,
    Outcome,
    TestStatus,
    grade,
)
from deepswe.env.grading.grade import judge
from deepswe.env.grading.markers import split_log
from deepswe.env.grading.outcomes import GateFlag, RunFacts

F2P = ["tests/test_m.py::test_fix"]
P2P = ["tests/test_m.py::test_old[a - b]", "tests/test_m.py::test_other"]


def _task(
    f2p: list[str] = F2P, p2p: list[str] = P2P, parser: str = "pytest", rules: str | None = None
) -> Task:
    return Task(
        instance_id="demo__mini-1",
        repo="demo/mini",
        base_commit="0" * 40,
        problem_statement="x",
        source=TaskSource.SWE_MINI,
        test_spec=TestSpec(command="python -m pytest -rA tests", log_parser=parser, rules=rules),
        hidden=HiddenTests(fail_to_pass=f2p, pass_to_pass=p2p),
    )


def _log(**statuses: str) -> str:
    names = {"fix": F2P[0], "old": P2P[0], "other": P2P[1]}
    body = "\n".join(f"{status} {names[key]}" for key, status in statuses.items())
    return f"{START_TEST_OUTPUT}\n=== short test summary info ===\n{body}\n=== done ===\n{END_TEST_OUTPUT}\n"


def test_all_listed_tests_passing_resolves() -> None:
    result = grade(_task(), _log(fix="PASSED", old="PASSED", other="PASSED"))
    assert result.outcome is Outcome.RESOLVED and result.reward == 1.0
    assert result.parser == "pytest" and result.rules == "strict"
    assert result.statuses[F2P[0]] is TestStatus.PASSED
    assert result.model_dump()["reward"] == 1.0  # the reward travels with the result


def test_xfail_counts_as_passing_under_swebench_rules_only() -> None:
    """SWE-bench's `test_passed` takes XFAIL; under strict rules it is not a pass, since the
    code under test can raise pytest.xfail() to turn a failing test into one."""
    log = _log(fix="XFAIL", old="PASSED", other="XFAIL")
    assert grade(_task(rules="swebench"), log).outcome is Outcome.RESOLVED
    strict = grade(_task(), log)
    assert strict.outcome is Outcome.UNRESOLVED and strict.f2p_failed == F2P
    assert strict.p2p_failed == P2P[1:]


@pytest.mark.parametrize(
    ("statuses", "f2p_failed", "p2p_failed", "missing"),
    [
        ({"fix": "FAILED", "old": "PASSED", "other": "PASSED"}, F2P, [], []),
        ({"fix": "PASSED", "old": "ERROR", "other": "PASSED"}, [], P2P[:1], []),
        ({"fix": "PASSED", "old": "PASSED"}, [], P2P[1:], P2P[1:]),
        ({"fix": "SKIPPED", "old": "PASSED", "other": "PASSED"}, F2P, [], []),
        ({"fix": "XPASS", "old": "PASSED", "other": "PASSED"}, F2P, [], []),
    ],
    ids=["f2p-failed", "p2p-error", "p2p-missing", "f2p-skipped", "f2p-xpass"],
)
def test_any_listed_test_not_passing_is_unresolved(
    statuses: dict[str, str], f2p_failed: list[str], p2p_failed: list[str], missing: list[str]
) -> None:
    result = grade(_task(), _log(**statuses))
    assert result.outcome is Outcome.UNRESOLVED and result.reward == 0.0
    assert (result.f2p_failed, result.p2p_failed, result.missing) == (
        f2p_failed,
        p2p_failed,
        missing,
    )


def test_empty_or_unparseable_log_is_unresolved_with_reason() -> None:
    for log in ("", "Traceback (most recent call last):\n  ...\nSyntaxError: invalid syntax\n"):
        result = grade(_task(), log)
        assert result.outcome is Outcome.UNRESOLVED
        assert result.reason == "no tests found in the log; 3 listed"
        assert result.missing == [*F2P, *P2P]


def test_task_without_listed_tests_is_never_resolved() -> None:
    result = grade(_task(f2p=[], p2p=[]), _log(fix="PASSED"))
    assert result.outcome is Outcome.UNRESOLVED
    assert "no FAIL_TO_PASS or PASS_TO_PASS" in result.reason


def test_harness_outcomes_come_before_parsing() -> None:
    passing = _log(fix="PASSED", old="PASSED", other="PASSED")
    cases = [
        (grade(_task(), passing, apply_ok=False), Outcome.PATCH_APPLY_FAILED),
        (grade(_task(), passing, timed_out=True), Outcome.TEST_TIMEOUT),
        (grade(_task(), passing, infra_error=True), Outcome.INFRA_ERROR),
        (grade(_task(), f"{APPLY_PATCH_FAIL}\n{passing}"), Outcome.PATCH_APPLY_FAILED),
        (grade(_task(), f"{passing}{TESTS_TIMEOUT}\n"), Outcome.TEST_TIMEOUT),
        (
            grade(_task(), f"\x1b[31m{INFRA_ERROR}: container exited 137\x1b[0m\n"),
            Outcome.INFRA_ERROR,
        ),
        # An infrastructure failure outranks the others: the run says nothing about the patch.
        (grade(_task(), INFRA_ERROR, apply_ok=False, timed_out=True), Outcome.INFRA_ERROR),
    ]
    for result, outcome in cases:
        assert result.outcome is outcome and result.reward == 0.0, result
        assert result.statuses == {} and result.reason


def test_markers_printed_by_the_code_under_test_are_ignored() -> None:
    """Regression: tests control their own output; printing the infra-error or timeout
    marker inside the test-output section must not turn a failure into an excused outcome."""
    log = (
        f"{START_TEST_OUTPUT}\n{INFRA_ERROR}\n{TESTS_TIMEOUT}\n{APPLY_PATCH_FAIL}\n"
        "=== short test summary info ===\nFAILED tests/test_m.py::test_fix - boom\n=== x ===\n"
        f"{END_TEST_OUTPUT}\n"
    )
    assert grade(_task(), log).outcome is Outcome.UNRESOLVED


def test_marker_quoted_mid_line_does_not_count() -> None:
    log = f"echo '{INFRA_ERROR}'\n" + _log(fix="PASSED", old="PASSED", other="PASSED")
    assert grade(_task(), log).outcome is Outcome.RESOLVED


def test_only_the_test_output_section_is_parsed() -> None:
    """Status-like lines from the install/apply steps around the section are not tests."""
    log = "PASSED tests/test_m.py::test_fix\n" + _log(old="PASSED", other="PASSED")
    result = grade(_task(), log)
    assert result.outcome is Outcome.UNRESOLVED and result.missing == F2P


def test_grade_result_is_frozen_and_reward_is_derived() -> None:
    result = GradeResult(outcome=Outcome.RESOLVED, parser="pytest", reason="r")
    assert result.reward == 1.0 and result.resolved
    with pytest.raises(Exception):  # noqa: B017 - pydantic's frozen error type
        result.outcome = Outcome.UNRESOLVED  # type: ignore[misc]
    with pytest.raises(ValueError, match="the reward is derived, never set"):
        GradeResult(outcome=Outcome.UNRESOLVED, parser="p", reason="r", reward=1.0)  # type: ignore[call-arg]
    assert GradeResult.model_validate_json(result.model_dump_json()) == result  # reward included


def test_unknown_parser_name_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown log parser 'junit'"):
        grade(_task(parser="junit"), _log(fix="PASSED"))


def _section(**statuses: str) -> str:
    names = {"fix": F2P[0], "old": P2P[0], "other": P2P[1]}
    return "\n".join(f"{status} {names[key]}" for key, status in statuses.items())


@pytest.mark.parametrize(
    "facts",
    [
        # A test function compiled under the file name `>>>>> End Test Output`: the launcher's
        # reason carried the END marker, and the text log ended the test section there.
        RunFacts(grader_ran_tests=True, tampered=[f"__code__ of t ({END_TEST_OUTPUT}) replaced"]),
        # A notes file line carrying the START marker, quoted in the static gate's finding.
        RunFacts(
            static_gate=[
                GateFlag(tier=1, rule="pluggy", path="NOTES", line=1, text=START_TEST_OUTPUT)
            ]
        ),
    ],
)
def test_markers_in_reasons_or_file_names_change_nothing(facts: RunFacts) -> None:
    """Verdicts come from values: a reason, a file name or a finding that holds a marker is a
    string, never a boundary."""
    section = _section(fix="PASSED", old="PASSED", other="PASSED")
    result = judge(_task(), section, facts)
    assert result.outcome is not Outcome.RESOLVED
    assert result.statuses[F2P[0]] is TestStatus.PASSED


def test_judge_reads_no_marker_from_the_section() -> None:
    """The code under test prints into the section: a marker there is just a line."""
    section = f"{INFRA_ERROR}\n{APPLY_PATCH_FAIL}\n{TESTS_TIMEOUT}\n" + _section(
        fix="PASSED", old="PASSED", other="PASSED"
    )
    assert judge(_task(), section, RunFacts()).outcome is Outcome.RESOLVED


def test_split_log_takes_whole_marker_lines_only() -> None:
    log = (
        f"{START_TEST_OUTPUT}\nPASSED a\n{END_TEST_OUTPUT}\n"
        f">>>>> Test Run Tampered (x {END_TEST_OUTPUT} y)\n"
    )
    harness, section = split_log(log)
    assert section == "PASSED a\n" and "Tampered" in harness
