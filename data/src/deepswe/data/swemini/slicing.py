"""Trimming a reproduction to what shows the bug: the test's earlier statements the last one
depends on, and short inputs written into the call itself."""

from __future__ import annotations

import ast
import copy
from collections import Counter

INLINE_LITERAL = 60  # characters of a literal input written into the call itself, at most


_PURE = {"len", "isinstance", "type", "bool", "repr", "str", "print", "id", "hash"}


def slice_needed(body: list[ast.stmt], ending: list[ast.stmt], api: set[str]) -> list[ast.stmt]:
    """The test's earlier statements the ending depends on: those that bind or change (call a
    method on, pass along, assign into) a name the ending or a kept statement reads, and calls
    of the project's API (`api`: its modules and the names imported from them) made for their
    effect (`six.add_move(...)`). Checks that passed (`assert len(m) == 1`), prints and
    unrelated steps go."""
    relevant = {n.id for s in ending for n in ast.walk(s) if isinstance(n, ast.Name)}
    out: list[ast.stmt] = []
    for stmt in reversed(body):
        if _touches(stmt, relevant) or _calls_api(stmt, api):
            out.append(stmt)
            relevant |= {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)}
    return out[::-1]


def _root_name(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Starred)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _calls_api(stmt: ast.stmt, api: set[str]) -> bool:
    if isinstance(stmt, ast.Assert):
        return False
    return any(isinstance(n, ast.Call) and _root_name(n.func) in api for n in ast.walk(stmt))


def _touches(stmt: ast.stmt, names: set[str]) -> bool:
    for n in ast.walk(stmt):
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load) and n.id in names:
            return True
        if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name in names:
            return True
        stored = isinstance(n, (ast.Attribute, ast.Subscript)) and not isinstance(n.ctx, ast.Load)
        if stored and _root_name(n) in names:
            return True
        if isinstance(n, ast.Call) and not (isinstance(n.func, ast.Name) and n.func.id in _PURE):
            if isinstance(n.func, ast.Attribute) and _root_name(n.func.value) in names:
                return True  # a method of a value the ending uses
            args = [*n.args, *(k.value for k in n.keywords)]
            if any(_root_name(a) in names for a in args):
                return True
    return False


def inline_last(
    body: list[ast.stmt], ending: list[ast.stmt]
) -> tuple[list[ast.stmt], list[ast.stmt]]:
    """`result = f(x)` right before `print(repr(result))`, its only use: `print(repr(f(x)))`."""
    if not body or not isinstance(body[-1], ast.Assign) or len(body[-1].targets) != 1:
        return body, ending
    target = body[-1].targets[0]
    uses = Counter(n.id for s in [*body, *ending] for n in ast.walk(s) if isinstance(n, ast.Name))
    if not isinstance(target, ast.Name) or uses[target.id] != 2:
        return body, ending
    if len(ast.unparse(body[-1].value)) > INLINE_LITERAL:
        return body, ending
    sub = Substitute({target.id: body[-1].value})
    return body[:-1], [sub.visit(s) for s in ending]


class Substitute(ast.NodeTransformer):
    def __init__(self, values: dict[str, ast.expr]) -> None:
        self.values = values

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if isinstance(node.ctx, ast.Load) and node.id in self.values:
            return copy.deepcopy(self.values[node.id])
        return node


def inline_inputs(
    values: list[ast.stmt], body: list[ast.stmt], ending: list[ast.stmt]
) -> tuple[list[ast.stmt], list[ast.stmt], list[ast.stmt]]:
    """A short input used once goes into the expression itself, as an issue would show it:
    `parameterize('Malmö')` rather than `s = 'Malmö'` then `parameterize(s)`. Only literals
    move past other statements; a built value (`date(2000, 2, 29)`) moves only when nothing
    runs between its assignment and its use."""
    uses = Counter(
        n.id for s in [*values, *body, *ending] for n in ast.walk(s) if isinstance(n, ast.Name)
    )
    inline = {}
    for stmt in values:
        target = stmt.targets[0] if isinstance(stmt, ast.Assign) else None
        if not isinstance(target, ast.Name) or uses[target.id] != 2:  # its binding + one use
            continue
        if len(ast.unparse(stmt.value)) > INLINE_LITERAL:
            continue
        try:
            ast.literal_eval(stmt.value)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            if body or any(
                isinstance(n, (ast.Lambda, ast.NamedExpr, ast.Yield)) for n in ast.walk(stmt.value)
            ):
                continue
        inline[target.id] = stmt.value
    if not inline:
        return values, body, ending
    sub = Substitute(inline)
    keep = [
        sub.visit(s)
        for s in values
        if not (
            isinstance(s, ast.Assign)
            and isinstance(s.targets[0], ast.Name)
            and s.targets[0].id in inline
        )
    ]
    return keep, [sub.visit(s) for s in body], [sub.visit(s) for s in ending]
