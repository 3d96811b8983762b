"""Reading one pytest failure section (long traceback, `-l` locals) into what an issue reports.

From the test's own frame: the failing statement and the literal values of its locals; from the
raising frame: the exception type and message. `Observation` then says what was called, with
which inputs, what came back and what was expected, in terms a user of the library would use,
never the test's name or file.
"""

from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass, field

_LOCATION = re.compile(r"^\S+\.py:\d+: ?\w*$")
_LOCAL = re.compile(r"^([A-Za-z_]\w*) += (.+)$")
_ADDR = re.compile(r" at 0x[0-9a-f]+")
MAX_VALUE = 240
MAX_CONTEXT = 12  # lines of test setup shown in a reproduction at most


@dataclass
class Observation:
    statement: str  # the failing statement, one line, locals' literal values inlined
    kind: str  # "compare" | "truth" | "raises" | "no_raise" | "other"
    call: str = ""  # the expression whose value is wrong
    actual: str = ""
    expected: str = ""
    op: str = "=="
    exception: str = ""  # "TypeError: 'NoneType' object is not iterable"
    names: set[str] = field(default_factory=set)  # free names the snippet uses (for imports)
    context: str = ""  # the test's statements before the failing one, dedented (setup)


def _short(text: str) -> str:
    text = _ADDR.sub("", text.strip())
    return text if len(text) <= MAX_VALUE else text[: MAX_VALUE - 3] + "..."


def _frames(section: str) -> list[list[str]]:
    frames, cur = [], []
    for line in section.splitlines():
        cur.append(line)
        if _LOCATION.match(line.strip()):
            frames.append(cur)
            cur = []
    if cur:
        frames.append(cur)
    return [f for f in frames if any(x.strip() for x in f)]


def _failing_statement(frame: list[str]) -> str | None:
    """The `>` line and its continuation lines, joined into one line."""
    for i, line in enumerate(frame):
        if line.startswith(">"):
            parts = [line[1:].strip()]
            for nxt in frame[i + 1 :]:
                if nxt.startswith("E ") or not nxt.startswith("    ") or not nxt.strip():
                    break
                if set(nxt.strip()) <= {"^", "~"}:
                    continue  # Python 3.11's caret line under the failing expression
                parts.append(nxt.strip())
            return " ".join(parts)
    return None


def _literal_locals(frame: list[str]) -> dict[str, str]:
    out = {}
    for line in frame:
        m = _LOCAL.match(line)
        if m and m.group(1) != "self":
            try:
                ast.literal_eval(m.group(2))
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                continue
            out[m.group(1)] = m.group(2)
    return out


def _inline(expr: str, values: dict[str, str]) -> str:
    """`expr` with each free name that has a literal value replaced by that value."""
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError:
        return expr
    data = expr.encode()
    edits = [
        (n.col_offset, n.end_col_offset, values[n.id])
        for n in ast.walk(tree)
        if isinstance(n, ast.Name)
        and n.id in values
        and isinstance(n.ctx, ast.Load)
        and n.lineno == 1
    ]
    for a, b, text in sorted(edits, reverse=True):
        data = data[:a] + text.encode() + data[b:]
    return data.decode()


def _free_names(expr: str) -> set[str]:
    try:
        tree = ast.parse(expr)
    except SyntaxError:
        return set()
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


def _exception(section: str) -> str:
    """The first `E` line: `TypeError: ...` or `AssertionError: assert x == y`."""
    for line in section.splitlines():
        if line.startswith("E ") and line[1:].strip():
            return _short(line[1:].strip())
    return ""


def _has_call(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) for n in ast.walk(node))


def _with_body(frame: list[str], test_source: str) -> str | None:
    """For a failing `with pytest.raises(...):` line: the first statement inside the block,
    read from the test's source at the line the frame's location names."""
    line = _location(frame)
    if not line or not test_source:
        return None
    try:
        tree = ast.parse(test_source)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.With) and node.lineno == line and node.body:
            return " ".join(ast.get_source_segment(test_source, node.body[0]).split())
    return None


def _location(frame: list[str]) -> int | None:
    m = re.match(r"^\S+\.py:(\d+):", frame[-1].strip())
    return int(m.group(1)) if m else None


