"""A test's parameters as pytest gives them: the `@pytest.mark.parametrize` case a test id names,
and the fixture a parameter names, read from the test's source."""

from __future__ import annotations

import ast
import re
from collections import Counter
from itertools import product
from pathlib import PurePosixPath

from deepswe.data.swemini.testcode import Scope, dotted, is_fixture


def _argnames(node: ast.expr) -> list[str] | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [x.strip() for x in node.value.split(",") if x.strip()]
    if isinstance(node, (ast.List, ast.Tuple)) and all(
        isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts
    ):
        return [e.value for e in node.elts]
    return None


def _idval(node: ast.expr, argname: str, index: int, defined: set[str]) -> str:
    """A regex for pytest's id of one parameter value (`_idval`): exact for literals and
    module-level functions or classes (their __name__), `argname<index>` for an object built
    by a call, any text for a value only known when the module runs (`TIME_BAS + TZ`)."""
    try:
        value = ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        if isinstance(node, ast.Name) and node.id in defined:
            return re.escape(node.id)
        if isinstance(node, (ast.Name, ast.BinOp, ast.Attribute, ast.Subscript, ast.JoinedStr)):
            return ".+?"  # may well be a string: its text is the id
        return re.escape(f"{argname}{index}")  # a constructed object
    if isinstance(value, str):
        return re.escape(value.encode("unicode_escape").decode("ascii"))
    if isinstance(value, bytes):
        return re.escape(value.decode("ascii", "backslashreplace"))
    if value is None or isinstance(value, (bool, int, float, complex)):
        return re.escape(str(value))
    return re.escape(f"{argname}{index}")


def _dedupe(ids: list[str]) -> list[str]:
    """pytest 8's suffixes for ids that collide (exact ids only)."""
    counts = Counter(ids)
    seen: Counter = Counter()
    out = []
    for i in ids:
        if counts[i] > 1 and ".+?" not in i:
            out.append(f"{i}{'_' if i and i[-1].isdigit() else ''}{seen[i]}")
            seen[i] += 1
        else:
            out.append(i)
    return out


def _argvalues(scope: Scope, path: str, node: ast.expr) -> list[ast.expr] | None:
    if isinstance(node, ast.Name):
        bound = scope.binding(path, node.id)
        node = bound.value if isinstance(bound, ast.Assign) else None
    if isinstance(node, (ast.List, ast.Tuple)):
        return list(node.elts)
    if isinstance(node, ast.Call) and dotted(node.func) == "range" and not node.keywords:
        try:
            return [ast.Constant(v) for v in range(*(ast.literal_eval(a) for a in node.args))]
        except (ValueError, TypeError):
            return None
    return None


def parametrize_case(
    scope: Scope, path: str, func: ast.FunctionDef, param_id: str
) -> dict[str, ast.expr] | None:
    """The argument expressions of the parametrized case whose id is `param_id`, read from
    the test's `@pytest.mark.parametrize` decorators; None when they cannot be matched."""
    tree = scope.tree(path)
    defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    sets = []  # per decorator, innermost first: [(id, {name: expr})]
    for deco in reversed(func.decorator_list):
        if not (isinstance(deco, ast.Call) and dotted(deco.func).endswith("mark.parametrize")):
            continue
        if (
            len(deco.args) < 2
            or deco.keywords
            and any(k.arg not in ("ids",) for k in deco.keywords)
        ):
            return None
        names, values = _argnames(deco.args[0]), _argvalues(scope, path, deco.args[1])
        if names is None or values is None:
            return None
        explicit = next((k.value for k in deco.keywords if k.arg == "ids"), None)
        if explicit is not None and not (
            isinstance(explicit, (ast.List, ast.Tuple))
            and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in explicit.elts)
        ):
            return None
        cases, ids = [], []
        for i, elt in enumerate(values):
            own_id = None
            if isinstance(elt, ast.Call) and dotted(elt.func).endswith("param"):
                own_id = next(
                    (
                        re.escape(k.value.value)
                        for k in elt.keywords
                        if k.arg == "id" and isinstance(k.value, ast.Constant)
                    ),
                    None,
                )
                args = list(elt.args)
            elif len(names) == 1:
                args = [elt]
            elif isinstance(elt, (ast.Tuple, ast.List)):
                args = list(elt.elts)
            else:
                return None
            if len(args) != len(names) or any(isinstance(a, ast.Starred) for a in args):
                return None
            cases.append(dict(zip(names, args, strict=True)))
            if explicit is not None and i < len(explicit.elts):
                ids.append(re.escape(explicit.elts[i].value))
            else:
                ids.append(
                    own_id
                    or "-".join(_idval(a, n, i, defined) for n, a in zip(names, args, strict=True))
                )
        sets.append(list(zip(_dedupe(ids), cases, strict=True)))
    if not sets:
        return None
    matches = [
        combo
        for combo in product(*sets)
        if re.fullmatch("-".join(i for i, _ in combo), param_id, flags=re.S)
    ]
    if len(matches) != 1:
        return None
    out: dict[str, ast.expr] = {}
    for _, case in matches[0]:
        out.update(case)
    return out


def fixture(scope: Scope, path: str, name: str) -> tuple[str, ast.FunctionDef] | None:
    """The fixture `name` visible from test module `path`: the module's own, then conftest.py
    files from its folder up to the repository root."""
    folders = [PurePosixPath(path).parent, *PurePosixPath(path).parent.parents]
    for where in [path, *[(f / "conftest.py").as_posix().removeprefix("./") for f in folders]]:
        tree = scope.tree(where)
        for node in tree.body if tree else []:
            if isinstance(node, ast.FunctionDef) and node.name == name and is_fixture(node):
                return where, node
    return None
