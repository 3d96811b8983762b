"""From a failing test to standalone scripts that should show the bug: the reproductions.

For each frame of the failure that lies in test code (innermost first), the statement pytest
stopped at becomes the script's last line, and everything it needs comes before it: the test's
own earlier statements (through the blocks enclosing the failing line), its parameters (the
parametrize case named by the test id, else the values pytest printed, else a simple fixture),
the test class's attributes and helper methods (`self.x`), `setUp`, and the module-level
imports and helpers of the test modules (`testcode.Scope`). unittest assertions become plain
`assert`s and expected-exception blocks become `try`/`except`.

Last lines: a wrong value prints `repr(value)` (and, second, the comparison itself); a crash
is the crashing statement; a missing exception is the statement that should raise. Which claim
a script supports is decided by running it (`issue.py`), not here.
"""

from __future__ import annotations

import ast
import copy
import re
from collections.abc import Callable
from dataclasses import dataclass

from deepswe.data.swemini.failure import Failure, Frame
from deepswe.data.swemini.rewrite import (
    Rewrite,
    TestContext,
    TestId,
    default_of,
    is_docstring,
    is_subtest,
    params,
    raises_item,
    statements,
)
from deepswe.data.swemini.slicing import Substitute, inline_inputs, inline_last, slice_needed
from deepswe.data.swemini.testcode import Scope, Unresolvable, dotted, free_names

MAX_LINES = 60  # a longer reproduction is not one a person would paste into an issue


@dataclass(frozen=True)
class Script:
    code: str  # the whole reproduction
    subject: str  # the expression the issue is about (its title names it)
    shown: str  # the code the issue quotes: the value, the check, or the last statements
    final: str  # "value": prints repr(subject) | "truth": prints a check | "statement"
    expects: str = ""  # the exception the test expects the last statements to raise


def _has_call(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) for n in ast.walk(node))


def _first_call(node: ast.AST) -> ast.AST:
    return next((n for n in ast.walk(node) if isinstance(n, ast.Call)), node)


def _blocks(stmt: ast.stmt) -> list[list[ast.stmt]]:
    out = [getattr(stmt, f) for f in ("body", "orelse", "finalbody") if getattr(stmt, f, None)]
    return out + [h.body for h in getattr(stmt, "handlers", [])]


@dataclass
class _Site:
    prior: list[ast.stmt]  # the statements run before the failing one, flattened
    stmt: ast.stmt  # the failing statement
    loops: list[ast.expr]  # the targets of the loops around it
    expects: str = ""  # the exception a `with pytest.raises(E)` around it expects


def _locate(func: ast.FunctionDef, line: int) -> _Site:
    site = _Site([], func, [])
    body = func.body
    while True:
        stmt = next((s for s in body if s.lineno <= line <= s.end_lineno), None)
        if stmt is None:
            raise Unresolvable("no statement at the failing line")
        site.prior += body[: body.index(stmt)]
        site.stmt = stmt
        inner = next((b for b in _blocks(stmt) if b[0].lineno <= line <= b[-1].end_lineno), None)
        if inner is None:
            return site
        if isinstance(stmt, ast.With) and len(stmt.items) == 1:
            site.expects = raises_item(stmt.items[0]) or site.expects
        if isinstance(stmt, (ast.For, ast.While)):
            if inner is not stmt.body:
                raise Unresolvable("the failing line is in a loop's else block")
            if isinstance(stmt, ast.For):
                site.loops.append(stmt.target)
        elif isinstance(stmt, ast.With) and not is_subtest(stmt):
            if not any(raises_item(i) for i in stmt.items):
                raise Unresolvable("the failing line is inside a `with` block")
        elif isinstance(stmt, ast.Try) and inner is not stmt.body:
            raise Unresolvable("the failing line is in an exception handler")
        elif not isinstance(stmt, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
            raise Unresolvable(f"the failing line is inside a {type(stmt).__name__}")
        body = inner


def _enclosing_function(tree: ast.Module, line: int) -> ast.FunctionDef:
    funcs = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef) and n.lineno <= line <= n.end_lineno
    ]
    if not funcs:
        raise Unresolvable("the failing line is not in a function")
    return max(funcs, key=lambda n: n.lineno)


