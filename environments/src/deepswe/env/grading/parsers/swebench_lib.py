"""SWE-bench's own per-repository log parsers and resolution rule, used as a library.

Needs the optional extra `deepswe-env[swebench]` (swebench 4.1.0, the last line that keeps
`MAP_REPO_VERSION_TO_SPECS` and `swebench.harness.log_parsers`); imported only when a task
graded with parser "swebench" is met, because importing swebench pulls in its whole harness.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from deepswe.env.grading.markers import strip_ansi
from deepswe.env.grading.outcomes import TestStatus

if TYPE_CHECKING:
    from deepswe.data.task import Task


def _swebench() -> Any:
    try:
        from swebench.harness import grading, log_parsers
    except ImportError as err:  # pragma: no cover - depends on the install
        raise ImportError(
            "log parser 'swebench' needs the swebench package: pip install 'deepswe-env[swebench]'"
        ) from err
    return SimpleNamespace(grading=grading, log_parsers=log_parsers)


def _spec(task: Task) -> SimpleNamespace:
    # swebench's parsers take a TestSpec; the Python ones ignore it and the JS/Ruby ones
    # read only `instance_id`, so a stand-in with the identifying fields is enough.
    return SimpleNamespace(
        instance_id=task.instance_id,
        repo=task.repo,
        version=task.version,
        FAIL_TO_PASS=list(task.hidden.fail_to_pass),
        PASS_TO_PASS=list(task.hidden.pass_to_pass),
    )


def parse_raw(log: str, task: Task) -> dict[str, str]:
    """swebench's status map for `log`, chosen by `task.repo` (values are status words).

    ANSI codes are stripped first: SWE-bench's harness logs carry none, and a coloured log
    would otherwise parse to nothing.
    """
    lib = _swebench()
    parser = lib.log_parsers.MAP_REPO_TO_PARSER.get(task.repo)
    if parser is None:
        raise ValueError(
            f"task {task.instance_id}: swebench has no log parser for repo {task.repo!r}"
        )
    return parser(strip_ansi(log), _spec(task))


def parse(log: str, task: Task) -> dict[str, TestStatus]:
    """Registry entry point: swebench's status map as our `TestStatus`es."""
    known = {s.value for s in TestStatus}
    return {name: TestStatus(word) for name, word in parse_raw(log, task).items() if word in known}


def tests_report(statuses: dict[str, str], task: Task) -> dict:
    """swebench's own `get_eval_tests_report` over a status map (test id -> status word): a
    listed test reported SKIPPED counts as neither success nor failure, and FAIL_ONLY repos
    (some JS ones) only need their tests not to be FAILED. The one place the rule is applied:
    the verdict below and eval's report.json (deepswe.eval.swebench_io) both read it."""
    grading = _swebench().grading
    eval_type = (
        grading.EvalType.FAIL_ONLY
        if task.repo in grading.FAIL_ONLY_REPOS
        else grading.EvalType.PASS_AND_FAIL
    )
    gold = {
        "instance_id": task.instance_id,
        "FAIL_TO_PASS": list(task.hidden.fail_to_pass),
        "PASS_TO_PASS": list(task.hidden.pass_to_pass),
    }
    return grading.get_eval_tests_report(statuses, gold, eval_type=eval_type)


def resolved(statuses: dict[str, TestStatus], task: Task) -> bool:
    """SWE-bench's verdict: `get_resolution_status(get_eval_tests_report(...)) == FULL`."""
    grading = _swebench().grading
    report = tests_report({name: status.value for name, status in statuses.items()}, task)
    return grading.get_resolution_status(report) == grading.ResolvedStatus.FULL.value
