"""The R2E-Gym rule on real R2E-Gym rows (fixtures) and on the cases where its source differs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from deepswe.data.loaders import load_r2e_gym
from deepswe.data.task import HiddenTests, Task, TaskSource, TestSpec
from deepswe.env.grading import Outcome, TestStatus, grade
from deepswe.env.grading.parsers.r2e_gym import parse

FIXTURES = sorted(Path(os.environ["DEEPSWE_R2E_FIXTURES"]).glob("*.json"))


def _runs(path: Path) -> dict[str, object]:
    return json.loads(json.loads(path.read_text())["env_args"]["ds"]["execution_result_content"])


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_fixture_new_commit_resolves_and_old_does_not(path: Path) -> None:
    """The gold (new-commit) run matches expected_output_json; the old-commit run fails it.

    Every fixture has an old-commit run with exit code 1 and at least one expected-PASSED
    test failing, so the data implies UNRESOLVED for all five.
    """
    (task,) = load_r2e_gym(path)
    runs = _runs(path)
    assert task.test_spec.log_parser == "r2e-gym"
    assert runs["old_commit_res_code"] == 1 and runs["new_commit_res_code"] == 0

    new = grade(task, str(runs["new_commit_res_stdout"]))
    old = grade(task, str(runs["old_commit_res_stdout"]))

    assert new.outcome is Outcome.RESOLVED and new.reward == 1.0, new.reason
    assert len(new.statuses) == len(task.hidden.expected_statuses or {})
    assert old.outcome is Outcome.UNRESOLVED and old.reward == 0.0
    # What flipped is exactly the tests the loader labels fail-to-pass.
    assert sorted(old.mismatched) == sorted(task.hidden.fail_to_pass)
    assert not old.missing and not old.unexpected


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_fixture_with_colour_and_harness_markers(path: Path) -> None:
    """The same verdicts when the run is wrapped in START/END markers and a patch marker."""
    (task,) = load_r2e_gym(path)
    runs = _runs(path)
    for key, outcome in (
        ("new_commit_res_stdout", Outcome.RESOLVED),
        ("old_commit_res_stdout", Outcome.UNRESOLVED),
    ):
        log = (
            ">>>>> Applied Patch (git apply --verbose)\n>>>>> Start Test Output\n"
            f"{runs[key]}\n>>>>> End Test Output\n"
        )
        assert grade(task, log).outcome is outcome


def _task(expected: dict[str, str]) -> Task:
    return Task(
        instance_id="demo_r2e",
        repo="demo",
        base_commit="abc^",
        problem_statement="x",
        source=TaskSource.R2E_GYM,
        image="namanjain12/demo:abc",
        test_spec=TestSpec(command="bash run_tests.sh", log_parser="r2e-gym"),
        hidden=HiddenTests(expected_statuses=expected),
    )


def _log(*lines: str) -> str:
    return "=== short test summary info ===\n" + "\n".join(lines) + "\n=== end ===\n"


def test_expected_failures_must_still_fail() -> None:
    """R2E-Gym compares statuses for equality: a test expected FAILED that passes breaks it."""
    task = _task({"T.test_a": "PASSED", "T.test_b": "FAILED"})
    ok = _log("PASSED r2e_tests/test_1.py::T::test_a", "FAILED r2e_tests/test_1.py::T::test_b - x")
    too_good = _log(
        "PASSED r2e_tests/test_1.py::T::test_a", "PASSED r2e_tests/test_1.py::T::test_b"
    )
    assert grade(task, ok).outcome is Outcome.RESOLVED
    result = grade(task, too_good)
    assert result.outcome is Outcome.UNRESOLVED and result.mismatched == ["T.test_b"]


def test_extra_and_missing_tests_fail() -> None:
    """R2E-Gym requires len(parsed) == len(expected): an extra recorded test fails it."""
    task = _task({"test_a": "PASSED"})
    extra = grade(
        task, _log("PASSED r2e_tests/test_1.py::test_a", "FAILED r2e_tests/test_1.py::test_new")
    )
    assert extra.outcome is Outcome.UNRESOLVED and extra.unexpected == ["test_new"]
    missing = grade(task, _log("PASSED r2e_tests/test_1.py::test_other"))
    assert missing.missing == ["test_a"] and missing.unexpected == ["test_other"]
    # Skipped, xfailed and xpassed tests are not recorded, as in R2E-Gym: not "unexpected".
    quiet = _log(
        "PASSED r2e_tests/test_1.py::test_a",
        "SKIPPED [1] r2e_tests/test_1.py:9: no",
        "XFAIL r2e_tests/test_1.py::test_x - bug",
    )
    assert grade(task, quiet).outcome is Outcome.RESOLVED


def test_ansi_in_expected_keys_and_in_names() -> None:
    """Pillow's expected_output_json keys hold the colour codes of a coloured run."""
    task = _task({"\x1b[1mtest_a\x1b[0m": "PASSED", "test_b[x - y]": "PASSED"})
    log = _log(
        "\x1b[32mPASSED\x1b[0m r2e_tests/test_1.py::\x1b[1mtest_a\x1b[0m",
        "PASSED r2e_tests/test_1.py::test_b[x - y]",
    )
    assert grade(task, log).outcome is Outcome.RESOLVED
    assert parse(log) == {"test_a": TestStatus.PASSED, "test_b[x": TestStatus.PASSED}


def test_failed_line_quoting_passed_is_a_failure() -> None:
    """Regression (R2E-Gym quirk we do not copy): its parser tests `"PASSED" in line` first,
    so `FAILED t::test_a - assert 'PASSED' == 'x'` would count as a pass."""
    task = _task({"test_a": "PASSED"})
    log = _log("FAILED r2e_tests/test_1.py::test_a - AssertionError: 'PASSED' != 'x'")
    result = grade(task, log)
    assert result.outcome is Outcome.UNRESOLVED and result.mismatched == ["test_a"]


def test_collection_error_is_never_resolved() -> None:
    """Regression (R2E-Gym quirk we do not copy): a collection error names an empty test,
    which R2E-Gym's comparison loop skips, so a one-test task scored 1.0 on a broken file."""
    task = _task({"test_a": "PASSED"})
    result = grade(task, _log("ERROR r2e_tests/test_1.py - ImportError: cannot import x"))
    assert result.outcome is Outcome.UNRESOLVED
    assert result.unexpected == ["r2e_tests/test_1.py"] and result.missing == ["test_a"]


def test_empty_log_is_unresolved_with_reason() -> None:
    result = grade(_task({"test_a": "PASSED"}), "")
    assert result.outcome is Outcome.UNRESOLVED
    assert "no tests found" in result.reason


def test_unknown_expected_status_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"demo_r2e: expected_statuses\['test_a'\] = 'GREEN'"):
        grade(_task({"test_a": "GREEN"}), _log("PASSED r2e_tests/test_1.py::test_a"))