def _context(frame: list[str], test_source: str, values: dict[str, str]) -> str:
    """The plain test function's statements before the failing line (its setup), with its
    literal parameters as assignments; empty for methods and long setups."""
    line = _location(frame)
    try:
        tree = ast.parse(test_source)
    except SyntaxError:
        return ""
    funcs = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef) and line and n.lineno <= line <= n.end_lineno
    ]
    if not funcs:
        return ""
    func = max(funcs, key=lambda n: n.lineno)
    params = [a.arg for a in func.args.args]
    before = [
        st
        for st in func.body
        if st.end_lineno < line
        and not (isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant))
    ]
    if "self" in params or not before or before[-1].end_lineno - before[0].lineno > MAX_CONTEXT:
        return ""
    lines = test_source.splitlines()[before[0].lineno - 1 : before[-1].end_lineno]
    assigns = [f"{p} = {values[p]}" for p in params if p in values]
    return "\n".join([*assigns, textwrap.dedent("\n".join(lines))])


def observe(section: str, test_source: str = "") -> Observation | None:
    """What the failure shows, or None when the section has no readable failing statement.

    `test_source`, the failing test's module, is read only for a `with pytest.raises` block
    (pytest shows the `with` line, not the call inside it)."""
    frames = _frames(section)
    if not frames:
        return None
    stmt = _failing_statement(frames[0])
    if not stmt:
        return None
    if stmt.startswith("with ") and stmt.endswith(":"):
        stmt = _with_body(frames[0], test_source) or stmt
    values = _literal_locals(frames[0])
    exc = _exception(section)
    if exc.startswith("assert "):  # pytest leaves out the type for a plain assert
        exc = f"AssertionError: {exc}"
    context = _context(frames[0], test_source, values)
    seg = lambda n: ast.get_source_segment(stmt, n) or ""  # noqa: E731
    if stmt.endswith(":"):
        stmt += " pass"  # a compound statement's header (for/class/if): parse it with a body
    try:
        node = ast.parse(stmt).body[0]
    except (SyntaxError, IndexError):
        return Observation(
            _short(_inline(stmt, values)), "other", exception=exc, names=_free_names(stmt)
        )
    obs = Observation(
        _short(_inline(stmt, values)),
        "other",
        exception=exc,
        names=_free_names(stmt) | _free_names(context),
        context=context,
    )
    if isinstance(node, ast.Assert) and exc.startswith("AssertionError"):
        test = node.test
        if isinstance(test, ast.Compare) and len(test.ops) == 1:
            left, right = test.left, test.comparators[0]
            call_left = _has_call(left) or not _has_call(right)
            call, other = (left, right) if call_left else (right, left)
            obs.kind, obs.op = "compare", _op(test.ops[0])
            obs.call, obs.expected = _inline(seg(call), values), _inline(seg(other), values)
            obs.actual = _actual(exc, call_left)
        else:
            obs.kind, obs.call = "truth", _inline(seg(test), values)
        return obs
    if exc.startswith("Failed: DID NOT RAISE"):
        raised = exc.removeprefix("Failed: DID NOT RAISE").strip()
        raised = re.sub(
            r"^<class '(?:\w+\.)*(\w+)'>$", r"\1", raised
        )  # pytest 8 prints the class repr
        obs.kind, obs.call, obs.expected = "no_raise", obs.statement, raised
        return obs
    if exc and not exc.startswith("AssertionError"):
        expr = node.test if isinstance(node, ast.Assert) else node
        calls = [n for n in ast.walk(expr) if isinstance(n, ast.Call)]
        obs.kind, obs.call = "raises", _inline(seg(calls[0] if calls else expr) or stmt, values)
        return obs
    if (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Call)
        and exc.startswith("AssertionError")
    ):
        # unittest style: self.assertEqual(a, b) -> "AssertionError: x != y"
        args = node.value.args
        if len(args) >= 2:
            call_left = _has_call(args[0]) or not _has_call(args[1])
            call, other = (args[0], args[1]) if call_left else (args[1], args[0])
            obs.kind, obs.call = "compare", _inline(seg(call), values)
            obs.expected, obs.actual = _inline(seg(other), values), _actual(exc, call_left)
            return obs
    return obs


_OPS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
        ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not"}  # fmt: skip


def _op(op: ast.cmpop) -> str:
    return _OPS.get(type(op), "==")


def _actual(exc: str, left: bool) -> str:
    """The value the call produced, from `AssertionError: assert X == Y` (or `X != Y`)."""
    body = exc.removeprefix("AssertionError:").strip().removeprefix("assert ").strip()
    for sep in (" == ", " != ", " in ", " is ", " < ", " > ", " <= ", " >= "):
        if sep in body:
            a, b = body.split(sep, 1)
            b = re.split(
                r"\s+(?:Full diff|Left contains|Right contains|At index|Differing|Omitting)", b
            )[0]
            return _short(a if left else b)
    return _short(body)
