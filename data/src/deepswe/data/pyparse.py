"""`ast.parse` for code that runs in threads.

CPython 3.11's parser keeps its recursion-depth bookkeeping where two threads parsing at once
disturb each other: one of them fails with "SystemError: AST constructor recursion depth
mismatch". The evaluation runner grades episodes in a thread pool, and health's strength runs
make mutants in threads beside it, so every parse on those paths takes this one lock (seen on
`deepswe-eval validate` of swe-mini with two workers: one gold run out of 326 ended infra_error).
"""

from __future__ import annotations

import ast
import threading

PARSING = threading.Lock()


def parse(source: str | bytes, filename: str = "<unknown>") -> ast.Module:
    """`ast.parse(source, filename)`, one thread at a time."""
    with PARSING:
        return ast.parse(source, filename)


__all__ = ["PARSING", "parse"]
