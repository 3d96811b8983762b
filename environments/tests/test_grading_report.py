"""Root's side of the launchers' report: its MAC checked, its canaries judged (report.py), and the
canaries planted into a graded file's source (canaries.py). Pure functions, no container."""

from __future__ import annotations

import ast
import hashlib
import hmac
import subprocess
import sys

import pytest

from deepswe.data.swemini.failure import short
from deepswe.env.grading.canaries import Canaries, plant
from deepswe.env.grading.report import STARTED, judge_report, read_report

KEY = b"k" * 32
HEADER = "=" * 27 + " short test summary info " + "=" * 28


def report(
    lines: list[str],
    code: int = 1,
    facts: str = "collected=5,unreported=0,sealed=1",
    key: bytes = KEY,
) -> bytes:
    """A report as the vault writes it: each line, then the closing line with their MAC."""
    body = "".join(f"{x}\n" for x in [STARTED, HEADER, *lines]).encode()
    head = f"deepswe-grader: pytest.main returned {code} {facts}".encode()
    mac = hmac.new(key, body + head, hashlib.sha256).hexdigest()
    return body + b"=" * 10 + b" " + head + b" " + mac.encode() + b" " + b"=" * 10 + b"\n"


CANARIES = Canaries(
    path="tests/test_x.py",
    names={"pass": "test_alpha", "fail": "test_beta", "error": "test_gamma"},
)
GOOD = [
    "PASSED tests/test_x.py::test_alpha",
    "FAILED tests/test_x.py::test_beta",
    "ERROR tests/test_x.py::test_gamma",
]


def test_a_report_whose_mac_holds_is_read_to_its_closing_line() -> None:
    raw = report(["PASSED tests/test_x.py::test_a", *GOOD])
    rep = read_report(raw + b"PASSED late::line\n", KEY)
    assert rep.started and rep.authentic and rep.returned == 1
    assert rep.facts == {"collected": 5, "unreported": 0, "sealed": 1}
    assert "late::line" not in rep.summary and rep.tampered == []
    judged = judge_report(rep, CANARIES, 1)
    assert judged.tampered == [] and judged.rejected == ""
    assert judged.section.splitlines()[-1] == "PASSED tests/test_x.py::test_a"


@pytest.mark.parametrize(
    "forge",
    [
        lambda raw: raw.replace(
            b"FAILED tests/test_x.py::test_a", b"PASSED tests/test_x.py::test_a"
        ),
        lambda raw: raw.replace(b"FAILED tests/test_x.py::test_a\n", b""),
        lambda raw: raw.replace(HEADER.encode() + b"\n", HEADER.encode() + b"\nPASSED a::b\n"),
    ],
    ids=["a line rewritten", "a line dropped", "a line added"],
)
def test_a_report_changed_on_its_way_is_tampered(forge) -> None:
    raw = forge(report(["FAILED tests/test_x.py::test_a", *GOOD]))
    rep = read_report(raw, KEY)
    assert not rep.authentic and any("MAC" in t for t in rep.tampered)
    assert judge_report(rep, CANARIES, 1).tampered


def test_a_report_closed_with_another_key_or_none_at_all() -> None:
    forged = read_report(report(["PASSED tests/test_x.py::test_a", *GOOD], key=b"x" * 32), KEY)
    assert forged.returned == 1 and not forged.authentic and forged.tampered
    cut = report(["PASSED tests/test_x.py::test_a", *GOOD]).rsplit(b"=" * 10 + b" deep", 1)[0]
    rep = read_report(cut, KEY)
    assert rep.returned is None and rep.tampered == []
    assert "ended before pytest returned" in judge_report(rep, CANARIES, 0).rejected


