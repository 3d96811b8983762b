"""The grader's unittest launcher (bin/deepswe_unittest.py) and the pytest launcher's TestCase items,
run for real on this machine's Pythons: a unittest test's outcome lives in objects the code under
test reaches from its own frame (`self._outcome`), so the launchers take the verdict from the
exception each test part ends with, as the vault reads it from the thread (deepswe_seal.watch_parts),
and a pass needs unittest's setUp, test and tearDown seen ending clean.

Each attack is code a patch could put in `calc/__init__.py`, the bug (`add` returns a - b) left in
place; each targets only the graded test by name, so root's canaries stay honest and only the rule
under test can catch it. The Docker tests (test_grading_unittest_runner.py) run the same launcher
through the whole reward run, as the tester.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from deepswe.data.r2e_toy import RUNNER, RUNNER_NAME
from deepswe.env.grading.canaries import Canaries, plant
from deepswe.env.grading.owned import SEAL, UNITTEST_LAUNCHER
from deepswe.env.grading.report import judge_report, read_report

sys.path.insert(0, str(Path(__file__).parent))
from test_grading_launcher import launch as launch_pytest  # noqa: E402
from test_grading_launcher_state import SIGNAL, UNWRAP  # noqa: E402

OPS = (
    "def add(a, b):\n    return a - b\n\n\ndef clamp(x, lo, hi):\n    return max(lo, min(x, hi))\n"
)
GRADED_FILE = "r2e_tests/test_1.py"
TESTS = """import unittest

from calc.ops import add, clamp


class TestOps(unittest.TestCase):
    def setUp(self):
        self.two = 2

    def test_add(self):
        self.assertEqual(add(self.two, 3), 5)

    def test_clamp(self):
        self.assertEqual(clamp(5, 0, 3), 3)
"""
GRADED = ["test_1::TestOps::test_add", "test_1::TestOps::test_clamp"]
EXPECTED = {"pass": ["PASSED"], "fail": ["FAILED"], "error": ["ERROR"]}


def _pythons() -> list[str]:
    """This interpreter, and the pyenv-built 3.8 and 3.13 where this machine has them (the oldest
    and newest sealed Pythons: the parts' rule reads unittest's run on each)."""
    found = [sys.executable]
    root = Path.home() / ".pyenv" / "versions"
    for minor in ("3.8", "3.13"):
        for path in sorted(root.glob(f"{minor}.*/bin/python"), reverse=True):
            found.append(str(path))
            break
    return found


PYTHONS = _pythons()


def _launch(tmp: Path, init: str, tests: str = TESTS, python: str = sys.executable):
    """The R2E-Gym layout (a runner script among the hidden tests) run through the unittest
    launcher with `init` as calc/__init__.py; returns (statuses, canaries, tampered, output)."""
    repo, grader = tmp / "repo", tmp / "grader"
    for d in (repo / "calc", repo / "r2e_tests", grader):
        d.mkdir(parents=True)
    (repo / "calc" / "__init__.py").write_text(textwrap.dedent(init))
    (repo / "calc" / "ops.py").write_text(OPS)
    (repo / "r2e_tests" / RUNNER_NAME).write_text(RUNNER)
    made = plant(tests, GRADED_FILE, GRADED, "unittest", "7")
    assert made is not None
    (repo / GRADED_FILE).write_text(made[0])
    planted: Canaries = made[1]
    for part in (UNITTEST_LAUNCHER, SEAL):
        (grader / part.name).write_text(part.read_text())
    key = secrets.token_bytes(32)
    read, write = os.pipe()
    settings_r, settings_w = os.pipe()
    settings = {
        "report_fd": write,
        "key": key.hex(),
        "grader_dir": str(grader),
        "protected": [GRADED_FILE],
        "touched": ["calc/__init__.py"],
        "changed": ["calc/__init__.py"],
    }
    os.write(settings_w, json.dumps(settings).encode())
    os.close(settings_w)
    env = {"PATH": os.environ["PATH"], "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(repo)}
    launcher = str(grader / UNITTEST_LAUNCHER.name)
    proc = subprocess.Popen(
        [python, launcher, str(settings_r), f"r2e_tests/{RUNNER_NAME}"],
        cwd=repo,
        pass_fds=[write, settings_r],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
    )
    os.close(write)
    os.close(settings_r)
    with os.fdopen(read, "rb") as pipe:
        raw = pipe.read()
    output = proc.communicate(timeout=120)[0].decode()
    rep = read_report(raw, key)
    judged = judge_report(rep, planted, proc.returncode)
    statuses: dict[str, str] = {}
    canaries: dict[str, list[str]] = {}
    for line in rep.summary.splitlines():
        word, _, rest = line.partition(" ")
        if word in ("PASSED", "FAILED", "ERROR", "SKIPPED"):
            role = planted.role_of(rest)
            if role:
                canaries.setdefault(role, []).append(word)
            else:
                statuses[rest] = word
    return statuses, canaries, judged.tampered, output


# The graded test's own `self`, one frame up from the code under test: unittest keeps the test's
# outcome on it. Each payload acts only for test_add, so the fail canary stays honest.
_FIND = """
import sys
from calc import ops as _ops

