"""Our JSONL: Task lines and swe-mini "build from source" rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deepswe.data.datasets import load_tasks
from deepswe.data.errors import DataError
from deepswe.data.loaders import load_jsonl
from deepswe.data.store import write_jsonl
from deepswe.data.task import TaskSource


def swe_mini_row(**over: object) -> dict:
    row = {
        "instance_id": "tinycalc__tinycalc-3",
        "repo": "local/tinycalc",
        "base_commit": "4b825dc642cb6eb9a060e54bf8d69288fbee4904",
        "problem_statement": "divide(1, 0) returns inf instead of raising ZeroDivisionError.",
        "patch": "diff --git a/tinycalc/ops.py b/tinycalc/ops.py\n",
        "test_patch": "diff --git a/tests/test_ops.py b/tests/test_ops.py\n",
        "FAIL_TO_PASS": ["tests/test_ops.py::test_divide_by_zero"],
        "PASS_TO_PASS": ["tests/test_ops.py::test_add"],
        "environment": {
            "base": "bullseye",
            "source": "/srv/swe-mini/tinycalc",
            "pip": ["pytest==8.3.4"],
            "install": ["pip install -e ."],
            "test_cmd": "python -m pytest -rA tests/test_ops.py",
            "log_parser": "pytest",
        },
    }
    row.update(over)
    return row


def test_swe_mini_row_becomes_a_build_from_source_task(tmp_path: Path) -> None:
    path = tmp_path / "mini.jsonl"
    path.write_text(json.dumps(swe_mini_row(created_at="2025-01-02")) + "\n")
    (task,) = load_jsonl(path)
    assert task.source is TaskSource.SWE_MINI and task.image is None
    assert task.environment is not None and task.environment.base == "bullseye"
    assert task.test_spec.command == "python -m pytest -rA tests/test_ops.py"
    assert task.test_spec.log_parser == "pytest"
    assert task.hidden.fail_to_pass == ["tests/test_ops.py::test_divide_by_zero"]
    assert task.gold_patch and task.hidden.test_patch.startswith("diff --git a/tests/")
    assert task.metadata == {"created_at": "2025-01-02"}


def test_custom_source_and_json_encoded_lists_are_accepted(tmp_path: Path) -> None:
    row = swe_mini_row(source="custom", FAIL_TO_PASS=json.dumps(["t::a"]), timeout_s=60)
    path = tmp_path / "mini.jsonl"
    path.write_text(json.dumps(row) + "\n")
    (task,) = load_jsonl(path)
    assert task.source is TaskSource.CUSTOM
    assert task.hidden.fail_to_pass == ["t::a"] and task.test_spec.timeout_s == 60


def test_task_lines_round_trip_through_write_and_load(tmp_path: Path) -> None:
    src = tmp_path / "mini.jsonl"
    src.write_text(
        "\n".join(json.dumps(swe_mini_row(instance_id=f"m-{i}")) for i in range(3)) + "\n"
    )
    tasks = load_jsonl(src)
    out = tmp_path / "tasks.jsonl"
    assert write_jsonl(tasks, out) == 3
    assert load_jsonl(out) == tasks
    assert all(json.loads(line)["hidden"]["fail_to_pass"] for line in out.read_text().splitlines())


def test_unknown_key_in_swe_mini_row_is_named(tmp_path: Path) -> None:
    path = tmp_path / "mini.jsonl"
    row = swe_mini_row()
    row["environment"]["pip_extra"] = ["x"]
    path.write_text(json.dumps(swe_mini_row(instance_id="ok")) + "\n\n" + json.dumps(row) + "\n")
    with pytest.raises(DataError) as err:
        load_jsonl(path)
    (issue,) = err.value.issues
    assert (issue.where, issue.field) == (f"{path}:3", "environment.pip_extra")


def test_duplicate_instance_ids_are_rejected(tmp_path: Path) -> None:
    path = tmp_path / "mini.jsonl"
    path.write_text((json.dumps(swe_mini_row()) + "\n") * 2)
    with pytest.raises(DataError, match=r"mini.jsonl:2: instance_id: duplicate of .*mini.jsonl:1"):
        load_tasks(path)


def test_load_jsonl_refuses_other_dataset_rows(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    row = {k: v for k, v in swe_mini_row().items() if k != "environment"}
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(DataError, match="swe-bench row"):
        load_jsonl(path)
    assert load_tasks(path)[0].source is TaskSource.SWE_BENCH_VERIFIED
