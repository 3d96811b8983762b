"""Registry of test-log parsers: name -> dotted path, imported on first use.

A parser is `parse(log: str, task: Task) -> dict[str, TestStatus]`. A full dotted path
(`my_pkg.my_module.parse`) is accepted too, so users can plug in their own.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from deepswe.env.grading.outcomes import TestStatus

if TYPE_CHECKING:
    from deepswe.data.task import Task

Parser = Callable[[str, "Task"], dict[str, TestStatus]]

PARSERS: dict[str, str] = {
    "pytest": "deepswe.env.grading.parsers.pytest_summary.parse",
    "r2e-gym": "deepswe.env.grading.parsers.r2e_gym.parse",
    "swebench": "deepswe.env.grading.parsers.swebench_lib.parse",
}


def get_parser(name: str) -> Parser:
    """The parser registered as `name`, or the callable at dotted path `name`.

    Raises ValueError naming the known parsers when `name` is neither.
    """
    path = PARSERS.get(name, name)
    module_name, _, attr = path.rpartition(".")
    if not module_name:
        raise ValueError(f"unknown log parser {name!r}; known: {sorted(PARSERS)} or a dotted path")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        raise ValueError(
            f"unknown log parser {name!r}: cannot import {module_name!r} ({err}); "
            f"known: {sorted(PARSERS)}"
        ) from err
    parser = getattr(module, attr, None)
    if not callable(parser):
        raise ValueError(f"log parser {name!r}: {path!r} is not a callable")
    return parser