@pytest.mark.parametrize(
    ("canaries", "problem"),
    [
        (GOOD, None),
        ([GOOD[0], GOOD[1].replace("FAILED", "PASSED"), GOOD[2]], "fail canary was PASSED"),
        ([GOOD[0], GOOD[1].replace("FAILED", "ERROR"), GOOD[2]], None),  # a copy may error
        ([GOOD[0], GOOD[1], GOOD[2].replace("ERROR", "PASSED")], "error canary was PASSED"),
        (GOOD[1:], "pass canary was not reported"),
        (GOOD[:1] + GOOD[2:], "fail canary was not reported"),
        ([*GOOD, "XPASS tests/test_x.py::test_beta[1]"], "fail canary was FAILED/XPASS"),
    ],
)
def test_a_canary_out_of_place_is_tampering(canaries: list[str], problem: str | None) -> None:
    rep = read_report(report(["PASSED tests/test_x.py::test_a", *canaries]), KEY)
    found = judge_report(rep, CANARIES, 1).tampered
    assert (problem is None and found == []) or any(problem in p for p in found), found


def test_missing_canaries_are_held_only_where_the_run_would_otherwise_resolve() -> None:
    """A run with a real failure (or cut short) may not have reached them; a fail canary that
    passed is always held."""
    failing = read_report(report(["FAILED tests/test_x.py::test_a"]), KEY)
    assert judge_report(failing, CANARIES, 1).tampered == []
    flipped = read_report(
        report(["FAILED tests/test_x.py::test_a", GOOD[1].replace("FAIL", "PASS")]), KEY
    )
    assert judge_report(flipped, CANARIES, 1).tampered


def test_a_run_that_left_collected_tests_unreported_is_rejected() -> None:
    rep = read_report(
        report(
            ["PASSED tests/test_x.py::test_a", *GOOD], facts="collected=9,unreported=4,sealed=1"
        ),
        KEY,
    )
    assert "4 collected test(s) were never reported" in judge_report(rep, CANARIES, 1).rejected


SOURCE = '''import pytest
from calc import add


def test_add():
    """adds"""
    result = add(2, 3)
    if result == 0:
        return
    assert result == 5


@pytest.mark.parametrize("a", [1, 2])
def test_param(a):
    assert add(a, 0) == a


class TestOps:
    def test_method(self):
        assert add(1, 1) == 2
'''


@pytest.mark.parametrize(
    "graded",
    [
        "tests/test_x.py::test_add",
        "tests/test_x.py::test_param[1]",
        "tests/test_x.py::TestOps::test_method",
    ],
)
def test_the_fail_canary_is_a_copy_of_a_graded_test_that_always_fails(graded: str) -> None:
    text, canaries = plant(SOURCE, "tests/test_x.py", [graded], "pytest", "3")
    tree = ast.parse(text)
    names = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    assert set(canaries.names.values()) <= names and names - set(canaries.names.values()) == {
        "test_add",
        "test_param",
        "test_method",
        "_run",
    }
    # The copy runs the graded test's body as a nested function (its locals gone before the
    # failure) and ends in a failing assertion whatever the body does.
    fail = next(n for n in ast.walk(tree) if getattr(n, "name", "") == canaries.names["fail"])
    assert isinstance(fail.body[0], ast.FunctionDef) and fail.body[0].name == "_run"
    assert isinstance(fail.body[1], ast.Try) and fail.body[1].finalbody
    assert "add(" in ast.unparse(fail)
    # What the original file held is still there, line for line.
    assert all(line in text.splitlines() for line in SOURCE.splitlines())
    assert "canary" not in text and "deepswe" not in text


