"""Problem statements written from real pytest failures of a small made-up project: the failure
is read (frames, locals), a reproduction is built from the test code (parameters, unittest
classes, helpers, expected exceptions), run with the bug and with the fix, and written as an
issue that passes every statement check, never names the test, and is the same for the same
seed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from deepswe.data.swemini.attempt import Attempt
from deepswe.data.swemini.failure import read_failure
from deepswe.data.swemini.issue import write_issue
from deepswe.data.swemini.runner import failure_key, run_pytest
from deepswe.data.swemini.snippet import run_snippet
from deepswe.data.swemini.statement_check import check_runs, check_static, parse_statement

FIXED = """
def shout(word, times=1):
    return word.upper() * times


def parse_int(text):
    return int(text)


def must_be_positive(n):
    if n < 0:
        raise ValueError("negative")
    return n


class Box:
    def __init__(self, items=()):
        self.items = list(items)

    def size(self):
        return len(self.items)
"""
BUGGY = (
    FIXED.replace("word.upper()", "word.lower()")
    .replace("return int(text)", "return None")
    .replace("if n < 0:", "if n < -10:")
    .replace("len(self.items)", "len(self.items) - 1")
)
TESTS = """
import unittest

import pytest

import mylib
from mylib import Box, parse_int

WORDS = [("hey", "HEY")]


def check_shout(word, expected):
    assert mylib.shout(word) == expected


@pytest.mark.parametrize(("word", "expected"), WORDS)
def test_zz_shout_param(word, expected):
    assert mylib.shout(word) == expected


def test_zz_helper():
    check_shout("yo", "YO")


def test_zz_parse():
    assert parse_int("12") + 1 == 13


def test_zz_raise():
    with pytest.raises(ValueError):
        mylib.must_be_positive(-3)


class ZzCase(unittest.TestCase):
    box_class = Box

    def test_zz_box(self):
        box = self.box_class([1, 2])
        box.items.append(3)
        self.assertEqual(box.size(), 3)
"""
API = {"mylib"}


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("proj")
    fixed = tmp_path_factory.mktemp("fixed")
    (root / "mylib.py").write_text(BUGGY)
    (fixed / "mylib.py").write_text(FIXED)
    (root / "test_zz_mylib.py").write_text(TESTS)
    run = run_pytest(Path(sys.executable), root, ".", ["test_zz_mylib.py"])
    assert len(run.statuses) == 5 and set(run.statuses.values()) == {"FAILED"}
    sections = {n: run.failures[failure_key(n)] for n in run.statuses}
    return {"root": root, "fixed": fixed, "sections": sections}


def _read(root: Path):
    return lambda rel: (root / rel).read_text() if (root / rel).is_file() else None


def _run(project: dict):
    def run(code: str, at_base: bool, hash_seed: str):
        where = project["root"] if at_base else project["fixed"]
        return run_snippet(Path(sys.executable), where, code, hash_seed)

    return run


def _statement(project: dict, name: str, seed: str = "0:x") -> str:
    (nodeid,) = [n for n in project["sections"] if name in n]
    attempt = Attempt(
        "accepted", [nodeid], [], ["test_zz_mylib.py"], {nodeid: project["sections"][nodeid]}
    )
    written = write_issue(attempt, _read(project["root"]), API, _run(project), "mylib", "1.0", seed)
    assert written.statement is not None, written.tried
    return written.statement


def test_a_failure_section_gives_its_frames_and_locals(project):
    (section,) = [s for n, s in project["sections"].items() if "helper" in n]
    failure = read_failure(section)
    assert [f.path for f in failure.test_frames()] == ["test_zz_mylib.py"] * 2
    inner, outer = failure.test_frames()
    assert inner.locals == {"expected": "'YO'", "word": "'yo'"} and outer.locals == {}
    assert failure.exception.startswith("AssertionError: assert 'yo' == 'YO'")


@pytest.mark.parametrize(
    ("test", "kind", "lines"),
    [
        # the parametrize case the test id names, written into the call
        ("shout_param", "compare", ["import mylib", "print(repr(mylib.shout('hey')))"]),
        # an assertion helper: its check with the caller's arguments
        ("helper", "compare", ["print(repr(mylib.shout('yo')))"]),
        ("parse", "raises", ["from mylib import parse_int", "parse_int('12') + 1"]),
        ("zz_raise", "no_raise", ["mylib.must_be_positive(-3)"]),
        # a unittest class attribute and its earlier steps; assertEqual as a value
        (
            "box",
            "compare",
            ["box = Box([1, 2])", "box.items.append(3)", "print(repr(box.size()))"],
        ),
    ],
)
def test_each_failure_becomes_an_issue_that_passes_every_check(project, test, kind, lines):
    text = _statement(project, test)
    st = parse_statement(text)
    assert st.claim.kind == kind
    for line in lines:
        assert line in st.reproduction.splitlines(), st.reproduction
    assert all(v is None for v in check_static(text, API).values())
    at_base = run_snippet(Path(sys.executable), project["root"], st.reproduction)
    with_gold = run_snippet(Path(sys.executable), project["fixed"], st.reproduction)
    assert all(v is None for v in check_runs(text, at_base, with_gold).values())
    assert "zz" not in text.lower() and "test_" not in text and "pytest" not in text
    assert "mylib 1.0" in text or "mylib (1.0)" in text


def test_values_come_from_the_runs_not_from_pytest(project):
    text = _statement(project, "shout_param")
    assert parse_statement(text).claim.actual == "'hey'"
    assert "'HEY'" in text  # what the fixed code prints: what the user expects


def test_statements_are_deterministic_and_vary_with_the_seed(project):
    first = _statement(project, "box", "0:a")
    assert first == _statement(project, "box", "0:a")
    assert len({_statement(project, "box", f"{s}:a") for s in range(8)}) > 2