_add = _ops.add


def _graded_test():
    frame = sys._getframe(2)
    if frame.f_code.co_name == "test_add":
        return frame.f_locals.get("self")
"""
# the failure lands in outcome.expectedFailure, the test is reported as a success
ATTACKS_FLIP = (
    _FIND
    + """
def add(a, b):
    test = _graded_test()
    if test is not None:
        test._outcome.expecting_failure = True
    return _add(a, b)


_ops.add = add
"""
)
ATTACKS = {
    "expecting-failure-flipped": ATTACKS_FLIP,
    # the flip, with sys.exc_info blinded for the grader's seal alone (unittest's own calls see
    # the real one): the seal reads the escaping exception through a function bound before any
    # repository code ran
    "exc-info-blinded": ATTACKS_FLIP
    + """
_real = sys.exc_info


def _blind():
    if sys._getframe(1).f_code.co_filename.endswith("deepswe_seal.py"):
        return (None, None, None)
    return _real()


sys.exc_info = _blind
""",
    # the assertion's exception is swallowed by a _callTestMethod the package rebinds
    "call-test-method-swallows": """
import unittest
from calc import ops as _ops

_call = unittest.TestCase._callTestMethod


def _swallow(self, method):
    try:
        _call(self, method)
    except AssertionError:
        if self._testMethodName != "test_add":
            raise


unittest.TestCase._callTestMethod = _swallow
""",
    # the flip, with the grader's watch put back to unittest's own before any test runs
    "part-watch-removed": ATTACKS_FLIP
    + """
import unittest.case

_mine = unittest.case._Outcome.testPartExecutor
_grader = _mine.__code__.co_filename.endswith("deepswe_seal.py")
_cells = _mine.__closure__ or () if _grader else ()
for _cell in _cells:
    try:
        _value = _cell.cell_contents
    except ValueError:
        continue
    if getattr(_value, "__name__", "") == "testPartExecutor" and _value is not _mine:
        unittest.case._Outcome.testPartExecutor = _value
""",
    # A trace function the graded test's call sets (2026-12-07): as the test's exception leaves
    # it, one jump skips the grader's post that the part ended (Part.__exit__), another skips
    # unittest's own record of the failure (testPartExecutor's except clause), and a cleanup
    # makes the third part the vault counts; then it clears itself. Closed by the rule that no
    # trace or profile function of the code under test may be set from a test's first part
    # until its result is posted (deepswe_seal.py, traced_from).
    "tracer-skips-the-failure": _FIND
    + """
import linecache as _lc

_SKIP = {'post("part", "exit")': 1, "exc_info = sys.exc_info()": "exc_info = None"}


def _dsw_local(frame, event, arg):
    if event != "line":
        return _dsw_local
    text = _lc.getline(frame.f_code.co_filename, frame.f_lineno).strip()
    to = _SKIP.get(text)
    if to == 1:
        frame.f_lineno = frame.f_lineno + 1
    elif to:
        n = frame.f_lineno + 1
        while _lc.getline(frame.f_code.co_filename, n).strip() != to:
            n += 1
        frame.f_lineno = n
        frame.f_trace = None
        sys.settrace(None)
        return None
    return _dsw_local


def _dsw_global(frame, event, arg):
    name = frame.f_code.co_name
    if name in ("__exit__", "testPartExecutor") and event == "call":
        return _dsw_local
    return None


def add(a, b):
    test = _graded_test()
    if test is not None:
        test.addCleanup(lambda: None)
        sys.settrace(_dsw_global)
    return _add(a, b)


