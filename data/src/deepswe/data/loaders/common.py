"""Pieces every loader shares: field coercions, row-kind detection, and the convert loop."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, Field, ValidationError

from deepswe.data.errors import DataError, Issue, RowError, row_issues
from deepswe.data.loaders.files import RawRow
from deepswe.data.task import Task


def _json_list(value: Any) -> Any:
    """SWE-bench stores FAIL_TO_PASS / PASS_TO_PASS as JSON-encoded strings: decode them."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError as e:
            raise ValueError(f"not a JSON-encoded list of strings: {e.msg}") from e
    return value


def _stringish(value: Any) -> Any:
    """Parquet/pandas turn "3.0" into 3.0 and timestamps into datetimes: keep them as text."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value


StrList = Annotated[list[str], BeforeValidator(_json_list)]
Text = Annotated[str, BeforeValidator(_stringish)]

TASK, SWE_MINI, SWE_BENCH, R2E_GYM = "task", "swe-mini", "swe-bench", "r2e-gym"


def detect_kind(row: dict[str, Any]) -> str:
    """Which row format this is, from its keys (see the package README for each format)."""
    if "test_spec" in row or "hidden" in row:
        return TASK
    if "parsed_commit_content" in row or ("repo_name" in row and "docker_image" in row):
        return R2E_GYM
    if isinstance(row.get("environment"), dict):
        return SWE_MINI
    if "FAIL_TO_PASS" in row or "patch" in row:
        return SWE_BENCH
    raise RowError(
        "",
        "unrecognised row: expected a Task, a swe-mini row (with 'environment'), a SWE-bench "
        f"row or an R2E-Gym row; got keys {sorted(row)[:12]}",
    )


def convert_rows(
    rows: Iterable[RawRow], convert: Callable[[dict[str, Any]], Task]
) -> tuple[list[Task], list[Issue]]:
    """Convert every row, collecting each bad row's located issues instead of stopping."""
    tasks: list[Task] = []
    issues: list[Issue] = []
    seen: dict[str, str] = {}  # instance_id -> where it first appeared
    for raw in rows:
        if raw.data is None:
            issues.append(Issue(raw.where, "", raw.problem or "unreadable row"))
            continue
        try:
            task = convert(raw.data)
        except (ValidationError, RowError, DataError) as e:
            issues.extend(row_issues(raw.where, e))
            continue
        if task.instance_id in seen:
            issues.append(Issue(raw.where, "instance_id", f"duplicate of {seen[task.instance_id]}"))
            continue
        seen[task.instance_id] = raw.where
        tasks.append(task)
    return tasks, issues


def load_rows(rows: Iterable[RawRow], convert: Callable[[dict[str, Any]], Task]) -> list[Task]:
    """Like `convert_rows`, but any bad row fails the whole load with every issue listed."""
    tasks, issues = convert_rows(rows, convert)
    if issues:
        raise DataError(issues)
    return tasks


class SweBenchFields(BaseModel):
    """The SWE-bench columns every SWE-bench-style row has (SWE-bench, swe-mini, custom)."""

    instance_id: str = Field(min_length=1)
    repo: str
    base_commit: str
    problem_statement: str
    patch: str = ""
    test_patch: str = ""
    FAIL_TO_PASS: StrList
    PASS_TO_PASS: StrList = []
