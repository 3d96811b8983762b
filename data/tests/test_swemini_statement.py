"""Problem statements from real pytest failures: what was called, with which inputs, what came
back, what was expected; never the test's name or file; the same seed gives the same text."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from deepswe.data.swemini.failure import observe
from deepswe.data.swemini.runner import failure_key, run_pytest
from deepswe.data.swemini.statement import write_statement

LIB = """
def shout(word, times=1):
    return word.lower() * times


def parse_int(text):
    return None


def must_be_positive(n):
    return n


class Box:
    def size(self):
        return len(self)
"""
TESTS = """
import unittest

import pytest

import mylib
from mylib import Box, parse_int


@pytest.mark.parametrize(("word", "expected"), [("hey", "HEY")])
def test_zz_shout_param(word, expected):
    assert mylib.shout(word) == expected


def test_zz_parse():
    assert parse_int("12") + 1 == 13


def test_zz_raise():
    with pytest.raises(ValueError):
        mylib.must_be_positive(-3)


def test_zz_box():
    assert Box().size() == 0


class ZzCase(unittest.TestCase):
    def test_zz_unittest(self):
        self.assertEqual(mylib.shout("a", 2), "AA")
"""


@pytest.fixture(scope="module")
def failures(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("proj")
    (root / "mylib.py").write_text(LIB)
    (root / "test_zz_mylib.py").write_text(TESTS)
    run = run_pytest(Path(sys.executable), root, ".", ["test_zz_mylib.py"])
    assert len(run.statuses) == 5 and set(run.statuses.values()) == {"FAILED"}
    return {nodeid: run.failures[failure_key(nodeid)] for nodeid in run.statuses}


def _obs(failures, name):
    (section,) = [s for n, s in failures.items() if name in n]
    return observe(section, TESTS)


def test_a_wrong_value_names_the_call_its_inputs_and_both_values(failures):
    obs = _obs(failures, "shout_param")
    assert (obs.kind, obs.call, obs.actual, obs.expected) == (
        "compare",
        "mylib.shout('hey')",
        "'hey'",
        "'HEY'",
    )


def test_a_crash_names_the_call_and_the_exception(failures):
    obs = _obs(failures, "parse")
    assert (obs.kind, obs.call) == ("raises", 'parse_int("12")')
    assert obs.exception.startswith("TypeError: unsupported operand")
    box = _obs(failures, "box")
    assert box.kind == "raises" and box.call == "Box().size()" and "TypeError" in box.exception


def test_a_missing_exception_and_unittest_asserts(failures):
    obs = _obs(failures, "zz_raise")
    assert (obs.kind, obs.call, obs.expected) == (
        "no_raise",
        "mylib.must_be_positive(-3)",
        "ValueError",
    )
    ut = _obs(failures, "unittest")
    assert (ut.kind, ut.call, ut.actual, ut.expected) == (
        "compare",
        'mylib.shout("a", 2)',
        "'aa'",
        '"AA"',
    )


def test_statements_are_deterministic_and_never_name_the_test(failures):
    for nodeid, section in failures.items():
        obs = observe(section, TESTS)
        text = write_statement(obs, TESTS, "mylib", "1.0", f"0:{nodeid}")
        assert text == write_statement(obs, TESTS, "mylib", "1.0", f"0:{nodeid}")
        assert "zz" not in text.lower() and "test_" not in text
        assert "mylib 1.0" in text or "mylib (1.0)" in text
        assert "```python" in text
    obs = _obs(failures, "shout_param")
    text = write_statement(obs, TESTS, "mylib", "1.0", "0:x")
    assert "import mylib\n" in text and "print(repr(mylib.shout('hey')))" in text
    assert "from mylib import Box" not in text  # only the imports the snippet uses
    many = {write_statement(obs, TESTS, "mylib", "1.0", f"{seed}:x") for seed in range(12)}
    assert len(many) > 3  # templates vary with the seed
