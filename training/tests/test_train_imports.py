"""The layer rules of deepswe.train, read from its source (imports inside functions included):
no `_private` name crosses a module boundary, no two modules import each other (directly or
round a loop), and the entry points (trainer, cli) are imported by nothing below them."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "deepswe.train"


def modules() -> dict[str, Path]:
    out = {}
    for path in sorted((SRC / "deepswe" / "train").rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _type_checking_only(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def imports(path: Path) -> list[tuple[str, str]]:
    """(module, name) of every `from deepswe... import name` in the file, at any depth but
    under `if TYPE_CHECKING:`; `import deepswe.x` gives (deepswe.x, "")."""
    out: list[tuple[str, str]] = []

    def visit(node: ast.AST) -> None:
        if _type_checking_only(node):
            return
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("deepswe."):
            out.extend((node.module, a.name) for a in node.names)
        elif isinstance(node, ast.Import):
            out.extend((a.name, "") for a in node.names if a.name.startswith("deepswe."))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text()))
    return out


def graph() -> dict[str, set[str]]:
    """Module -> the deepswe.train modules it imports (`from pkg import mod` counts as mod)."""
    mods = modules()
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for m, path in mods.items():
        for module, name in imports(path):
            target = f"{module}.{name}" if f"{module}.{name}" in mods else module
            if target in mods and target != m:
                edges[m].add(target)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_the_source_tree_is_found():
    mods = modules()
    assert {f"{PACKAGE}.trainer", f"{PACKAGE}.cluster.ray_runtime", f"{PACKAGE}.cli"} <= set(mods)


def test_no_private_name_is_imported_from_another_module():
    """Regression (issue 15): cluster.ray_runtime and cluster.ranks imported the trainer's
    private `_build`, and ranks imported ray_runtime's `_ray`."""
    bad = [
        f"{m}: from {module} import {name}"
        for m, path in modules().items()
        for module, name in imports(path)
        if name.startswith("_") and module != m
    ]
    assert bad == []


def test_no_import_cycle_between_modules():
    """Regression (issue 15): trainer -> cluster.ray_runtime -> cluster.ranks -> trainer, each
    leg an import inside a function."""
    assert cycles(graph()) == []


def test_nothing_below_the_entry_points_imports_them():
    """The trainer imports the cluster, never the reverse; only the CLI imports the trainer."""
    edges = graph()
    users = {m for m, targets in edges.items() if f"{PACKAGE}.trainer" in targets}
    assert users <= {f"{PACKAGE}.cli"}
    assert not any(f"{PACKAGE}.cli" in targets for targets in edges.values())
