"""R2E-Gym rows (R2E-Gym/R2E-Gym-Subset, DeepSWE's training set) -> Task.

Columns: repo_name, docker_image, commit_hash, problem_statement, prompt, parsed_commit_content,
execution_result_content, modified_files, modified_entity_summaries, relevant_files,
num_non_test_files, num_non_test_func_methods, num_non_test_lines, expected_output_json.

- image: docker_image. Its /testbed holds the repository and run_tests.sh, and /r2e_tests the
  hidden tests; R2E-Gym runs `bash /root/run_tests.sh` (after moving it and r2e_tests to /root
  and linking r2e_tests back into /testbed). The test command here is what that script holds,
  R2E-Gym's `tests_cmd` for the repository (repo_analysis_args.py), so the grader runs the
  task's command, never a script from the image (deepswe.env.r2e_layout).
- base_commit: parsed_commit_content.old_commit_hash, which R2E-Gym writes as "<commit_hash>^"
  (a git revision naming the parent; the parent's SHA is not in the row).
- gold / test patch: the commit's file diffs split by R2E-Gym's test-file rule (r2e_commit.py).
- fail_to_pass / pass_to_pass: execution_result_content holds pytest runs of the hidden tests
  at the old commit and at the new one; a test expected to pass (expected_output_json) is
  fail-to-pass if it did not pass at the old commit, pass-to-pass if it did. Names are
  R2E-Gym's, ANSI codes stripped. Rows without those runs list every expected-PASSED test as
  fail-to-pass (the reward, all listed tests pass, is the same either way).
- expected_statuses: expected_output_json verbatim (keys keep their ANSI codes).
execution_result_content itself is never stored on the Task: only the lists, the hidden test
files and the metadata note which basis was used.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from deepswe.data.errors import DataError, Issue, RowError, field_path
from deepswe.data.loaders.common import load_rows
from deepswe.data.loaders.hub import local_or_hub_rows
from deepswe.data.loaders.r2e_commit import ParsedCommit, parse_commit, split_commit
from deepswe.data.loaders.r2e_setup import setup_pins, setup_python, setup_python_release
from deepswe.data.loaders.r2e_test_log import decolor, summary_statuses
from deepswe.data.task import HiddenTests, Task, TaskSource, TestSpec

R2E_GYM_SUBSET = "R2E-Gym/R2E-Gym-Subset"
# R2E-Gym's `RepoAnalysisArgs.tests_cmd` (src/r2egym/repo_analysis/repo_analysis_args.py), the
# line each image's run_tests.sh runs in /testbed: one command for every repository but orange3,
# whose Qt tests need a display.
R2E_TEST_COMMAND = (
    "PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' "
    ".venv/bin/python -W ignore -m pytest -rA r2e_tests"
)
R2E_TEST_COMMANDS = {
    "orange3": "QT_QPA_PLATFORM=minimal PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning'"
    " xvfb-run --auto-servernum .venv/bin/python -W ignore -m pytest -rA r2e_tests",
}


# R2E-Gym grades some rows with a runner script it ships among the row's test files
# (repo_testextract.py `test_extractor`): every tornado row, and Pillow rows whose tests are
# unittest classes. Its run_tests.sh then holds this command instead of tests_cmd.
R2E_RUNNERS = ("tornado_unittest_runner.py", "unittest_custom_runner.py")


def r2e_test_command(repo_name: str, test_files: Iterable[str] = ()) -> str:
    """The command R2E-Gym's image for a row of `repo_name` with `test_files` grades with."""
    names = set(test_files)
    for runner in R2E_RUNNERS:
        if runner in names:
            return f".venv/bin/python -W ignore r2e_tests/{runner}"
    return R2E_TEST_COMMANDS.get(repo_name.lower(), R2E_TEST_COMMAND)


# R2E-Gym names repositories without their owner; these are the GitHub owners of the repos it
# supports (r2egym/agenthub/__init__.py SUPPORTED_REPOS). Unknown names are kept bare.
R2E_REPO_OWNERS = {
    "aiohttp": "aio-libs/aiohttp",
    "coveragepy": "nedbat/coveragepy",
    "datalad": "datalad/datalad",
    "numpy": "numpy/numpy",
    "orange3": "biolab/orange3",
    "pandas": "pandas-dev/pandas",
    "pillow": "python-pillow/Pillow",
    "pyramid": "Pylons/pyramid",
    "scrapy": "scrapy/scrapy",
    "sympy": "sympy/sympy",
    "tornado": "tornadoweb/tornado",
}

_ISSUE = re.compile(r"\[ISSUE\](.*)\[/ISSUE\]", re.DOTALL)
T = TypeVar("T")


class R2EGymRow(BaseModel):
    """One R2E-Gym row; the columns a Task does not need (prompt, entity summaries) are ignored."""

    model_config = ConfigDict(extra="ignore")

    repo_name: str
    docker_image: str
    commit_hash: str = Field(min_length=7)
    problem_statement: str
    parsed_commit_content: str | dict[str, Any]
    expected_output_json: str | dict[str, str]
    execution_result_content: str | dict[str, Any] | None = None
    relevant_files: list[str] = []
    num_non_test_files: int | None = None
    num_non_test_func_methods: int | None = None
    num_non_test_lines: int | None = None
    instance_id: str | None = None


