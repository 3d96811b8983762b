"""Our own task files: one `Task.model_dump_json()` a line, or swe-mini "build from source" rows.

A swe-mini row uses SWE-bench's field names plus an `environment` object:
`instance_id, repo, base_commit, problem_statement, patch, test_patch, FAIL_TO_PASS,
PASS_TO_PASS, environment: {base, source, pip, install, test_cmd, log_parser}`, and optionally
`source` ("swe-mini" | "custom"), `version`, `created_at`, `hints_text`, `timeout_s`, `metadata`,
and `graded_files`: the repository files that hold FAIL_TO_PASS/PASS_TO_PASS tests when they ship
with the repository (grading restores them, so a patch cannot rewrite them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field

from deepswe.data.errors import RowError
from deepswe.data.loaders.common import (
    SWE_MINI,
    TASK,
    SweBenchFields,
    Text,
    detect_kind,
    load_rows,
)
from deepswe.data.loaders.files import iter_raw_rows
from deepswe.data.task import EnvironmentSpec, HiddenTests, Task, TaskSource, TestSpec


class SweMiniRow(SweBenchFields):
    """One swe-mini row as written by the synthesiser (unknown keys are errors)."""

    model_config = ConfigDict(extra="forbid")

    environment: EnvironmentSpec
    source: Literal["swe-mini", "custom"] = "swe-mini"
    version: Text | None = None
    created_at: Text | None = None
    hints_text: str | None = None
    timeout_s: float | None = Field(default=None, gt=0)
    metadata: dict[str, str] = {}
    graded_files: list[Text] = []


def swe_mini_row_to_task(data: dict[str, Any]) -> Task:
    row = SweMiniRow.model_validate(data)
    env = row.environment
    metadata = dict(row.metadata)
    for key in ("created_at", "hints_text"):
        if getattr(row, key):
            metadata[key] = getattr(row, key)
    spec = {"timeout_s": row.timeout_s} if row.timeout_s else {}
    return Task(
        instance_id=row.instance_id,
        repo=row.repo,
        base_commit=row.base_commit,
        problem_statement=row.problem_statement,
        source=TaskSource(row.source),
        image=None,
        environment=env,
        test_spec=TestSpec(command=env.test_cmd, log_parser=env.log_parser, **spec),
        hidden=HiddenTests(
            fail_to_pass=row.FAIL_TO_PASS,
            pass_to_pass=row.PASS_TO_PASS,
            test_patch=row.test_patch,
            graded_files=row.graded_files,
        ),
        gold_patch=row.patch or None,
        version=row.version,
        metadata=metadata,
    )


def own_row_to_task(data: dict[str, Any]) -> Task:
    """A Task line or a swe-mini row; anything else is an error naming what it looks like."""
    kind = detect_kind(data)
    if kind == TASK:
        return Task.model_validate(data)
    if kind == SWE_MINI:
        return swe_mini_row_to_task(data)
    raise RowError("", f"this is a {kind} row, not a Task or swe-mini row: load it with load_tasks")


def load_jsonl(path: str | Path) -> list[Task]:
    """Tasks from our JSONL (Task lines and/or swe-mini rows). Raises DataError naming every
    bad line and field."""
    return load_rows(iter_raw_rows(path), own_row_to_task)
