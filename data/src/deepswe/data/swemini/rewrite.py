"""Test code as plain Python a reproduction can hold: unittest assertions become `assert`s,
expected-exception blocks `try`/`except`, `self.x` what the test class gives it (a class
attribute, a helper method turned function, an attribute `setUp` sets), and each parameter its
value (the parametrize case the test id names, else the value pytest printed, else a simple
fixture, else its default). `TestContext` does it for one failing frame; what cannot be done
raises `Unresolvable`.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass

from deepswe.data.swemini.failure import Frame
from deepswe.data.swemini.testcode import Scope, Unresolvable, dotted, free_names
from deepswe.data.swemini.testparams import fixture, parametrize_case

_TRUNCATED = 200  # pytest cuts reprs near 240 characters with "...": not a value to reuse


_EQ = {
    "assertEqual",
    "assertEquals",
    "assertDictEqual",
    "assertListEqual",
    "assertTupleEqual",
    "assertSetEqual",
    "assertSequenceEqual",
    "assertMultiLineEqual",
}


_CMP = {
    "assertNotEqual": ast.NotEq,
    "assertIs": ast.Is,
    "assertIsNot": ast.IsNot,
    "assertIn": ast.In,
    "assertNotIn": ast.NotIn,
    "assertGreater": ast.Gt,
    "assertGreaterEqual": ast.GtE,
    "assertLess": ast.Lt,
    "assertLessEqual": ast.LtE,
}


@dataclass(frozen=True)
class TestId:
    path: str
    classes: list[str]
    name: str
    param: str | None

    @classmethod
    def parse(cls, nodeid: str) -> TestId:
        parts = nodeid.split("::")
        name, _, param = parts[-1].partition("[")
        return cls(parts[0], parts[1:-1], name, param[:-1] if param else None)


def raises_item(item: ast.withitem) -> str | None:
    """The exception a `with pytest.raises(E)` / `with self.assertRaises(E)` expects."""
    expr = item.context_expr
    if (
        isinstance(expr, ast.Call)
        and expr.args
        and (
            dotted(expr.func)
            in ("raises", "pytest.raises", "self.assertRaises", "self.assertRaisesRegex")
        )
    ):
        return ast.unparse(expr.args[0])
    return None


def is_subtest(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.With) and all(
        isinstance(i.context_expr, ast.Call) and dotted(i.context_expr.func) == "self.subTest"
        for i in stmt.items
    )


def _assertion(call: ast.Call) -> ast.expr | None:
    """The test of a unittest assertion call, as a plain expression."""
    name = dotted(call.func).removeprefix("self.")
    a = call.args
    if name in _EQ and len(a) >= 2:
        return ast.Compare(a[0], [ast.Eq()], [a[1]])
    if name in _CMP and len(a) >= 2:
        return ast.Compare(a[0], [_CMP[name]()], [a[1]])
    if name == "assertTrue" and a:
        return a[0]
    if name == "assertFalse" and a:
        return ast.UnaryOp(ast.Not(), a[0])
    if name in ("assertIsNone", "assertIsNotNone") and a:
        op = ast.Is() if name == "assertIsNone" else ast.IsNot()
        return ast.Compare(a[0], [op], [ast.Constant(None)])
    if name in ("assertIsInstance", "assertNotIsInstance") and len(a) >= 2:
        check = ast.Call(ast.Name("isinstance", ast.Load()), a[:2], [])
        return check if name == "assertIsInstance" else ast.UnaryOp(ast.Not(), check)
    return None


class Rewrite(ast.NodeTransformer):
    """unittest and pytest idioms to plain Python; `self.x` to what the class gives it."""

    def __init__(self, build: TestContext | None) -> None:
        self.build = build  # None: only the assertions, `self` left as it is

    def visit_Expr(self, node: ast.Expr) -> ast.AST | list[ast.stmt]:
        call = node.value
        raises = isinstance(call, ast.Call) and dotted(call.func) == "self.assertRaises"
        if raises and len(call.args) >= 2:  # the call form: assertRaises(E, f, *args)
            run = ast.Expr(ast.Call(call.args[1], call.args[2:], call.keywords))
            return self.visit(_try_except(call.args[0], [run]))
        if isinstance(call, ast.Call) and dotted(call.func).startswith("self.assert"):
            test = _assertion(call)
            if test is not None:
                return self.visit(ast.Assert(test))
        if isinstance(call, ast.Call) and dotted(call.func) == "super().setUp":
            return []
        return self.generic_visit(node)

    def visit_With(self, node: ast.With) -> ast.AST | list[ast.stmt]:
        if is_subtest(node):
            return [self.visit(s) for s in node.body]
        expects = [raises_item(i) for i in node.items]
        if len(node.items) == 1 and expects[0] and node.items[0].optional_vars is None:
            return self.visit(_try_except(node.items[0].context_expr.args[0], node.body))
        return self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        if any(a.arg == "self" for a in node.args.args):
            return node  # a method of a class the test defines: its own `self`
        return self.generic_visit(node)

    def visit_Lambda(self, node: ast.Lambda) -> ast.AST:
        if any(a.arg == "self" for a in node.args.args):
            return node
        return self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if isinstance(node.value, ast.Name) and node.value.id == "self" and self.build:
            return self.build.self_attribute(node)
        return self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id == "self" and self.build:
            raise Unresolvable("uses the test case itself")
        return node


def _try_except(exc: ast.expr, body: list[ast.stmt]) -> ast.Try:
    handler = ast.ExceptHandler(exc, None, [ast.Pass()])
    return ast.Try(body, [handler], [], [])


class TestContext:
    """One reproduction from one frame (raises Unresolvable when it cannot be written)."""

    def __init__(self, scope: Scope, test: TestId, frame: Frame, func: ast.FunctionDef) -> None:
        self.scope, self.test, self.frame, self.func = scope, test, frame, func
        cls = test.classes[-1] if len(test.classes) == 1 else ""
        self.chain = scope.class_chain(test.path, cls) if cls else []
        if test.classes and not self.chain:
            self.chain_error = f"class {'.'.join(test.classes)} is made at run time"
        else:
            self.chain_error = ""
        self.instance: set[str] = set()
        self.taken = {  # names the test function binds: a helper must not reuse them
            n.id
            for n in ast.walk(func)
            if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)
        } | set(params(func))

    # ---- the test class --------------------------------------------------------------------

    def self_attribute(self, node: ast.Attribute) -> ast.AST:
        attr = node.attr
        if attr in self.instance:
            return ast.Name(attr, node.ctx)
        if not isinstance(node.ctx, ast.Load):
            self.instance.add(attr)
            self.scope.bind_local(attr)
            return ast.Name(attr, node.ctx)
        if self.chain_error:
            raise Unresolvable(self.chain_error)
        for path, cls in self.chain:
            for stmt in cls.body:
                value = _class_value(stmt, attr)
                if value is not None:
                    return self._class_value(path, cls, attr, value)
                if isinstance(stmt, ast.FunctionDef) and stmt.name == attr:
                    return self._method(path, stmt)
        raise Unresolvable(f"self.{attr} is not set by the test class")

    def _class_value(self, path: str, cls: ast.ClassDef, attr: str, value: ast.expr) -> ast.AST:
        if dotted(value):  # `dict_class = Dict`: use the name itself
            self.scope.resolve(path, free_names([value]))
            return copy.deepcopy(value)

        name = f"{attr}_value" if attr in self.taken else attr

        def make() -> str:
            self.scope.resolve(path, free_names([value]))
            return ast.unparse(ast.Assign([ast.Name(name, ast.Store())], value, lineno=0))

        self.scope.define(name, (path, cls.lineno), make)
        return ast.Name(name, ast.Load())

    def _method(self, path: str, fn: ast.FunctionDef) -> ast.AST:
        decorators = {dotted(d) for d in fn.decorator_list}
        if decorators - {"staticmethod"}:
            raise Unresolvable(f"self.{fn.name} is a {', '.join(sorted(decorators))}")

        name = f"{fn.name}_fn" if fn.name in self.taken else fn.name

        def make() -> str:
            new = copy.deepcopy(fn)
            new.decorator_list, new.name = [], name
            if not decorators:
                if not new.args.args or new.args.args[0].arg != "self":
                    raise Unresolvable(f"self.{fn.name} takes no self")
                new.args.args = new.args.args[1:]
            new.body = statements(Rewrite(self), new.body)
            if all(isinstance(s, (ast.Pass, ast.Expr)) for s in new.body):
                raise Unresolvable(f"self.{fn.name} is abstract")
            inner = free_names([new])
            self.scope.resolve(path, [n for n in inner if n not in self.instance])
            return ast.unparse(new)

        self.scope.define(name, (path, fn.lineno), make)
        return ast.Name(name, ast.Load())

    # ---- parameters ------------------------------------------------------------------------

    def _value(self, name: str, reassigned: set[str]) -> list[ast.stmt]:
        """Statements giving parameter or local `name` its value at the failing line."""
        if self.test.param is not None and self.frame.path == self.test.path:
            case = parametrize_case(self.scope, self.frame.path, self.func, self.test.param)
            if case and name in case:
                self.scope.resolve(self.frame.path, free_names([case[name]]))
                return [ast.Assign([ast.Name(name, ast.Store())], case[name], lineno=0)]
        shown = self.frame.locals.get(name)
        if shown is not None and name not in reassigned:
            expr = self._shown_value(shown)
            if expr is not None:
                return [ast.Assign([ast.Name(name, ast.Store())], expr, lineno=0)]
        found = fixture(self.scope, self.frame.path, name)
        if found is not None and name in params(self.func):
            return self._fixture(name, *found)
        default = default_of(self.func, name)
        if default is not None and name not in reassigned:
            self.scope.resolve(self.frame.path, free_names([default]))
            return [ast.Assign([ast.Name(name, ast.Store())], default, lineno=0)]
        raise Unresolvable(f"no value for {name}")

    def _shown_value(self, text: str) -> ast.expr | None:
        """A value pytest printed, when it is Python that builds the same value."""
        if len(text) >= _TRUNCATED and "..." in text:
            return None
        try:
            expr = ast.parse(text, mode="eval").body
        except SyntaxError:
            return None
        for n in ast.walk(expr):
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name):
                self.scope.import_module(n.value.id)  # datetime.date(...): the module itself
        roots = {
            n.value.id
            for n in ast.walk(expr)
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
        }
        self.scope.resolve(self.frame.path, [n for n in free_names([expr]) if n not in roots])
        return expr

    def _fixture(self, name: str, path: str, fn: ast.FunctionDef) -> list[ast.stmt]:
        if fn.args.args:
            raise Unresolvable(f"fixture {name} takes other fixtures")
        body = [s for s in fn.body if not is_docstring(s)]
        last = body[-1] if body else None
        if isinstance(last, ast.Return) and last.value is not None:
            value = last.value
        elif isinstance(last, ast.Expr) and isinstance(last.value, ast.Yield):
            value = last.value.value or ast.Constant(None)
        else:
            raise Unresolvable(f"fixture {name} is not a plain return or yield")
        stmts = [*body[:-1], ast.Assign([ast.Name(name, ast.Store())], value, lineno=0)]
        self.scope.resolve(path, free_names(stmts))
        return stmts

    # ---- the script ------------------------------------------------------------------------

    def setup(self) -> list[ast.stmt]:
        for _, cls in self.chain:
            for stmt in cls.body:
                if isinstance(stmt, ast.FunctionDef) and stmt.name == "setUp":
                    return statements(Rewrite(self), stmt.body)
        return []

    def values(self, names: list[str], reassigned: set[str]) -> list[ast.stmt]:
        out = []
        for name in names:
            self.scope.bind_local(name)
            out += self._value(name, reassigned)
        return out


def _class_value(stmt: ast.stmt, attr: str) -> ast.expr | None:
    if isinstance(stmt, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == attr for t in stmt.targets
    ):
        return stmt.value
    if isinstance(stmt, ast.AnnAssign) and dotted(stmt.target) == attr and stmt.value:
        return stmt.value
    return None


def params(fn: ast.FunctionDef) -> list[str]:
    a = fn.args
    return [x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs] if x.arg not in ("self", "cls")]


def default_of(fn: ast.FunctionDef, name: str) -> ast.expr | None:
    a = fn.args
    positional = [*a.posonlyargs, *a.args]
    pairs = list(zip(positional[len(positional) - len(a.defaults) :], a.defaults, strict=True))
    pairs += [(k, d) for k, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is not None]
    return next((d for arg, d in pairs if arg.arg == name), None)


def is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)


def statements(rewrite: Rewrite, stmts: list[ast.stmt]) -> list[ast.stmt]:
    out: list[ast.stmt] = []
    for s in stmts:
        if is_docstring(s):
            continue
        new = rewrite.visit(copy.deepcopy(s))
        out.extend(new if isinstance(new, list) else [new])
    return out
