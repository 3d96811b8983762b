"""Row formats -> `Task`: our JSONL (Task lines and swe-mini rows), SWE-bench rows and R2E-Gym
rows, from local files (`validate_source`) or the Hugging Face Hub (`HUB_DATASETS`).

Each row's format is recognised from its keys. Dataset *names* (swe-bench-verified,
r2e-gym-subset, swe-mini[:split]) are resolved one layer up, in `deepswe.data.datasets`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from deepswe.data.errors import Issue
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
    "HUB_DATASETS",
    "load_jsonl",
    "load_r2e_gym",
    "load_swebench",
    "row_to_task",
    "validate_source",
]

# Dataset name -> (Hub id, default split, loader).
HUB_DATASETS: dict[str, tuple[str, str, Callable[[str, str], list[Task]]]] = {
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
