"""SWE-bench rows (princeton-nlp/SWE-bench_Verified schema) -> Task.

Row fields: repo, instance_id, base_commit, patch, test_patch, problem_statement, hints_text,
created_at, version, environment_setup_commit, difficulty, and FAIL_TO_PASS / PASS_TO_PASS as
JSON-encoded lists of test ids. The image is SWE-bench's official per-instance image; the test
command is left empty because the evaluation harness takes it from SWE-bench's own specs
(MAP_REPO_VERSION_TO_SPECS keyed by repo and version).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ConfigDict

from deepswe.data.loaders.common import SweBenchFields, Text, load_rows
from deepswe.data.loaders.hub import local_or_hub_rows
from deepswe.data.task import HiddenTests, Task, TaskSource, TestSpec

SWE_BENCH_VERIFIED = "princeton-nlp/SWE-bench_Verified"

# Optional row fields kept as Task.metadata (hints are grading-side material, not the policy's).
_METADATA_FIELDS = ("created_at", "hints_text", "difficulty")


class SweBenchRow(SweBenchFields):
    """One SWE-bench row. Extra columns (other SWE-bench variants add some) are ignored."""

    model_config = ConfigDict(extra="ignore")

    hints_text: str | None = None
    created_at: Text | None = None
    version: Text | None = None
    environment_setup_commit: str | None = None
    difficulty: str | None = None


def swebench_image(instance_id: str) -> str:
    """Official SWE-bench evaluation image, e.g. django__django-11099 ->
    swebench/sweb.eval.x86_64.django_1776_django-11099 (Docker names must be lowercase; SWE-bench
    writes "__" as "_1776_" in image names)."""
    return f"swebench/sweb.eval.x86_64.{instance_id.replace('__', '_1776_')}".lower()


def swebench_row_to_task(data: dict[str, Any]) -> Task:
    row = SweBenchRow.model_validate(data)
    metadata = {k: getattr(row, k) for k in _METADATA_FIELDS if getattr(row, k)}
    return Task(
        instance_id=row.instance_id,
        repo=row.repo,
        base_commit=row.base_commit,
        problem_statement=row.problem_statement,
        source=TaskSource.SWE_BENCH_VERIFIED,
        image=swebench_image(row.instance_id),
        test_spec=TestSpec(command="", log_parser="swebench"),
        hidden=HiddenTests(
            fail_to_pass=row.FAIL_TO_PASS,
            pass_to_pass=row.PASS_TO_PASS,
            test_patch=row.test_patch,
        ),
        gold_patch=row.patch or None,
        version=row.version,
        environment_setup_commit=row.environment_setup_commit,
        metadata=metadata,
    )


def load_swebench(name_or_path: str | Path = SWE_BENCH_VERIFIED, split: str = "test") -> list[Task]:
    """SWE-bench tasks from a local .jsonl/.json/.parquet file (or directory of them), or else
    from the Hub by dataset id (`split` applies to the Hub only)."""
    return load_rows(local_or_hub_rows(name_or_path, split), swebench_row_to_task)
