"""Dataset loaders: every source becomes `list[Task]`.

`load_tasks(source)` takes a dataset name ("swe-bench-verified", "r2e-gym-subset", "swe-mini",
"swe-mini:train", "swe-mini:test") or a local path (file or directory) and recognises each row's format from its keys: a Task line, a
swe-mini row, a SWE-bench row or an R2E-Gym row (trajectory files included).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from deepswe.data.errors import DataError, Issue
from deepswe.data.loaders.common import (
    R2E_GYM,
    SWE_BENCH,
    SWE_MINI,
    TASK,
    convert_rows,
    detect_kind,
)
from deepswe.data.loaders.files import iter_raw_rows
from deepswe.data.loaders.jsonl import load_jsonl, swe_mini_row_to_task
from deepswe.data.loaders.r2e_gym import R2E_GYM_SUBSET, load_r2e_gym, r2e_row_to_task
from deepswe.data.loaders.swebench import SWE_BENCH_VERIFIED, load_swebench, swebench_row_to_task
from deepswe.data.task import Task

__all__ = [
    "DATASETS",
    "load_jsonl",
    "load_r2e_gym",
    "load_swebench",
    "load_tasks",
    "row_to_task",
    "validate_source",
]

# Dataset name -> (Hub id, default split, loader).
DATASETS: dict[str, tuple[str, str, Callable[[str, str], list[Task]]]] = {
    "swe-bench-verified": (SWE_BENCH_VERIFIED, "test", load_swebench),
    "r2e-gym-subset": (R2E_GYM_SUBSET, "train", load_r2e_gym),
}

_CONVERTERS: dict[str, Callable[[dict[str, Any]], Task]] = {
    TASK: Task.model_validate,
    SWE_MINI: swe_mini_row_to_task,
    SWE_BENCH: swebench_row_to_task,
    R2E_GYM: r2e_row_to_task,
}


def row_to_task(row: dict[str, Any]) -> Task:
    """Any supported row -> Task, its format recognised from its keys."""
    return _CONVERTERS[detect_kind(row)](row)


def validate_source(path: str | Path) -> tuple[list[Task], list[Issue]]:
    """Every good task of a local file or directory, and every bad row's located issues."""
    return convert_rows(iter_raw_rows(path), row_to_task)


def _swe_mini(hub_id: str, split: str) -> list[Task]:
    """The released swe-mini tasks, sources resolved on this machine ("" split: all of them)."""
    from deepswe.data.swemini.load import load_swe_mini  # swemini imports this module

    return load_swe_mini(split=split or None)


DATASETS["swe-mini"] = ("data/swe-mini/tasks.jsonl", "", _swe_mini)
DATASETS["swe-mini:train"] = ("data/swe-mini/tasks.jsonl", "train", _swe_mini)
DATASETS["swe-mini:test"] = ("data/swe-mini/tasks.jsonl", "test", _swe_mini)


def load_tasks(source: str | Path, split: str | None = None) -> list[Task]:
    """Tasks from a dataset name in DATASETS or a local path. Raises DataError listing every
    bad row (file:line: field: message)."""
    key = str(source)
    if key in DATASETS and not Path(key).exists():
        hub_id, default_split, loader = DATASETS[key]
        return loader(hub_id, split or default_split)
    path = Path(source)
    if not path.exists():
        names = ", ".join(DATASETS)
        raise DataError.at(key, f"no such file or directory, and not a dataset name ({names})")
    tasks, issues = validate_source(path)
    if issues:
        raise DataError(issues)
    return tasks
