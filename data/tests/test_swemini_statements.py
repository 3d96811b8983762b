"""The statement checks (issue #14): on made-up statements that fail them, on every phrasing the
writer uses, and over every row of the release, data/swe-mini/tasks.jsonl.

The text checks run on every row offline; the run checks execute every row's reproduction with
the task's bug and with its gold patch, against the pinned sources (fetched as `make data` does),
so they are `slow` (CI runs them)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from deepswe.data.loaders import load_jsonl
from deepswe.data.swemini.manifest import TASKS, load_manifest
from deepswe.data.swemini.snippet import SnippetRun, run_snippet
from deepswe.data.swemini.statement import (
    TITLES,
    Issue,
    read_reproduction,
    reproduction_of,
    write_statement,
)
from deepswe.data.swemini.statement_audit import check_rows, check_static_rows, report
from deepswe.data.swemini.statement_check import Check, check_runs, check_static, parse_statement

API = {"mylib"}
LIB = "def shout(word):\n    return word.upper()\n"
BUGGY = "def shout(word):\n    return word.lower()\n"


def _issue(title: str, body: str, repro: str) -> str:
    return (
        f"### {title}\n\nI'm using mylib 1.0.\n\n{body}\n\nReproduction:\n\n```python\n{repro}```\n"
    )


GOOD = _issue(
    "`mylib.shout('hey')` gives an incorrect result",
    "`mylib.shout('hey')` returns `'hey'`. The expected result is `'HEY'`.",
    "import mylib\n\nprint(repr(mylib.shout('hey')))\n",
)


@pytest.fixture(scope="module")
def trees(tmp_path_factory) -> tuple[Path, Path]:
    buggy, fixed = tmp_path_factory.mktemp("buggy"), tmp_path_factory.mktemp("fixed")
    (buggy / "mylib.py").write_text(BUGGY)
    (fixed / "mylib.py").write_text(LIB)
    return buggy, fixed


def _runs(trees, text: str) -> dict[Check, str | None]:
    code = parse_statement(text).reproduction
    at_base, with_gold = (run_snippet(Path(sys.executable), t, code) for t in trees)
    return check_runs(text, at_base, with_gold)


def test_a_good_statement_passes_every_check(trees):
    assert check_static(GOOD, API) == {Check.TITLE_NAMES_API: None, Check.SELF_CONTAINED: None}
    assert _runs(trees, GOOD) == {Check.REPRODUCES: None, Check.FIXED_BY_GOLD: None}


def test_a_reproduction_using_a_name_it_never_defines_is_not_self_contained():
    """Regression (issue #14): `b.child.immutable = 21` with no `b` anywhere."""
    text = _issue(
        "Crash: AttributeError in `b.child.immutable = 21`",
        "`b.child.immutable = 21` crashes with `AttributeError: 'NoneType' object has no "
        "attribute 'child'` instead of returning a result.",
        "b.child.immutable = 21\n",
    )
    verdicts = check_static(text, API)
    assert verdicts[Check.SELF_CONTAINED] == "uses names it never defines: b"
    assert verdicts[Check.TITLE_NAMES_API] is not None  # `b` is nothing of the project either


def test_a_title_of_literals_names_no_call_of_the_project():
    """Regression (issue #14): "Wrong result from `{0: None, 1: None, 2: None}`"."""
    text = GOOD.replace(
        "### `mylib.shout('hey')` gives an incorrect result",
        "### Wrong result from `{0: None, 1: None, 2: None}`",
    )
    assert check_static(text, API)[Check.TITLE_NAMES_API].startswith("the title names no call")
    bare = GOOD.replace("`mylib.shout('hey')` gives an incorrect result", "Unexpected failure")
    assert check_static(bare, API)[Check.TITLE_NAMES_API] == "the title shows no code"


def test_a_value_the_project_built_counts_as_its_api():
    text = _issue(
        "`box.size()` returns `2` instead of `3`",
        "`box.size()` returns `2`. The expected result is `3`.",
        "from mylib import Box\n\nbox = Box([1, 2, 3])\nprint(repr(box.size()))\n",
    )
    assert check_static(text, API)[Check.TITLE_NAMES_API] is None
    local = text.replace("box = Box([1, 2, 3])", "box = [1, 2, 3]")
    assert check_static(local, API)[Check.TITLE_NAMES_API] is not None


def test_a_reproduction_importing_test_code_is_not_self_contained():
    text = GOOD.replace("import mylib\n", "import mylib\nfrom tests import helper\n")
    assert "tests" in check_static(text, API)[Check.SELF_CONTAINED]


def test_a_reproduction_that_does_not_show_the_described_value_fails(trees):
    """Regression (issue #14): "`[2]` returns `Lists differ: [2]`" (pytest's message, not a
    value the snippet prints)."""
    wrong = GOOD.replace("returns `'hey'`", "returns `Lists differ: ['hey']`")
    verdicts = _runs(trees, wrong)
    assert verdicts[Check.REPRODUCES] == "at the base commit it printed \"'hey'\""
    same = GOOD.replace("mylib.shout('hey')))", "'hey'))")
    verdicts = _runs(trees, same)  # prints a constant: never fixed by any patch
    assert verdicts[Check.REPRODUCES] is None
    assert verdicts[Check.FIXED_BY_GOLD] == "with the gold patch it printed \"'hey'\""


def test_a_crash_claim_is_checked_by_type_and_message():
    text = _issue(
        "`mylib.shout(1)` raises AttributeError",
        "`mylib.shout(1)` crashes with `AttributeError: 'int' object has no attribute 'lower'` "
        "instead of returning a result.",
        "import mylib\n\nmylib.shout(1)\n",
    )
    raised = SnippetRun(
        exception="AttributeError: 'int' object has no attribute 'lower'",
        exception_types=["AttributeError", "Exception", "BaseException", "object"],
    )
    other = SnippetRun(exception="AttributeError: other", exception_types=["AttributeError"])
    assert check_runs(text, raised, SnippetRun(last="None"))[Check.REPRODUCES] is None
    assert check_runs(text, other, SnippetRun(last="None"))[Check.REPRODUCES] is not None
    assert check_runs(text, raised, raised)[Check.FIXED_BY_GOLD] is not None


@pytest.mark.parametrize(
    "issue",
    [
        Issue("compare", "f(1)", "f(1)", "f(1)", "print(repr(f(1)))\n", "'a...b'", "'c'"),
        Issue("truth", "f(1)", "f(1)", "f(1) == 2", "print(f(1) == 2)\n"),
        Issue("raises", "f(1)", "f(1)", "f(1)", "f(1)\n", exception="KeyError: 1"),
        Issue(
            "raises",
            "f(1)",
            "f(1)",
            "f(1)",
            "f(1)\n",
            expected="ValueError: x",
            exception="KeyError: 1",
        ),
        Issue(
            "raises",
            "x",
            "g()",
            "for a in x:\n    pass",
            "x = g()\nfor a in x:\n    pass\n",
            exception="KeyError: 1",
        ),
        Issue("no_raise", "f(1)", "f(1)", "f(1)", "f(1)\n", expected="ValueError"),
    ],
)
def test_every_phrasing_the_writer_uses_is_read_back_as_its_claim(issue):
    claims = set()
    for seed in range(40):  # enough seeds to draw every template
        text = write_statement(issue, "mylib", "1.0", str(seed))
        st = parse_statement(text)
        assert st.reproduction == issue.reproduction and st.title
        claims.add(st.claim)
        # what grading checks: read back from the text as the writer meant it
        assert read_reproduction(text) == reproduction_of(issue)
    kind = issue.kind
    expected = {"compare": {"actual": issue.actual}, "raises": {"exception": issue.exception}}
    (claim,) = claims
    assert claim.kind == kind
    for field, value in expected.get(kind, {}).items():
        assert getattr(claim, field) == value
    if kind == "raises":
        assert claim.expected == issue.expected
    assert len(TITLES[kind]) > 1


# ---- the release ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def release():
    return load_jsonl(TASKS), load_manifest()


def test_every_released_statement_passes_the_text_checks(release):
    tasks, manifest = release
    rows = check_static_rows(tasks, manifest)
    failing = {r.instance_id: r.failures() for r in rows if not r.ok}
    assert not failing, failing


def test_every_released_row_carries_its_statements_reproduction(release):
    """Strict rules run it as a plain script (deepswe.env.grading.reproduction): what it must
    do once fixed is what its statement says."""
    tasks, _ = release
    assert all(t.hidden.reproduction == read_reproduction(t.problem_statement) for t in tasks)
    assert {t.hidden.reproduction.fixed for t in tasks} == {"runs", "prints", "raises"}


def _python() -> Path:
    override = os.environ.get("DEEPSWE_SWE_MINI_PYTHON")
    if override:
        return Path(override)
    if sys.version_info[:2] != (3, 11):
        if os.environ.get("CI") == "true":
            pytest.fail("the run checks need Python 3.11 (or DEEPSWE_SWE_MINI_PYTHON)")
        pytest.skip("the run checks need Python 3.11: set DEEPSWE_SWE_MINI_PYTHON")
    return Path(sys.executable)


@pytest.mark.slow
def test_every_released_reproduction_shows_its_bug_and_not_with_the_fix(release):
    """~1 min on 2 cores after the sources are fetched (13 sdists, a few MB)."""
    from deepswe.data.swemini.sources import fetch

    tasks, manifest = release
    python = _python()
    fetch(manifest, tasks, log=lambda _: None, rebuild=False)
    rows = check_rows(tasks, manifest, python, workers=2)
    failing = {r.instance_id: r.failures() for r in rows if not r.ok}
    assert not failing, failing
    assert report(rows)["overall"]["all"]["share"] == 1.0