def test_the_copy_fails_when_run_and_the_others_behave(tmp_path) -> None:
    """Run for real (pytest on the planted file): fail FAILED, pass PASSED, error ERROR, with the
    bug and without it."""
    for fixed in (False, True):
        folder = tmp_path / str(fixed)
        folder.mkdir()
        body = "a + b" if fixed else "a - b"
        (folder / "calc.py").write_text(f"def add(a, b):\n    return {body}\n")
        text, canaries = plant(SOURCE, "test_x.py", ["test_x.py::test_add"], "pytest", "5")
        (folder / "test_x.py").write_text(text)
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", "test_x.py"],
            cwd=folder,
            capture_output=True,
            text=True,
        )
        outcomes = dict(
            reversed(line.split(" ")[:2])
            for line in run.stdout.splitlines()
            if line.startswith(("PASSED ", "FAILED ", "ERROR "))
        )
        roles = {canaries.role_of(k): v for k, v in outcomes.items() if canaries.role_of(k)}
        assert roles == {"pass": "PASSED", "fail": "FAILED", "error": "ERROR"}, run.stdout
        assert outcomes["test_x.py::test_add"] == ("PASSED" if fixed else "FAILED")


def test_unittest_canaries_are_methods_of_the_graded_tests_class() -> None:
    source = (
        "import unittest\n\n\nclass AddTest(unittest.TestCase):\n"
        "    def test_add(self):\n        self.assertEqual(1 + 1, 2)\n"
    )
    text, canaries = plant(
        source, "r2e_tests/test_1.py", ["test_1::AddTest::test_add"], "unittest", "1"
    )
    assert set(canaries.owners.values()) == {"AddTest"}
    assert canaries.role_of(f"test_1::AddTest::{canaries.names['error']}") == "error"
    assert canaries.role_of(f"test_1::Other::{canaries.names['error']}") is None
    ast.parse(text)


def test_a_file_that_does_not_parse_gets_none() -> None:
    assert plant("def test_x(:\n", "t.py", ["t.py::test_x"], "pytest", "1") is None


def test_the_fail_copys_last_assertion_is_never_true() -> None:
    """Regression: `assert len('clamp') == 2 * 2 + 1` held, so the fail canary passed and two
    honest fixes were graded tampered; every seed's tail must be false."""
    source = "def test_add():\n    assert 1\n\n\ndef test_clamp_ops():\n    assert 1\n"
    for seed in range(500):
        text, _ = plant(source, "t.py", ["t.py::test_add"], "pytest", str(seed))
        lines = text.splitlines()
        tail = lines[lines.index("    finally:") + 2].strip()  # after the garbage collection
        assert eval(tail.removeprefix("assert ")) is False, (seed, tail)


def _report(last: str | None = None, types: list[str] = (), exception: str | None = None):
    """What the reproduction launcher's vault reports (bin/deepswe_repro.py)."""
    from deepswe.env.grading.reproduction import Result

    return Result(last, bool(types), exception, list(types))


@pytest.mark.parametrize(
    ("fixed", "expected", "output", "ok"),
    [
        ("runs", "", _report("x"), True),
        ("runs", "", _report(None, ["KeyError", "LookupError"], "KeyError: 1"), False),
        ("prints", "5", _report("5"), True),
        ("prints", "5", _report("-1"), False),
        ("prints", short("'" + "ab" * 400 + "'"), _report("'" + "ab" * 400 + "'"), True),  # cut
        ("prints", "<A>", _report("<A at 0x7f00>"), True),  # addresses dropped, as synthesis did
        ("raises", "ValueError", _report(None, ["ValueError", "Exception"], "ValueError: x"), True),
        ("raises", "ValueError", _report("ok"), False),
        ("raises", "ValueError", _report(None, ["KeyError"], "KeyError: 1"), False),
        ("runs", "", None, False),  # no authentic report
    ],
)
def test_the_reproduction_is_judged_by_what_the_fix_does(fixed, expected, output, ok) -> None:
    from deepswe.data.task import Reproduction
    from deepswe.env.grading.reproduction import judge

    why = judge(Reproduction(code="x = 1\n", fixed=fixed, expected=expected), output)
    assert (why == "") is ok, why