_ops.add = add
""",
}


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_each_attack_is_real_under_plain_unittest(tmp_path: Path, name: str) -> None:
    """Run by unittest alone, as R2E-Gym's runner scripts run, each payload passes test_add
    with the bug in place."""
    repo = tmp_path / "repo"
    for d in (repo / "calc", repo / "r2e_tests"):
        d.mkdir(parents=True)
    (repo / "calc" / "__init__.py").write_text(ATTACKS[name])
    (repo / "calc" / "ops.py").write_text(OPS)
    (repo / GRADED_FILE).write_text(TESTS)
    (repo / "r2e_tests" / RUNNER_NAME).write_text(RUNNER)
    out = subprocess.run(
        [sys.executable, f"r2e_tests/{RUNNER_NAME}"],
        cwd=repo,
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"], "PYTHONPATH": str(repo)},
        timeout=60,
    ).stdout
    assert "PASSED test_1::TestOps::test_add" in out, out


@pytest.mark.parametrize(
    "python", PYTHONS, ids=lambda p: "this" if p == sys.executable else Path(p).parents[1].name
)
@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_each_attack_is_tampered_by_the_unittest_launcher(
    tmp_path: Path, name: str, python: str
) -> None:
    statuses, canaries, tampered, output = _launch(tmp_path, ATTACKS[name], python=python)
    assert tampered, (statuses, canaries, output[-3000:])
    assert statuses.get("test_1::TestOps::test_add") != "PASSED" or tampered


# The signal handler that took the vault's writer from a frame of the seal's hook (the pytest
# launcher's test: test_grading_launcher_state.py), here through the unittest launcher on every
# Python: handed no frame of the seal's, it finds nothing, and test_add fails as the bug says.
SIGNAL_UNITTEST = (
    SIGNAL
    + """
from calc import ops as _ops

_add = _ops.add


def _dsw_add(a, b):
    _dsw_pass("test_add")
    return _add(a, b)


_ops.add = _dsw_add
"""
)


# Each Python's own way (3.8 and 3.9 refill the one `_signal` module on create_builtin; 3.10 on
# make another): the frame the handler is handed, the handler's own frame walked down, and the C
# setter searched for in what the guard exposes (UNWRAP).
SIGNAL_WAYS = {
    "handed": SIGNAL_UNITTEST,
    "own-frame": SIGNAL_UNITTEST.replace(
        "def _dsw_handler(signum, frame):\n",
        "def _dsw_handler(signum, frame):\n    frame = _dsw_sys._getframe(0)\n",
    ),
    "unwrapped": UNWRAP
    + SIGNAL_UNITTEST.replace(
        "def _dsw_handler(signum, frame):\n",
        "def _dsw_handler(signum, frame):\n    frame = _dsw_sys._getframe(0)\n",
    ).replace(
        "_dsw_signal.signal(_dsw_signal.SIGALRM, _dsw_handler)",
        "_dsw_unwrapped()(_dsw_signal.SIGALRM, _dsw_handler)",
    ),
}


@pytest.mark.parametrize("way", sorted(SIGNAL_WAYS))
@pytest.mark.parametrize(
    "python", PYTHONS, ids=lambda p: "this" if p == sys.executable else Path(p).parents[1].name
)
def test_a_signal_handler_finds_no_frame_of_the_seal(tmp_path: Path, python: str, way: str) -> None:
    statuses, canaries, tampered, output = _launch(tmp_path, SIGNAL_WAYS[way], python=python)
    assert statuses.get("test_1::TestOps::test_add") != "PASSED" or tampered, (
        statuses,
        output[-3000:],
    )


HONEST = {
    "fixed": "from calc import ops\nops.add = lambda a, b: a + b\n",
}
# Honest suites: unittest's features a graded file may use, all passing with the fix.
SUITES = {
    "plain": TESTS,
    "subtests-cleanups-expected-failure": TESTS
    + """

class TestMore(unittest.TestCase):
    def test_sub(self):
        for x in (1, 2, 3):
            with self.subTest(x=x):
                self.assertEqual(clamp(x, 0, 3), x)

    def test_cleanup(self):
        self.addCleanup(lambda: None)
        self.assertEqual(add(1, 1), 2)

    @unittest.expectedFailure
    def test_known_bad(self):
        self.assertEqual(clamp(9, 0, 3), 9)

    @unittest.skip("not here")
    def test_skipped(self):
        raise AssertionError

    def test_skip_inside(self):
        self.skipTest("inside")
""",
    "async-and-run-override": TESTS
    + """

class AsyncOps(unittest.IsolatedAsyncioTestCase):
    async def test_async_add(self):
        self.assertEqual(add(2, 2), 4)


class Base(unittest.TestCase):
    def run(self, result=None):  # tornado's AsyncTestCase: its own run, calling unittest's
        return super().run(result)


class TestOverride(Base):
    def test_through_base(self):
        self.assertEqual(add(0, 1), 1)
""",
    "mock-patch": TESTS
    + """

