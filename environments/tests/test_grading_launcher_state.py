"""The pytest launcher's own state is within the code under test's reach; the vault's is not.

The launcher's checks are closures of its plugin's methods, reachable from the plugin object
pytest's plugin manager holds (or from the launcher's frames), and what they judge with (its
`Trust`, the `check` each report calls, the seal module's classes and helpers) can be mutated or
rebound from there by package code alone, with no audit event. Each attack below leaves the bug
in place and, with one rebinding more, replaces `TestReport.from_item_and_call` under a trusted
file name (tampered on its own, the last test), flipping only the graded test's failure; each
passed with the canaries honest until the vault kept its own copy of the watched callables and
its own Trust (a private class over a private copy of the seal's globals) and checked them
itself at each pass and at the end (deepswe_seal.py, "watch").
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_grading_launcher import launch, make_repo, tampered  # noqa: E402

# The shared second half: pytest's report made to pass the graded test alone, by a function
# compiled under pytest's own file name.
FLIP = """
def _dsw_flip():
    import importlib
    reports = importlib.import_module("_py" + "test.reports")
    src = (
        "def from_item_and_call(cls, item, call):\\n"
        "    rep = _real(item, call)\\n"
        "    if rep.when == 'call' and '::test_add' in rep.nodeid:\\n"
        "        rep.outcome = 'passed'; rep.longrepr = None\\n"
        "    return rep\\n"
    )
    ns = {"_real": reports.TestReport.from_item_and_call}
    exec(compile(src, reports.__file__, "exec"), ns)
    reports.TestReport.from_item_and_call = classmethod(ns["from_item_and_call"])
"""

ATTACKS = {
    # The launcher's Trust, found among its main frame's locals, told that every code object is
    # its file's and none the repository's.
    "trust-mutated": FLIP
    + """
import sys as _dsw_sys
_dsw_f = _dsw_sys._getframe()
while _dsw_f is not None:
    _dsw_t = _dsw_f.f_locals.get("trust")
    if type(_dsw_t).__name__ == "Trust":
        _dsw_t.from_its_file = lambda code: True
        _dsw_t.repository_code = lambda code: False
        _dsw_flip()
        break
    _dsw_f = _dsw_f.f_back
""",
    # Every closure cell named check or finish, reached from the grader's plugin object, made a
    # no-op: no report ever compares the watched callables again.
    "checks-disabled": FLIP
    + """
import sys as _dsw_sys


def _dsw_disarm():
    f, config = _dsw_sys._getframe(), None
    while f is not None and config is None:
        config = next((v for v in f.f_locals.values() if type(v).__name__ == "Config"), None)
        f = f.f_back
    plugins = [p for p in config.pluginmanager.get_plugins() if type(p).__name__ == "Grader"]
    todo = [getattr(type(p), n) for p in plugins for n in dir(type(p)) if n.startswith("pytest_")]
    seen = set()
    while todo:
        fn = todo.pop()
        if id(fn) in seen or not getattr(fn, "__closure__", None):
            continue
        seen.add(id(fn))
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
            try:
                value = cell.cell_contents
            except ValueError:
                continue
            if name in ("check", "finish"):
                cell.cell_contents = lambda *a, **k: None
            elif callable(value) and getattr(value, "__closure__", None):
                todo.append(value)


_dsw_disarm()
_dsw_flip()
""",
    # The seal's Trust class and helpers, found in sys.modules, told the same: every code object
    # its file's, none the repository's (a class attribute store raises no audit event).
    "seal-class-rebound": FLIP
    + """
import sys as _dsw_sys

for _dsw_name, _dsw_mod in list(_dsw_sys.modules.items()):
    if _dsw_name.endswith("_seal") and hasattr(_dsw_mod, "Trust"):
        _dsw_mod.Trust.from_its_file = lambda self, code: True
        _dsw_mod.Trust.repository_code = lambda self, code: False
        _dsw_mod._walk = lambda code, found: None
_dsw_flip()
""",
}


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_the_launchers_own_state_rebound_by_the_code_under_test(tmp_path: Path, name: str) -> None:
    run = launch(make_repo(tmp_path / "repo", ATTACKS[name]))
    assert any("seen by the vault" in why for why in run.tampered), (run.statuses, run.tampered)


def test_each_attack_needs_its_rebinding(tmp_path: Path) -> None:
    """The flip alone, without touching the launcher's state, is tampered."""
    run = launch(make_repo(tmp_path / "repo", FLIP + "\n_dsw_flip()\n"))
    assert tampered(run), run.statuses


def test_a_watched_functions_defaults_cannot_be_stored(tmp_path: Path) -> None:
    """The checks no longer read a watched function's code and defaults (each read is an audit
    event): the seal refuses storing them instead, whoever's file the function is in."""
    init = (
        "import importlib\n"
        "runner = importlib.import_module('_py' + 'test.runner')\n"
        "try:\n"
        "    runner.call_and_report.__defaults__ = (False,)\n"
        "except PermissionError:\n"
        "    pass\n"
    )
    run = launch(make_repo(tmp_path / "repo", init))
    assert any("__defaults__ of call_and_report" in why for why in run.tampered), run.tampered


# Found at the stop, open: the shared standard library rebound. os.path.realpath made to place
# the package's own file inside pytest's folder, the launcher's watched lists emptied in place
# (the cells the vault watches keep the same lists), and a
# report function defined in the package itself: the vault's Trust, which resolves paths through
# the shared os.path, takes it for pytest's. The fix is the kernel's resolution of a path
# (/proc/self/fd of an O_PATH descriptor), with nothing the process can rebind in between.
REALPATH_POISONED = (
    ATTACKS["checks-disabled"]
    .replace("_dsw_flip()\n", "")
    .replace(
        """            if name in ("check", "finish"):
                cell.cell_contents = lambda *a, **k: None""",
        """            if name in ("watched", "late") and isinstance(value, list):
                value.clear()  # the same list: no closure the vault watches changes""",
    )
    + """
import importlib, os, posixpath

_dsw_reports = importlib.import_module("_py" + "test.reports")
_dsw_rp, _dsw_here = posixpath.realpath, os.path.abspath(__file__)


def _dsw_realpath(path, *args, **kwargs):
    if os.path.abspath(str(path)) == _dsw_here:
        return _dsw_rp(_dsw_reports.__file__)
    return _dsw_rp(path, *args, **kwargs)


posixpath.realpath = _dsw_realpath
_dsw_real = _dsw_reports.TestReport.from_item_and_call


def _dsw_report(cls, item, call):
    rep = _dsw_real(item, call)
    if rep.when == "call" and "::test_add" in rep.nodeid:
        rep.outcome, rep.longrepr = "passed", None
    return rep


_dsw_reports.TestReport.from_item_and_call = classmethod(_dsw_report)
"""
)


@pytest.mark.xfail(strict=True, reason="open: the seal's Trust resolves paths through os.path")
def test_the_shared_os_path_rebound(tmp_path: Path) -> None:
    run = launch(make_repo(tmp_path / "repo", REALPATH_POISONED))
    assert tampered(run) or run.statuses["tests/test_ops.py::test_add"] == "FAILED", run.statuses