REGRESSIONS = {
    # cachetools: the graded test is the last method of its class, and the module-level
    # canaries went in at the same line, above the copy, which became a nested function
    "a copy at the end of its class": (
        "import unittest\n\n\nclass TTLCacheTest(unittest.TestCase):\n"
        "    def test_ttl(self):\n        self.assertEqual(1, 1)\n\n"
        "    def test_ttl_iter_modify(self):\n        self.assertEqual(2, 2)\n",
        "t.py::TTLCacheTest::test_ttl_iter_modify",
    ),
    # toolz: the graded test's body starts with a decorated function
    "a body that starts with a decorator": (
        "def curry(f):\n    return f\n\n\ndef test_curry_call():\n    @curry\n"
        "    def add(x, y):\n        return x + y\n    assert add(1, 2) == 3\n",
        "t.py::test_curry_call",
    ),
    # toolz: the word `a` made the pass canary's variable `as`, a keyword
    "words that make keywords": ("def test_a():\n    assert 1\n", "t.py::test_a"),
}


@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_every_canary_is_planted_where_its_runner_collects_it(name) -> None:
    source, graded = REGRESSIONS[name]
    for seed in range(60):
        made = plant(source, "t.py", [graded], "pytest", str(seed))
        assert made is not None, seed
        tree = ast.parse(made[0])
        top = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        methods = {
            m.name
            for n in tree.body
            if isinstance(n, ast.ClassDef)
            for m in n.body
            if isinstance(m, ast.FunctionDef)
        }
        fail, owner = made[1].names["fail"], made[1].owners["fail"]
        assert fail in (methods if owner else top), (seed, made[0])
        assert {made[1].names["pass"], made[1].names["error"]} <= top


def test_no_canary_takes_the_name_of_a_graded_test_the_file_only_inherits() -> None:
    """cachetools: TTLCacheTest inherits test_deepcopy from a mixin in tests/__init__.py; a
    canary named so overrode the graded test, which then went missing."""
    source = (
        "from . import Mixin\n\n\ndef deepcopy_of(x):\n    return x\n\n\n"
        "class TTLCacheTest(Mixin):\n    def test_copy(self):\n        pass\n"
    )
    graded = ["t.py::TTLCacheTest::test_copy", "t.py::TTLCacheTest::test_deepcopy"]
    for seed in range(200):
        _, made = plant(source, "t.py", graded, "pytest", str(seed))
        assert "test_deepcopy" not in made.names.values(), seed


@pytest.mark.parametrize(
    ("command", "picks"),
    [
        # R2E-Gym's aiohttp command: `::` in an environment variable, not a node id
        (
            "PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' .venv/bin/python -W "
            "ignore -m pytest -rA r2e_tests",
            False,
        ),
        ("python -W ignore::DeprecationWarning -m pytest -rA tests", False),
        ("python -m pytest -rA -p no:cacheprovider -o addopts= tests/test_x.py", False),
        ("pytest -rA tests/test_x.py::test_a", True),
        ("python -m pytest -k 'a or b' tests", True),
        ("python -m pytest -kfoo tests", True),
    ],
)
def test_canaries_are_left_out_only_where_pytest_picks_tests_by_name(command, picks) -> None:
    from deepswe.env.grading.canaries import picks_by_name

    assert picks_by_name(command) is picks


R2E_SOURCE = (
    "import pytest\n\n\nclass TestX:\n    def test_y(self):\n        pass\n\n\n"
    "@pytest.mark.parametrize('v', [0.1])\ndef test_foo(v):\n    pass\n"
)


@pytest.mark.parametrize(
    "test_id",
    # R2E-Gym's ids name no file, and a parameter may hold a dot or a range-like `p-0`
    ["test_foo[pyloop-0.1]", "TestX.test_y", "test_1::TestX::test_y", "test_foo[p-0]"],
)
def test_a_graded_test_is_found_in_the_hidden_files_from_r2e_gyms_ids(test_id) -> None:
    from deepswe.env.grading.canaries import target

    path, ids = target([test_id], ["r2e_tests"], {"test_1.py": R2E_SOURCE}, "r2e_tests")
    assert path == "r2e_tests/test_1.py"
    assert plant(R2E_SOURCE, path, ids, "pytest", "1") is not None