def _nested(name: str, parse: Callable[[], T]) -> T:
    """Run `parse` on a JSON-in-a-string column, naming that column in any error."""
    try:
        return parse()
    except json.JSONDecodeError as e:
        raise RowError(name, f"invalid JSON: {e.msg} (char {e.pos})") from e
    except ValidationError as e:
        raise DataError(
            [Issue("", field_path(x["loc"], name), x["msg"]) for x in e.errors()]
        ) from e


def _decode(value: str | dict[str, Any]) -> dict[str, Any]:
    data = json.loads(value) if isinstance(value, str) else value
    if not isinstance(data, dict):
        raise ValueError("expected a JSON object")
    return data


def _expected(value: str | dict[str, str]) -> dict[str, str]:
    try:
        data = _decode(value)
    except ValueError as e:
        raise RowError("expected_output_json", str(e)) from e
    bad = [k for k, v in data.items() if not isinstance(v, str)]
    if bad:
        raise RowError(f"expected_output_json.{bad[0]}", "status should be a string")
    return data


def derive_test_lists(
    expected: dict[str, str], execution: dict[str, Any]
) -> tuple[list[str], list[str], str]:
    """(fail_to_pass, pass_to_pass, basis) for tests expected to pass; see the module doc."""
    must_pass = [decolor(k) for k, v in expected.items() if v == "PASSED"]
    old_log = execution.get("old_commit_res_stdout")
    if not isinstance(old_log, str):
        return must_pass, [], "expected_output_json"
    before = {decolor(k): v for k, v in summary_statuses(old_log).items()}
    f2p = [t for t in must_pass if before.get(t) != "PASSED"]
    p2p = [t for t in must_pass if before.get(t) == "PASSED"]
    return f2p, p2p, "execution_result"


def _metadata(
    row: R2EGymRow,
    commit: ParsedCommit,
    basis: str,
    binary: list[str],
    python: str | None,
    release: str | None = None,
    pins: list[str] | None = None,
) -> dict[str, str]:
    meta = {
        "repo_name": row.repo_name,
        "commit_hash": row.commit_hash,
        "created_at": commit.commit_date,
        "test_lists_from": basis,
        "relevant_files": json.dumps(row.relevant_files),
    }
    for key in ("num_non_test_files", "num_non_test_func_methods", "num_non_test_lines"):
        if getattr(row, key) is not None:
            meta[key] = str(getattr(row, key))
    if binary:
        meta["skipped_binary_files"] = json.dumps(binary)
    if python:
        meta["r2e_setup_python"] = python  # the Python R2E-Gym's install kept (r2e_setup.py)
    if release:
        meta["r2e_setup_python_release"] = release  # that Python's release, "3.9.21"
    if pins:
        meta["r2e_setup_pins"] = json.dumps(pins)  # what its installs added (r2e_setup.py)
    return meta


def r2e_row_to_task(data: dict[str, Any]) -> Task:
    row = R2EGymRow.model_validate(data)
    commit = _nested("parsed_commit_content", lambda: parse_commit(row.parsed_commit_content))
    patches = split_commit(commit)
    expected = _expected(row.expected_output_json)
    execution: dict[str, Any] = {}
    if row.execution_result_content:
        raw = row.execution_result_content
        execution = _nested("execution_result_content", lambda: _decode(raw))
    f2p, p2p, basis = derive_test_lists(expected, execution)
    names, codes = execution.get("test_file_names", []), execution.get("test_file_codes", [])
    issue = _ISSUE.search(row.problem_statement)
    return Task(
        instance_id=row.instance_id or f"{row.repo_name}_{row.commit_hash[:8]}",
        repo=R2E_REPO_OWNERS.get(row.repo_name.lower(), row.repo_name),
        base_commit=commit.old_commit_hash or f"{row.commit_hash}^",
        problem_statement=(issue.group(1) if issue else row.problem_statement).strip(),
        source=TaskSource.R2E_GYM,
        image=row.docker_image,
        test_spec=TestSpec(command=r2e_test_command(row.repo_name, names), log_parser="r2e-gym"),
        hidden=HiddenTests(
            fail_to_pass=f2p,
            pass_to_pass=p2p,
            test_patch=patches.test_patch,
            expected_statuses=expected,
            test_files=dict(zip(names, codes, strict=False)),
        ),
        gold_patch=patches.gold_patch or None,
        metadata=_metadata(
            row,
            commit,
            basis,
            patches.skipped_binary,
            setup_python(execution),
            setup_python_release(execution),
            setup_pins(execution),
        ),
    )


def load_r2e_gym(name_or_path: str | Path = R2E_GYM_SUBSET, split: str = "train") -> list[Task]:
    """R2E-Gym tasks from local files (.json rows or trajectories, .jsonl, .parquet, or a
    directory of them), or else from the Hub by dataset id."""
    return load_rows(local_or_hub_rows(name_or_path, split), r2e_row_to_task)
