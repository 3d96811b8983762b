"""Procedural bugs: AST mutation sites in a module, applied as minimal text edits.

The stdlib `ast` finds where a bug can go; the edit itself replaces only the bytes of one node
(or one operator token, or whole statement lines), so the gold patch is a one- or few-line diff
instead of `ast.unparse` reformatting the file. Offsets are byte offsets into the UTF-8 source
(ast's col_offset counts UTF-8 bytes). Only code inside functions is mutated (module-level
constants and imports would break whole test files at collection, not make a bug).

Operators, as SWE-smith's procedural modifiers do: flip a comparison, swap and/or, swap +/-,
shift an int constant by one, shift a slice bound by one, flip True/False, drop `not`, drop a
statement, drop one operand of a condition, swap if/else bodies, return a wrong value, change a
default argument.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass

from deepswe.data.pyparse import parse

_CMP = {  # op -> (regex of its token, replacement)
    ast.Lt: (r"<(?!=)", "<="),
    ast.LtE: (r"<=", "<"),
    ast.Gt: (r"(?<!-)>(?!=)", ">="),
    ast.GtE: (r">=", ">"),
    ast.Eq: (r"==", "!="),
    ast.NotEq: (r"!=", "=="),
    ast.In: (r"(?<!not )\bin\b", "not in"),
    ast.NotIn: (r"\bnot\s+in\b", "in"),
    ast.Is: (r"\bis\b(?!\s+not\b)", "is not"),
    ast.IsNot: (r"\bis\s+not\b", "is"),
}
_BOOL = {ast.And: (r"\band\b", "or"), ast.Or: (r"\bor\b", "and")}
_BIN = {ast.Add: (r"\+", "-"), ast.Sub: (r"-", "+")}
_DROPPABLE = (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Raise, ast.If)


@dataclass(frozen=True)
class Mutation:
    """Replace bytes [start, end) of `path` by `replacement`."""

    path: str
    kind: str
    line: int
    start: int
    end: int
    original: str
    replacement: str
    function: str

    @property
    def key(self) -> str:
        return f"{self.path}:{self.start}:{self.end}:{self.kind}:{self.replacement}"

    def apply(self, source: bytes) -> bytes:
        return source[: self.start] + self.replacement.encode() + source[self.end :]

    def to_dict(self) -> dict:
        return asdict(self)


class _Sites(ast.NodeVisitor):
    def __init__(self, path: str, data: bytes) -> None:
        self.path, self.data = path, data
        self.lines = data.splitlines(keepends=True)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))
        self.func: list[str] = []
        self.found: list[Mutation] = []

    # --- helpers --------------------------------------------------------------------------
    def off(self, line: int, col: int) -> int:
        return self.starts[line - 1] + col

    def span(self, node: ast.AST) -> tuple[int, int]:
        return self.off(node.lineno, node.col_offset), self.off(
            node.end_lineno, node.end_col_offset
        )

    def text(self, a: int, b: int) -> str:
        return self.data[a:b].decode("utf-8", errors="replace")

    def add(self, kind: str, node: ast.AST, a: int, b: int, replacement: str) -> None:
        if not self.func:
            return
        original = self.text(a, b)
        if original != replacement:
            self.found.append(
                Mutation(
                    self.path, kind, node.lineno, a, b, original, replacement, ".".join(self.func)
                )
            )

    def token_in_gap(
        self, kind: str, node: ast.AST, left: ast.AST, right: ast.AST, rx: str, new: str
    ) -> None:
        a, b = self.span(left)[1], self.span(right)[0]
        m = re.search(rx, self.text(a, b))
        if m and "#" not in self.text(a, b):
            start = a + len(self.text(a, b)[: m.start()].encode())
            self.add(kind, node, start, start + len(m.group(0).encode()), new)

    def whole_lines(self, node: ast.AST) -> tuple[int, int] | None:
        """Span of `node`'s lines if nothing else shares them."""
        before = self.lines[node.lineno - 1][: node.col_offset]
        after = self.lines[node.end_lineno - 1][node.end_col_offset :]
        if before.strip() or after.strip() and not after.strip().startswith(b"#"):
            return None
        return self.starts[node.lineno - 1], self.starts[node.end_lineno]

    # --- scopes ---------------------------------------------------------------------------
    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.func.append(node.name)
        args = node.args
        for default in [*args.defaults, *[d for d in args.kw_defaults if d is not None]]:
            self.constant(default, "default_arg")
        if len(node.body) >= 2:
            for stmt in node.body:
                self.maybe_drop(stmt)
        for stmt in node.body:
            self.visit(stmt)
        for deco in node.decorator_list:
            self.visit(deco)
        self.func.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.func.append(node.name)
        for stmt in node.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.visit(stmt)
        self.func.pop()

    # --- statements -----------------------------------------------------------------------
    def generic_visit(self, node: ast.AST) -> None:
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list) and len(block) >= 2 and self.func:
                for stmt in block:
                    self.maybe_drop(stmt)
        super().generic_visit(node)

    def maybe_drop(self, stmt: ast.stmt) -> None:
        if not isinstance(stmt, _DROPPABLE):
            return
        if isinstance(stmt, ast.Expr) and not isinstance(stmt.value, ast.Call):
            return  # docstrings and bare names
        if isinstance(stmt, ast.If) and (stmt.orelse or stmt.end_lineno - stmt.lineno > 3):
            return
        span = self.whole_lines(stmt)
        if span:
            self.add("drop_statement", stmt, span[0], span[1], "")

    def visit_If(self, node: ast.If) -> None:
        self.swap_branches(node)
        if isinstance(node.test, ast.BoolOp):
            self.drop_operand(node.test)
        self.generic_visit(node)

    def visit_While(self, node: ast.While) -> None:
        if isinstance(node.test, ast.BoolOp):
            self.drop_operand(node.test)
        self.generic_visit(node)

    def swap_branches(self, node: ast.If) -> None:
        body, orelse = node.body, node.orelse
        if (
            not orelse
            or body[0].lineno == node.lineno
            or body[0].col_offset != orelse[0].col_offset
        ):
            return
        b0, b1, o0, o1 = (
            body[0].lineno,
            body[-1].end_lineno,
            orelse[0].lineno,
            orelse[-1].end_lineno,
        )
        middle = self.lines[b1 : o0 - 1]
        if len(middle) != 1 or not re.match(rb"^\s*else\s*:\s*$", middle[0]):
            return  # an elif chain, comments or a one-line else: not a plain swap
        if not self.lines[o1 - 1].endswith(b"\n") or self.whole_lines(orelse[-1]) is None:
            return
        new = b"".join(self.lines[o0 - 1 : o1] + middle + self.lines[b0 - 1 : b1])
        self.add(
            "swap_if_else",
            node,
            self.starts[b0 - 1],
            self.starts[o1],
            new.decode("utf-8", "replace"),
        )

    def drop_operand(self, node: ast.BoolOp) -> None:
        v = node.values
        self.add("drop_condition", node, self.span(v[-2])[1], self.span(v[-1])[1], "")
        self.add("drop_condition", node, self.span(v[0])[0], self.span(v[1])[0], "")

    def visit_Return(self, node: ast.Return) -> None:
        value = node.value
        if value is not None:
            a, b = self.span(value)
            if isinstance(value, (ast.Compare, ast.BoolOp)):
                self.add("wrong_return", node, a, b, f"not ({self.text(a, b)})")
            elif isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.Not):
                pass  # visit_UnaryOp drops the `not`
            elif not isinstance(value, ast.Constant) or isinstance(value.value, bool):
                self.add("wrong_return", node, a, b, "None")  # a constant None stays as is
        self.generic_visit(node)

    # --- expressions ----------------------------------------------------------------------
    def visit_Compare(self, node: ast.Compare) -> None:
        if len(node.ops) == 1 and type(node.ops[0]) in _CMP:
            rx, new = _CMP[type(node.ops[0])]
            self.token_in_gap("flip_comparison", node, node.left, node.comparators[0], rx, new)
        self.generic_visit(node)

    def visit_BoolOp(self, node: ast.BoolOp) -> None:
        rx, new = _BOOL[type(node.op)]
        self.token_in_gap("swap_boolean_operator", node, node.values[0], node.values[1], rx, new)
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        strs = (ast.JoinedStr, ast.List, ast.Tuple)
        is_str = any(
            isinstance(x, ast.Constant) and isinstance(x.value, str)
            for x in (node.left, node.right)
        )
        if type(node.op) in _BIN and not is_str and not isinstance(node.left, strs):
            rx, new = _BIN[type(node.op)]
            self.token_in_gap("swap_arithmetic", node, node.left, node.right, rx, new)
        self.generic_visit(node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> None:
        if isinstance(node.op, ast.Not):
            a, b = self.span(node)
            oa, ob = self.span(node.operand)
            self.add("drop_not", node, a, b, self.text(oa, ob))
        self.generic_visit(node)

    def visit_Slice(self, node: ast.Slice) -> None:
        for bound, delta in ((node.lower, "+ 1"), (node.upper, "- 1")):
            if bound is not None and not isinstance(bound, ast.Constant):
                a, b = self.span(bound)
                self.add("shift_slice", bound, a, b, f"{self.text(a, b)} {delta}")
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        self.constant(node, "shift_constant")

    def constant(self, node: ast.AST, kind: str) -> None:
        if not isinstance(node, ast.Constant):
            return
        a, b = self.span(node)
        text, value = self.text(a, b), node.value
        if isinstance(value, bool):
            self.add(kind, node, a, b, str(not value))
        elif isinstance(value, int) and text.isdigit():
            self.add(kind, node, a, b, str(value + 1 if value <= 1 else value - 1))


def mutation_sites(path: str, source: bytes) -> list[Mutation]:
    """Every mutation of `source` (the file at repo-relative `path`) that still compiles."""
    return mutation_sites_where(path, source, lambda m: True)


def mutation_sites_where(
    path: str, source: bytes, keep: Callable[[Mutation], bool]
) -> list[Mutation]:
    """The mutations of `source` that `keep` accepts and that still compile: `mutation_sites`
    without compiling the mutants nobody wants (each costs a parse of the whole module)."""
    try:
        tree = parse(source)
    except (SyntaxError, ValueError):
        return []
    visitor = _Sites(path, source)
    visitor.visit(tree)
    out, seen = [], set()
    for m in visitor.found:
        if m.key in seen or not keep(m):
            continue
        seen.add(m.key)
        try:
            parse(m.apply(source))
        except (SyntaxError, ValueError):
            continue
        out.append(m)
    return sorted(out, key=lambda m: (m.path, m.start, m.end, m.kind, m.replacement))