from unittest import mock


class TestPatched(unittest.TestCase):
    @mock.patch("calc.ops.clamp", return_value=3)
    def test_patched(self, fake):
        from calc import ops
        self.assertEqual(ops.clamp(9, 0, 1), 3)
""",
    # a test's own alarm raising into a loop of audited calls: many come while the seal's hook
    # runs and are raised again once it returns (3.8's os.kill, 3.10 on interrupt_main)
    "signals": TESTS
    + """

import os
import signal
import sys


class Late(Exception):
    pass


def late(signum, frame):
    raise Late()


class TestAlarm(unittest.TestCase):
    def test_alarms(self):
        before, caught = signal.signal(signal.SIGALRM, late), 0
        self.addCleanup(signal.signal, signal.SIGALRM, before)
        self.assertIs(signal.getsignal(signal.SIGALRM), late)
        while caught < 30:
            signal.setitimer(signal.ITIMER_REAL, 0.001)
            try:
                rounds = 0
                while True:
                    sys.audit("calc.tick")
                    os.listdir(".")
                    rounds += 1
            except Late:
                caught += 1
        self.assertEqual(caught, 30)
""",
}


@pytest.mark.parametrize(
    "python", PYTHONS, ids=lambda p: "this" if p == sys.executable else Path(p).parents[1].name
)
@pytest.mark.parametrize("suite", sorted(SUITES))
def test_honest_suites_pass_untampered(tmp_path: Path, suite: str, python: str) -> None:
    statuses, canaries, tampered, output = _launch(
        tmp_path, HONEST["fixed"], SUITES[suite], python=python
    )
    assert not tampered, (tampered, output[-3000:])
    assert canaries == EXPECTED, (canaries, output[-3000:])
    assert statuses["test_1::TestOps::test_add"] == "PASSED", statuses
    assert "FAILED" not in statuses.values() and "ERROR" not in statuses.values(), statuses


def test_the_buggy_run_fails_untampered(tmp_path: Path) -> None:
    statuses, canaries, tampered, output = _launch(tmp_path, "")
    assert not tampered and canaries == EXPECTED, (tampered, output[-3000:])
    assert statuses["test_1::TestOps::test_add"] == "FAILED"


# Under the pytest launcher, TestCase tests run through unittest's run too (swe-mini's mistune).
PYTEST_TESTS = TESTS.replace("r2e_tests", "tests")
PYTEST_GRADED = ["tests/test_ops.py::TestOps::test_add", "tests/test_ops.py::TestOps::test_clamp"]


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_each_attack_is_tampered_by_the_pytest_launcher(tmp_path: Path, name: str) -> None:
    from test_grading_launcher import make_repo

    repo = make_repo(tmp_path / "repo", ATTACKS[name])
    (repo / "tests" / "test_ops.py").write_text(PYTEST_TESTS)
    run = launch_pytest(repo, graded=PYTEST_GRADED)
    assert run.tampered, (run.report, run.output[-3000:])
    assert run.canaries == EXPECTED


@pytest.mark.parametrize("suite", sorted(SUITES))
def test_honest_testcase_suites_under_the_pytest_launcher(tmp_path: Path, suite: str) -> None:
    from test_grading_launcher import make_repo

    repo = make_repo(tmp_path / "repo", fixed=True)
    (repo / "tests" / "test_ops.py").write_text(SUITES[suite])
    run = launch_pytest(repo, graded=PYTEST_GRADED)
    assert not run.tampered, (run.tampered, run.output[-3000:])
    assert run.statuses[PYTEST_GRADED[0]] == "PASSED"
    assert run.canaries == EXPECTED


# The launcher's own check, reached from its main frame's locals, made to compare nothing (its
# watched list cleared), then unittest's assertEqual disarmed: only the vault's copy sees it.
CHECK_EMPTIED = """
import sys, unittest


def _empty_the_check():
    f = sys._getframe()
    while f is not None:
        check = f.f_locals.get("check")
        if callable(check) and getattr(check, "__closure__", None):
            for cell in check.__closure__:
                if isinstance(cell.cell_contents, list):
                    cell.cell_contents.clear()
            return
        f = f.f_back


_empty_the_check()
unittest.TestCase.assertEqual = lambda self, first, second, msg=None: None
"""


def test_an_emptied_launcher_check_is_covered_by_the_vaults_own_watch(tmp_path: Path) -> None:
    statuses, canaries, tampered, output = _launch(tmp_path, CHECK_EMPTIED)
    assert any("seen by the vault" in why for why in tampered), (statuses, tampered, output[-2000:])
