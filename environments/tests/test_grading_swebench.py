"""Parser "swebench": our verdict against the swebench library's own harness on the same log.

The reference is swebench 4.1.0's `get_eval_report`, run end to end on a log file written in
its harness's format (START/END markers, its per-repo parser, its resolution rule).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deepswe.data.task import HiddenTests, Task, TaskSource, TestSpec
from deepswe.env.grading import END_TEST_OUTPUT, START_TEST_OUTPUT, Outcome, TestStatus, grade
from deepswe.env.grading.parsers.swebench_lib import parse

pytest.importorskip("swebench", reason="the 'swebench' extra of deepswe-env is not installed")
from swebench.harness.grading import get_eval_report  # noqa: E402

REPOS = {"pytest-dev/pytest": "5.4", "django/django": "3.0", "sympy/sympy": "1.1"}
# status -> how each repo's test runner prints it (None: the test is not in the log).
PYTEST_LINE = {
    "PASSED": "PASSED {}",
    "FAILED": "FAILED {} - AssertionError",
    "ERROR": "ERROR {}",
    "SKIPPED": "SKIPPED {}",
    "XFAIL": "XFAIL {}",
}
DJANGO_LINE = {
    "PASSED": "{} ... ok",
    "FAILED": "{} ... FAIL",
    "ERROR": "{} ... ERROR",
    "SKIPPED": "{} ... skipped 'no db'",
}
STATUS = st.sampled_from(["PASSED", "FAILED", "ERROR", "SKIPPED", "XFAIL", None])


def _task(
    repo: str, f2p: list[str], p2p: list[str], parser: str = "swebench", rules: str | None = None
) -> Task:
    return Task(
        instance_id=f"{repo.replace('/', '__')}-1",
        repo=repo,
        base_commit="0" * 40,
        problem_statement="x",
        source=TaskSource.SWE_BENCH_VERIFIED,
        image="sweb.eval.x86_64.demo",
        test_spec=TestSpec(command="", log_parser=parser, rules=rules),
        hidden=HiddenTests(fail_to_pass=f2p, pass_to_pass=p2p),
        version=REPOS[repo],
    )


def _name(repo: str, i: int) -> str:
    if repo == "django/django":
        return f"test_case_{i} (app.tests.CaseTests)"
    return f"testing/test_x.py::test_case_{i}[p-{i}]"


def _log(repo: str, statuses: list[str | None]) -> str:
    fmt = DJANGO_LINE if repo == "django/django" else PYTEST_LINE
    lines = [
        fmt[s].format(_name(repo, i)) for i, s in enumerate(statuses) if s is not None and s in fmt
    ]
    return (
        f"+ git apply -v /tmp/patch.diff\n{START_TEST_OUTPUT}\n+ run tests\n"
        + "\n".join(lines)
        + f"\n{END_TEST_OUTPUT}\n"
    )


def _library_resolved(task: Task, log: str) -> bool:
    spec = SimpleNamespace(
        instance_id=task.instance_id,
        repo=task.repo,
        version=task.version,
        FAIL_TO_PASS=task.hidden.fail_to_pass,
        PASS_TO_PASS=task.hidden.pass_to_pass,
    )
    pred = {"instance_id": task.instance_id, "model_name_or_path": "m", "model_patch": "diff"}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "test_output.txt"
        path.write_text(log)
        report = get_eval_report(spec, pred, str(path), include_tests_status=True)  # type: ignore[arg-type]
    return bool(report[task.instance_id]["resolved"])


@settings(max_examples=300, deadline=None)
@given(
    repo=st.sampled_from(["pytest-dev/pytest", "django/django"]),
    statuses=st.lists(STATUS, min_size=1, max_size=6),
    roles=st.lists(st.sampled_from(["f2p", "p2p", "none"]), min_size=6, max_size=6),
)
def test_verdict_matches_swebench_harness(
    repo: str, statuses: list[str | None], roles: list[str]
) -> None:
    f2p = [_name(repo, i) for i in range(len(statuses)) if roles[i] == "f2p"]
    p2p = [_name(repo, i) for i in range(len(statuses)) if roles[i] == "p2p"]
    task = _task(repo, f2p, p2p)
    log = _log(repo, statuses)
    ours = grade(task, log)
    assert ours.resolved == _library_resolved(task, log), (ours, log)
    assert ours.reward == (1.0 if ours.resolved else 0.0)


@settings(max_examples=200, deadline=None)
@given(
    statuses=st.lists(
        st.sampled_from(["PASSED", "FAILED", "ERROR", "XFAIL", None]), min_size=1, max_size=6
    ),
    roles=st.lists(st.sampled_from(["f2p", "p2p"]), min_size=6, max_size=6),
)
def test_own_pytest_rule_agrees_with_swebench_when_nothing_is_skipped(
    statuses: list[str | None], roles: list[str]
) -> None:
    """Our F2P+P2P rule with our pytest parser, under SWE-bench's rules, gives SWE-bench's
    verdict on pytest logs."""
    repo = "pytest-dev/pytest"
    f2p = [_name(repo, i) for i in range(len(statuses)) if roles[i] == "f2p"]
    p2p = [_name(repo, i) for i in range(len(statuses)) if roles[i] == "p2p"]
    log = _log(repo, statuses)
    ours = grade(_task(repo, f2p, p2p, parser="pytest", rules="swebench"), log)
    assert ours.resolved == _library_resolved(_task(repo, f2p, p2p), log)


def test_skipped_listed_test_is_where_the_rules_differ() -> None:
    """SWE-bench counts a SKIPPED listed test as neither success nor failure (resolved);
    our own rule wants every listed test to pass (unresolved)."""
    repo = "pytest-dev/pytest"
    f2p, p2p = [_name(repo, 0)], [_name(repo, 1)]
    log = _log(repo, ["PASSED", "SKIPPED"])
    assert _library_resolved(_task(repo, f2p, p2p), log)
    assert grade(_task(repo, f2p, p2p), log).outcome is Outcome.RESOLVED
    assert grade(_task(repo, f2p, p2p, parser="pytest"), log).outcome is Outcome.UNRESOLVED


def test_parser_is_chosen_by_repo() -> None:
    """The same text reads differently under django's and sympy's parsers."""
    log = "test_add (calc.tests.T) ... ok\ntest_sub ok\ntest_mul F\n"
    django = parse(log, _task("django/django", [], []))
    sympy = parse(log, _task("sympy/sympy", [], []))
    assert django == {"test_add (calc.tests.T)": TestStatus.PASSED}
    assert sympy == {
        "test_add": TestStatus.PASSED,  # sympy's parser takes the first word of "test_* ok"
        "test_sub": TestStatus.PASSED,
        "test_mul": TestStatus.FAILED,
    }


def test_coloured_log_is_read() -> None:
    repo = "pytest-dev/pytest"
    name = _name(repo, 0)
    log = f"{START_TEST_OUTPUT}\n\x1b[32mPASSED\x1b[0m {name}\n{END_TEST_OUTPUT}\n"
    assert grade(_task(repo, [name], []), log).outcome is Outcome.RESOLVED


def test_repo_without_swebench_parser_is_a_clear_error() -> None:
    task = _task("pytest-dev/pytest", ["t"], []).model_copy(update={"repo": "nobody/nothing"})
    with pytest.raises(ValueError, match="no log parser for repo 'nobody/nothing'"):
        grade(task, "PASSED t\n")
