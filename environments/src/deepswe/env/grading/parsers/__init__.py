"""Registry of test-log parsers: name -> "module:function", imported on first use.

A parser is `parse(log: str, task: Task) -> dict[str, TestStatus]`. A `module:function` path is
accepted in place of a name, so users can plug in their own (deepswe.env.registry).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from deepswe.env.grading.outcomes import TestStatus
from deepswe.env.registry import resolve

if TYPE_CHECKING:
    from deepswe.data.task import Task

Parser = Callable[[str, "Task"], dict[str, TestStatus]]

PARSERS: dict[str, str] = {
    "pytest": "deepswe.env.grading.parsers.pytest_summary:parse",
    "r2e-gym": "deepswe.env.grading.parsers.r2e_gym:parse",
    "swebench": "deepswe.env.grading.parsers.swebench_lib:parse",
}


def get_parser(name: str) -> Parser:
    """The parser registered as `name`, or the callable at `module:function` path `name`.

    Raises ValueError naming the known parsers when `name` is neither.
    """
    return resolve(PARSERS, name, "log parser")