def _raises_call_as_with(stmt: ast.stmt) -> ast.stmt:
    """`self.assertRaises(E, f, x)` as `with self.assertRaises(E): f(x)`."""
    call = stmt.value if isinstance(stmt, ast.Expr) else None
    if not (isinstance(call, ast.Call) and dotted(call.func) == "self.assertRaises"):
        return stmt
    if len(call.args) < 2:
        return stmt
    run = ast.Expr(ast.Call(call.args[1], call.args[2:], call.keywords))
    raises = ast.Call(call.func, call.args[:1], [])
    return ast.With([ast.withitem(raises)], [run], lineno=stmt.lineno, end_lineno=stmt.end_lineno)


def _print(expr: ast.expr) -> ast.stmt:
    return ast.Expr(ast.Call(ast.Name("print", ast.Load()), [expr], []))


def _endings(stmt: ast.stmt, failure: Failure, innermost: bool) -> list[tuple[list[ast.stmt], str]]:
    """The script's possible last statements for the failing statement `stmt` (unittest
    assertions already plain), best first, each with its kind: "value" | "truth" | "statement"."""
    exc = failure.exception
    expects = isinstance(stmt, ast.With) and len(stmt.items) == 1 and raises_item(stmt.items[0])
    if expects and (exc.startswith("Failed: DID NOT RAISE") or "not raised" in exc):
        return [(stmt.body, "statement")]
    if isinstance(stmt, ast.Assert) and innermost and exc.startswith("AssertionError"):
        test = stmt.test
        if isinstance(test, ast.Compare) and len(test.ops) == 1:
            value = ast.Call(ast.Name("repr", ast.Load()), [_side(test)], [])
            return [([_print(value)], "value"), ([_print(test)], "truth")]
        return [([_print(test)], "truth")]
    if isinstance(stmt, ast.Assert):  # it raised while computing its test
        test = stmt.test
        part = _side(test) if isinstance(test, ast.Compare) and len(test.ops) == 1 else test
        last: ast.stmt = ast.Expr(_first_call(part) if not _has_call(part) else part)
    elif isinstance(stmt, ast.For):  # iterating failed (maybe after its body changed things)
        last = stmt
    elif isinstance(stmt, (ast.If, ast.While)):
        last = ast.Expr(stmt.test)
    elif isinstance(stmt, ast.With):
        last = ast.Expr(stmt.items[0].context_expr)
    elif isinstance(stmt, ast.Return):
        last = ast.Expr(stmt.value or ast.Constant(None))
    else:
        last = stmt
    return [([last], "statement")]


def _looks_expected(node: ast.expr) -> bool:
    try:
        ast.literal_eval(node)
        return True
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pass
    return bool(re.search(r"expect|want|correct|golden|should|answer", dotted(node).lower()))


def _side(test: ast.Compare) -> ast.expr:
    """The side of a comparison holding the value under test: the one that calls something,
    else the one that does not look like the expected value."""
    left, right = test.left, test.comparators[0]
    if _has_call(left) != _has_call(right):
        return left if _has_call(left) else right
    return right if _looks_expected(left) and not _looks_expected(right) else left


def _subject(ending: list[ast.stmt], kind: str) -> tuple[str, str]:
    """(the expression the issue names, the code it shows) for a rewritten ending."""
    if kind == "value":
        side = ending[0].value.args[0].args[0]
        return ast.unparse(side), ast.unparse(side)
    if kind == "truth":
        test = ending[0].value.args[0]
        side = _side(test) if isinstance(test, ast.Compare) else test
        return ast.unparse(side), ast.unparse(test)
    shown = "\n".join(map(ast.unparse, ending))
    if len(ending) == 1 and isinstance(ending[0], ast.For):
        return ast.unparse(ending[0].iter), shown
    return ast.unparse(_first_call(ast.Module(ending, []))), shown


def _is_print(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Call)
        and dotted(stmt.value.func) == "print"
    )


