"""The map as code (DESIGN.md, "Layers"): imports point one way, no cycles, no private names
across modules, and each distribution declares exactly the deepswe distributions it imports.

Every import counts, those inside functions too: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

import pytest

# tomllib is 3.11+; on 3.10 the pyproject check needs tomli (the other checks need nothing)
tomllib = pytest.importorskip("tomllib" if sys.version_info >= (3, 11) else "tomli")
ROOT = Path(__file__).resolve().parents[1]
# Subpackage -> (layer, distribution folder). data <- env <- eval <- verify <- train <- reproduce:
# a package imports only packages of lower layers (train uses all four below it; reproduce, the
# `make reproduce` pipeline, may use train too; nothing imports reproduce).
LAYERS = {
    "data": (0, "data"),
    "env": (1, "environments"),
    "eval": (2, "evaluation"),
    "verify": (3, "verifiers"),
    "train": (4, "training"),
    "reproduce": (5, "reproduce"),
}


def _modules() -> dict[str, Path]:
    out = {}
    for pkg, (_, folder) in LAYERS.items():
        for f in sorted((ROOT / folder / "src" / "deepswe" / pkg).rglob("*.py")):
            parts = f.relative_to(ROOT / folder / "src").with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out[name] = f
    return out


MODULES = _modules()


def _owner(name: str) -> str | None:
    """The longest known module that `name` (a module or module.attr) lives in."""
    parts = name.split(".")
    while parts:
        if ".".join(parts) in MODULES:
            return ".".join(parts)
        parts.pop()
    return None


def _imports(name: str) -> list[tuple[int, str, str]]:
    """(line, imported module, imported attribute or "") of every deepswe import in `name`."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, "") for a in node.names if a.name.startswith("deepswe.")]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            if base.startswith("deepswe."):
                out += [(node.lineno, base, a.name) for a in node.names]
    return out


def _edges() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = defaultdict(set)
    for name in MODULES:
        for _, module, attr in _imports(name):
            target = _owner(f"{module}.{attr}") if attr else _owner(module)
            if target is None or target == name:
                continue
            edges[name].add(target)
            parts = target.split(".")  # importing a.b.c runs a.b's __init__ first
            for i in range(2, len(parts)):
                parent = ".".join(parts[:i])
                if parent in MODULES and not name.startswith(parent + "."):
                    edges[name].add(parent)
    return edges


def test_imports_point_down_the_layers():
    wrong = []
    for name in MODULES:
        pkg = name.split(".")[1]
        for line, module, _ in _imports(name):
            other = module.split(".")[1]
            if other == pkg or other not in LAYERS:
                continue
            if LAYERS[other][0] > LAYERS[pkg][0]:
                wrong.append(
                    f"{MODULES[name].relative_to(ROOT)}:{line}: deepswe.{pkg} imports {module}"
                )
    assert not wrong, "imports against the layers:\n" + "\n".join(wrong)


def test_no_private_name_is_imported_from_another_module():
    private = []
    for name in MODULES:
        for line, module, attr in _imports(name):
            names = [attr, *module.split(".")[2:]]
            if any(n.startswith("_") and not n.startswith("__") for n in names):
                private.append(f"{MODULES[name].relative_to(ROOT)}:{line}: {module} {attr}")
    assert not private, "private names imported across modules:\n" + "\n".join(private)


def test_no_import_cycles():
    edges, index, low, stack, on, cycles = _edges(), {}, {}, [], set(), []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(MODULES):
        if v not in index:
            visit(v)
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_each_distribution_declares_exactly_the_deepswe_distributions_it_imports():
    used: dict[str, set[str]] = defaultdict(set)
    for name in MODULES:
        pkg = name.split(".")[1]
        for _, module, _ in _imports(name):
            other = module.split(".")[1]
            if other != pkg and other in LAYERS:
                used[pkg].add(other)
    problems = []
    dist_of = {pkg: f"deepswe-{pkg}" for pkg in LAYERS}
    for pkg, (_, folder) in LAYERS.items():
        project = tomllib.loads((ROOT / folder / "pyproject.toml").read_text())["project"]
        declared = {
            d.split(";")[0].split("[")[0].split(">")[0].split("=")[0].strip()
            for d in project.get("dependencies", [])
        }
        want = {dist_of[o] for o in used[pkg]}
        have = {d for d in declared if d in dist_of.values()}
        if want - have:
            problems.append(f"{folder}/pyproject.toml does not declare {sorted(want - have)}")
        if have - want:
            problems.append(f"{folder}/pyproject.toml declares {sorted(have - want)}, unused")
    assert not problems, "\n".join(problems)


def _console_scripts() -> dict[str, str]:
    """Each console script -> the package of the distribution that ships it."""
    out = {}
    for pkg, (_, folder) in LAYERS.items():
        project = tomllib.loads((ROOT / folder / "pyproject.toml").read_text())["project"]
        out.update({script: pkg for script in project.get("scripts", {})})
    return out


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring nodes of `tree` (prose, not commands)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def test_no_command_of_a_higher_layer_is_run():
    """Running another distribution's command in a subprocess is a dependency the imports do not
    show: a string that is a higher layer's console script, the program of a command line
    (`cli_bin("deepswe-train")`, `["deepswe-train", "judge", ...]`), is refused like an import of
    that layer. Prose naming a command (help texts, messages) is not a call and is left alone."""
    scripts = _console_scripts()
    wrong = []
    for name, path in MODULES.items():
        pkg = name.split(".")[1]
        tree = ast.parse(path.read_text())
        prose = _docstrings(tree)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
                continue
            program = node.value.strip()
            if id(node) in prose or program not in scripts:
                continue
            if LAYERS[scripts[program]][0] > LAYERS[pkg][0]:
                where = f"{path.relative_to(ROOT)}:{node.lineno}"
                wrong.append(f"{where}: deepswe.{pkg} runs {program} (deepswe.{scripts[program]})")
    assert not wrong, "commands run against the layers:\n" + "\n".join(wrong)
