"""What a test's names mean outside pytest: the module-level definitions, imports, parametrize
cases, fixtures and class attributes a reproduction must carry to run on its own.

`Scope` collects, for one reproduction, the import lines and helper definitions its free names
need, resolved the way Python resolves them in the test module (a helper imported from a sibling
test module is copied from there). A name that only pytest, a test package or a dynamic class
can provide makes the reproduction impossible: `Unresolvable` says which.
"""

from __future__ import annotations

import ast
import builtins
import functools
import sys
from collections.abc import Callable
from pathlib import PurePosixPath

from deepswe.data.swemini.failure import is_test_path
from deepswe.data.swemini.statement_check import free_names

_BUILTINS = set(dir(builtins))


_TEST_BASES = {"TestCase", "object", "Protocol"}


MAX_DEPTH = 12  # helper definitions pulling in helpers, at most


class Unresolvable(Exception):
    """A name the reproduction needs has no meaning outside the test run."""


def dotted(node: ast.AST) -> str:
    """`a.b.c` for a Name/Attribute chain, else ""."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = dotted(node.value)
        return f"{head}.{node.attr}" if head else ""
    return ""


def is_fixture(node: ast.AST) -> bool:
    return isinstance(node, ast.FunctionDef) and any(
        dotted(d.func if isinstance(d, ast.Call) else d).split(".")[-1] == "fixture"
        for d in node.decorator_list
    )


class Scope:
    """The imports and definitions one reproduction needs (in dependency order)."""

    def __init__(self, read: Callable[[str], str | None], api_modules: set[str]) -> None:
        self.read = read
        self.api_modules = api_modules
        self.imports: list[str] = []
        self.defs: list[str] = []
        self._bound: dict[str, tuple[str, int]] = {}  # emitted name -> (module, line) it means
        self._trees: dict[str, ast.Module | None] = {}

    # ---- modules ---------------------------------------------------------------------------

    def tree(self, path: str) -> ast.Module | None:
        """The parsed module (shared between scopes: never modify it), None if absent."""
        if path not in self._trees:
            text = self.read(path)
            self._trees[path] = _parse(text) if text is not None else None
        return self._trees[path]

    def _module_file(self, importer: str, module: str, level: int) -> str | None:
        """The repository file of `module` as imported from `importer` (pytest puts the
        rootdir and the test file's folder on sys.path)."""
        here = PurePosixPath(importer).parent
        for _ in range(max(level - 1, 0)):
            here = here.parent
        parts = module.split(".") if module else []
        for base in [here] if level else [here, PurePosixPath(".")]:
            target = base.joinpath(*parts)
            for cand in [target / "__init__.py", *([target.with_suffix(".py")] if parts else [])]:
                if self.tree(cand.as_posix()) is not None:
                    return cand.as_posix()
        return None

    def api_names(self, path: str) -> set[str]:
        """The project's modules and the names module `path` imports from them."""
        out = set(self.api_modules)
        for node in (self.tree(path) or ast.Module([], [])).body:
            if isinstance(node, ast.Import):
                out |= {
                    (a.asname or a.name).split(".")[0]
                    for a in node.names
                    if a.name.split(".")[0] in self.api_modules
                }
            elif (
                isinstance(node, ast.ImportFrom)
                and not node.level
                and ((node.module or "").split(".")[0] in self.api_modules)
            ):
                out |= {a.asname or a.name for a in node.names}
        return out

    def _known_module(self, name: str) -> bool:
        return name in self.api_modules or name in sys.stdlib_module_names

    # ---- names -----------------------------------------------------------------------------

    def resolve(self, path: str, names: list[str], depth: int = 0) -> None:
        """Make each of `names`, as module `path` means it, available to the reproduction."""
        for name in names:
            if name in _BUILTINS:
                continue
            self._resolve_one(path, name, depth)

    def binding(self, path: str, name: str) -> ast.stmt | None:
        tree = self.tree(path)
        if tree is None:
            raise Unresolvable(f"{path} does not parse")
        for node in tree.body:
            if _binds(node, name):
                return node
        return None

    def _resolve_one(self, path: str, name: str, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise Unresolvable(f"{name}: helpers nest too deep")
        node = self.binding(path, name)
        if name in self._bound:  # already given a meaning: the same one, or a clash
            if node is not None and self._bound[name] != self._key(path, node, name):
                raise Unresolvable(f"{name} means two things")
            return
        if node is None:
            raise Unresolvable(f"{name} is not defined at module level in {path}")
        key = (path, node.lineno)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            self._import(path, node, name, depth)
            return
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            if is_fixture(node) or node.name.startswith(("test", "Test")):
                raise Unresolvable(f"{name} is test code")
            if isinstance(node, ast.ClassDef) and any(
                dotted(b).split(".")[-1] in {"TestCase"} for b in node.bases
            ):
                raise Unresolvable(f"{name} is a test case class")
        elif not isinstance(node, (ast.Assign, ast.AnnAssign)):
            raise Unresolvable(f"{name} is bound by a {type(node).__name__} in {path}")
        self._bound[name] = key
        self.resolve(path, free_names([node]), depth + 1)
        self.defs.append(ast.unparse(node))

    def _key(self, path: str, node: ast.stmt, name: str) -> tuple[str, object]:
        """What `name` bound by `node` means: an import by its text (the same import in two
        test modules is one name), anything else by where it is defined."""
        if isinstance(node, (ast.Import, ast.ImportFrom)) and not getattr(node, "level", 0):
            alias = next(a for a in node.names if (a.asname or a.name).split(".")[0] == name)
            if isinstance(node, ast.Import):
                return ("import", ast.unparse(ast.Import([alias])))
            return ("import", ast.unparse(ast.ImportFrom(node.module, [alias], 0)))
        return (path, node.lineno)

    def _import(self, path: str, node: ast.Import | ast.ImportFrom, name: str, depth: int) -> None:
        alias = next(a for a in node.names if (a.asname or a.name).split(".")[0] == name)
        if isinstance(node, ast.Import):
            if not self._known_module(alias.name.split(".")[0]):
                raise Unresolvable(f"import {alias.name}: neither the project nor the stdlib")
            self._add_import(ast.Import([alias]), name)
            return
        module = node.module or ""
        if not node.level and self._known_module(module.split(".")[0]):
            if alias.name == "*":
                raise Unresolvable(f"from {module} import *")
            self._add_import(ast.ImportFrom(module, [alias], 0), name)
            return
        source = self._module_file(path, module, node.level)
        if source is None or not is_test_path(source):
            raise Unresolvable(f"from {'.' * node.level}{module} import {alias.name}")
        if alias.asname and alias.asname != alias.name:
            raise Unresolvable(f"{alias.name} imported as {alias.asname}")
        sub = self._module_file(source, alias.name, 1) if source.endswith("__init__.py") else None
        if sub is not None and self.binding(source, alias.name) is None:
            raise Unresolvable(f"{alias.name} is a test module")
        self._resolve_one(source, alias.name, depth + 1)

    def _add_import(self, node: ast.stmt, name: str) -> None:
        line = ast.unparse(node)
        if self._bound.setdefault(name, ("import", line)) != ("import", line):
            raise Unresolvable(f"{name} means two things")
        if line not in self.imports:
            self.imports.append(line)

    def import_module(self, name: str) -> None:
        """`import name` for a module a repr names (`datetime.date(...)`)."""
        if not self._known_module(name):
            raise Unresolvable(f"{name} is not a module of the project or the stdlib")
        self._add_import(ast.Import([ast.alias(name)]), name)

    def define(self, name: str, key: tuple[str, int], make: Callable[[], str]) -> None:
        """Emit the definition `make()` builds for `name` (once; a clash is an error)."""
        if name in self._bound:
            if self._bound[name] != key:
                raise Unresolvable(f"{name} means two things")
            return
        self._bound[name] = key
        self.defs.append(make())

    def bind_local(self, name: str) -> None:
        """`name` is assigned by the reproduction itself: a helper of that name would clash."""
        if name in self._bound and self._bound[name] != ("<local>", 0):
            raise Unresolvable(f"{name} means two things")
        self._bound[name] = ("<local>", 0)

    # ---- classes ---------------------------------------------------------------------------

    def class_chain(self, path: str, name: str) -> list[tuple[str, ast.ClassDef]]:
        """The test class `name` of module `path` and its bases found in the repository,
        depth first, left to right (Python's MRO for the simple hierarchies tests use)."""
        out: list[tuple[str, ast.ClassDef]] = []

        def visit(p: str, cls: ast.ClassDef) -> None:
            if any(c is cls for _, c in out):
                return
            out.append((p, cls))
            for base in cls.bases:
                found = self._class(p, dotted(base))
                if found is not None:
                    visit(*found)

        start = self._class(path, name)
        if start is not None:
            visit(*start)
        return out

    def _class(self, path: str, name: str) -> tuple[str, ast.ClassDef] | None:
        if not name or name.split(".")[-1] in _TEST_BASES or "." in name:
            return None
        node = self.binding(path, name)
        if isinstance(node, ast.ClassDef):
            return path, node
        if isinstance(node, ast.ImportFrom) and (
            node.level or not self._known_module((node.module or "").split(".")[0])
        ):
            source = self._module_file(path, node.module or "", node.level)
            if source is not None:
                return self._class(source, name)
        return None


@functools.lru_cache(maxsize=64)
def _parse(text: str) -> ast.Module | None:
    try:
        return ast.parse(text)
    except SyntaxError:
        return None


def _binds(node: ast.stmt, name: str) -> bool:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return node.name == name
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return any((a.asname or a.name).split(".")[0] == name for a in node.names)
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        targets = [node.target]
    elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For)):
        return any(
            isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load)
            for n in ast.walk(node)
        )
    else:
        return False
    return any(isinstance(n, ast.Name) and n.id == name for t in targets for n in ast.walk(t))