def _through_helper(plain: ast.stmt, scope: Scope, inner: Frame | None) -> ast.stmt | None:
    """`h(a, b)` where the next frame in is the test helper `h` failing at an `assert` over its
    parameters (`assert_equal(expected, result)`): that assertion, with the arguments in place
    of the parameters, as if the test had written it."""
    call = plain.value if isinstance(plain, ast.Expr) else None
    if inner is None or not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)):
        return None
    try:
        func = _enclosing_function(scope.tree(inner.path), inner.line)
        site = _locate(func, inner.line)
        prior, stmt, loops = site.prior, site.stmt, site.loops
        check = statements(Rewrite(None), [stmt])[0]
    except (Unresolvable, IndexError, TypeError):
        return None
    a = func.args
    if (
        func.name != call.func.id
        or a.vararg
        or a.kwarg
        or loops
        or not isinstance(check, ast.Assert)
    ):
        return None
    if not all(_is_print(p) or is_docstring(p) for p in prior):
        return None
    params = [x.arg for x in [*a.posonlyargs, *a.args]]
    if any(isinstance(x, ast.Starred) for x in call.args) or len(call.args) > len(params):
        return None
    bound = dict(zip(params, call.args, strict=False))
    for k in call.keywords:
        if k.arg is None:
            return None
        bound[k.arg] = k.value
    for name in [*params, *(x.arg for x in a.kwonlyargs)]:
        if name not in bound and (default := default_of(func, name)) is not None:
            bound[name] = default
    if not set(free_names([check])) <= set(bound):
        return None
    return Substitute(bound).visit(copy.deepcopy(check))


def scripts_for_frame(
    scope_factory: Callable[[], Scope],
    failure: Failure,
    frame: Frame,
    test: TestId,
    inner: Frame | None = None,
) -> list[Script]:
    """The reproductions (best first) that end at `frame`'s failing statement; `inner`, the
    next test frame in, is a helper the statement called."""
    scope = scope_factory()
    tree = scope.tree(frame.path)
    if tree is None:
        return []
    try:
        func = _enclosing_function(tree, frame.line)
        site = _locate(func, frame.line)
        prior, loops, expects = site.prior, site.loops, site.expects
        stmt = _raises_call_as_with(site.stmt)
        plain = stmt if isinstance(stmt, ast.With) else statements(Rewrite(None), [stmt])[0]
    except (Unresolvable, IndexError):
        return []
    if isinstance(stmt, ast.With) and len(stmt.items) == 1:
        expects = raises_item(stmt.items[0]) or expects
    endings = _endings(plain, failure, frame is failure.frames[-1])
    helper = _through_helper(plain, scope, inner)
    if helper is not None:
        endings = _endings(helper, failure, inner is failure.frames[-1]) + endings
    out = []
    for last, kind in endings:
        for with_prior in (True, False):
            try:
                code, ending = _script(
                    scope_factory(),
                    test,
                    frame,
                    func,
                    prior if with_prior else [],
                    loops if with_prior else [],
                    last,
                )
            except (Unresolvable, RecursionError):
                continue
            if code is not None:
                subject, shown = _subject(ending, kind)
                out.append(
                    Script(code, subject, shown, kind, expects if kind == "statement" else "")
                )
    return list(dict.fromkeys(out))


def _script(
    scope: Scope,
    test: TestId,
    frame: Frame,
    func: ast.FunctionDef,
    prior: list[ast.stmt],
    loops: list[ast.expr],
    last: list[ast.stmt],
) -> tuple[str | None, list[ast.stmt]]:
    build = TestContext(scope, test, frame, func)
    rewrite = Rewrite(build)
    body = [*(build.setup() if prior else []), *statements(rewrite, prior)]
    ending = statements(rewrite, last)
    body = slice_needed(body, ending, scope.api_names(frame.path))
    assigned = {
        n.id
        for s in body
        for n in ast.walk(s)
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)
    }
    local = {
        *params(func),
        *frame.locals,
        *(n.id for t in loops for n in ast.walk(t) if isinstance(n, ast.Name)),
    }
    needed = free_names([*body, *ending], shadowing=local)
    values = build.values([n for n in needed if n in local], assigned)
    scope.resolve(frame.path, [n for n in needed if n not in local])
    values, body, ending = inline_inputs(values, body, ending)
    body, ending = inline_last(body, ending)
    blocks = [
        "\n".join(scope.imports),
        *scope.defs,
        "\n".join(map(ast.unparse, [*values, *body, *ending])),
    ]
    code = "\n\n".join(b for b in blocks if b) + "\n"
    return (code if code.count("\n") <= MAX_LINES else None), ending


def scripts(
    failure: Failure,
    nodeid: str,
    read: Callable[[str], str | None],
    api_modules: set[str],
) -> list[Script]:
    """Every reproduction this failure offers, innermost test frame first."""
    test = TestId.parse(nodeid)
    frames = failure.test_frames()
    out: list[Script] = []
    for i, frame in enumerate(frames):
        inner = frames[i - 1] if i else None
        out += scripts_for_frame(lambda: Scope(read, api_modules), failure, frame, test, inner)
    return list(dict.fromkeys(out))
