"""Test infrastructure: the files of a repository that configure or extend the test process.

A patch that changes one of these changes how the tests run, not what the code does:
- `conftest.py` anywhere (hooks, fixtures and plugins pytest loads before any test);
- pytest's own configuration files (`pytest.ini`, `.pytest.ini`, `pytest.toml`, `.pytest.toml`),
  and the pytest sections of `setup.cfg` (`[tool:pytest]`), `tox.ini` (`[pytest]`) and
  `pyproject.toml` (`[tool.pytest...]`);
- what the interpreter runs at start-up: `sitecustomize.py`, `usercustomize.py`, `*.pth`;
- installed-package metadata (`*.egg-info/`, `*.dist-info/`: entry points register plugins);
- a new module that shadows one the environment already has, or one the repository has in
  another folder on sys.path (a copy of `src/pkg` added at the root; every file of a new
  package that shadows), found in the sandbox (see `bin/deepswe_shadow.py`), and a pytest
  plugin loaded from a changed file (found by the grader's launcher during the run).

Strict grading puts each such path back to the start snapshot before the tests run, unless
the task's own gold patch touches it; SWE-bench's rules leave them and the grade flags them.
"""

from __future__ import annotations

import configparser
import shlex
import sys
from pathlib import PurePosixPath

from deepswe.env.grading.owned import SCRIPT_PYTHON_FUNCTION, SHADOW_PROBE
from deepswe.env.grading.patch_check import write_paths
from deepswe.env.sandbox import Sandbox
from deepswe.env.workspace import START_REF

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

PYTEST_CONFIG_FILES = frozenset({"pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml"})
STARTUP_FILES = frozenset({"sitecustomize.py", "usercustomize.py"})
METADATA_SUFFIXES = (".egg-info", ".dist-info")
# Files that hold a pytest section among others: only a change to that section counts.
SECTIONED_FILES = frozenset({"setup.cfg", "tox.ini", "pyproject.toml"})
# Files a module can be imported from (a new package is its `__init__.py`).
MODULE_SUFFIXES = (".py", ".pyc", ".so", ".pyd")
# Where the shadow probe and the paths it reads are written in the sandbox.
PROBE_DIR = "/tmp/deepswe-grader-probe"


def infra_by_name(path: str) -> str | None:
    """Why `path` is test infrastructure by its name alone, or None."""
    p = PurePosixPath(path)
    if p.name == "conftest.py":
        return "conftest"
    if p.name in PYTEST_CONFIG_FILES:
        return "pytest configuration"
    if p.name in STARTUP_FILES or p.suffix == ".pth":
        return "interpreter start-up"
    # Any case: importlib.metadata finds `X.DIST-INFO` as readily as `X.dist-info`.
    if any(part.lower().endswith(METADATA_SUFFIXES) for part in p.parts[:-1]):
        return "package metadata"
    return None


def pytest_section(name: str, text: str | None) -> object:
    """The pytest configuration `text` (a file called `name`) holds, comparable with ==; the
    whole text when it does not parse (a broken file is a changed section)."""
    if text is None:
        return None
    try:
        if name == "pyproject.toml":
            return tomllib.loads(text).get("tool", {}).get("pytest")
        parser = configparser.RawConfigParser(strict=False, interpolation=None)
        parser.read_string(text)
        section = "tool:pytest" if name == "setup.cfg" else "pytest"
        return dict(parser.items(section)) if parser.has_section(section) else None
    except (tomllib.TOMLDecodeError, configparser.Error, AttributeError):
        return ("unparsed", text)


def section_changed(name: str, before: str | None, after: str | None) -> bool:
    """Whether the pytest section of a sectioned file differs between two versions."""
    return pytest_section(name, before) != pytest_section(name, after)


# --- in the sandbox ---------------------------------------------------------------------------


def scan_test_infra(
    sandbox: Sandbox, changed: dict[str, str], python: str, workdir: str = "/testbed"
) -> dict[str, str]:
    """Which of `changed` ({path: git status letter}, the patch's changes as git lists them,
    `deepswe.env.workspace.changed_paths`) are test infrastructure: {path: why}.

    `python` is the interpreter the tests run with: a shadowed module is one it can import
    from anywhere but the new file's own folder (the environment, or another of the
    repository's folders on its sys.path: an editable install's `src/`).
    """
    found = {p: why for p in changed if (why := infra_by_name(p))}
    for path in (p for p in changed if PurePosixPath(p).name in SECTIONED_FILES):
        before, after = _versions(sandbox, path, workdir)
        if section_changed(PurePosixPath(path).name, before, after):
            found[path] = "pytest section of " + PurePosixPath(path).name
    added = [p for p, s in changed.items() if s == "A" and p not in found]
    for path in _shadowing(sandbox, python, added, workdir):
        found[path] = "shadows an installed module"
    return dict(sorted(found.items()))


def _versions(sandbox: Sandbox, path: str, workdir: str) -> tuple[str | None, str | None]:
    """`path` at the start snapshot and now (None where it is not a file). The path reaches
    the commands through a file, never their command line (it is the patch's)."""
    listed = f"{PROBE_DIR}/path"
    write_paths(sandbox, listed, [path])
    read = f"IFS= read -r -d '' p < {shlex.quote(listed)} || exit 1\n"
    before = sandbox.run(f'{read}git show "{START_REF}:$p"', cwd=workdir, timeout=60)
    after = sandbox.run(f'{read}test -f "$p" && cat -- "$p"', cwd=workdir, timeout=60)
    return (
        before.stdout if before.exit_code == 0 else None,
        after.stdout if after.exit_code == 0 else None,
    )


def _shadowing(sandbox: Sandbox, python: str, added: list[str], workdir: str) -> list[str]:
    """The added files that shadow a module `python` could import from elsewhere: from the
    environment, or from another of the repository's folders on sys.path (a copy of `src/pkg`
    added at the root); for a new package, every added file under its folder. A probe that
    cannot run (no such interpreter) finds none: the launcher still keeps pytest itself safe.

    The probe runs as root, isolated (`-I`): no file the patch wrote (a sitecustomize.py on
    PYTHONPATH) runs; the paths reach it through a file, never its command line."""
    if not any(p.endswith(MODULE_SUFFIXES) for p in added):
        return []
    probe, listed = f"{PROBE_DIR}/deepswe_shadow.py", f"{PROBE_DIR}/added"
    sandbox.write_file(probe, SHADOW_PROBE.read_text())
    write_paths(sandbox, listed, added)
    run = f"{python} -I {probe} {shlex.quote(workdir)} --paths-from {shlex.quote(listed)}"
    # In the repository: the interpreter may be named relative to it (R2E-Gym's .venv/bin/python);
    # the probe keeps the repository off its own sys.path.
    r = sandbox.run(SCRIPT_PYTHON_FUNCTION + run, cwd=workdir, timeout=120)
    if r.timed_out or r.exit_code != 0:
        return []
    wanted = set(added)
    return [line for line in r.stdout.splitlines() if line in wanted]


__all__ = [
    "PYTEST_CONFIG_FILES",
    "SECTIONED_FILES",
    "infra_by_name",
    "pytest_section",
    "scan_test_infra",
    "section_changed",
]
