"""The `pytest` log parser on hand-made and real pytest -rA logs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deepswe.env.grading import TestStatus, get_parser
from deepswe.env.grading.parsers.pytest_summary import parse_pytest_log

FIXTURES = sorted(Path(os.environ["DEEPSWE_R2E_FIXTURES"]).glob("*.json"))
GREEN, BOLD, RED, RESET = "\x1b[32m", "\x1b[1m", "\x1b[31m", "\x1b[0m"


def test_statuses_messages_and_parametrized_ids() -> None:
    log = "\n".join(
        [
            "============================= test session starts ==============================",
            "t.py ..F.sxX                                                              [100%]",
            "=========================== short test summary info ============================",
            "PASSED t.py::test_plain",
            "PASSED t.py::TestCls::test_method",
            "PASSED t.py::test_p[a - b]",
            "PASSED t.py::test_p[x [nested] y]",
            "FAILED t.py::test_p[1-2] - AssertionError: assert [1] == [2]",
            "FAILED t.py::test_msg - ValueError: a - b",
            "ERROR t.py::test_fixture - fixture 'nope' not found",
            "ERROR t_broken.py - ImportError: no module named x",
            "SKIPPED [2] t.py:40: needs network",
            "XFAIL t.py::test_known - reason: bug 12",
            "XPASS t.py::test_lucky fixed upstream",
            "==== 2 failed, 4 passed, 2 skipped, 1 xfailed, 1 xpassed, 2 errors in 0.1s ====",
        ]
    )
    assert parse_pytest_log(log) == {
        "t.py::test_plain": TestStatus.PASSED,
        "t.py::TestCls::test_method": TestStatus.PASSED,
        "t.py::test_p[a - b]": TestStatus.PASSED,
        "t.py::test_p[x [nested] y]": TestStatus.PASSED,
        "t.py::test_p[1-2]": TestStatus.FAILED,
        "t.py::test_msg": TestStatus.FAILED,
        "t.py::test_fixture": TestStatus.ERROR,
        "t_broken.py": TestStatus.ERROR,
        "t.py::test_known": TestStatus.XFAIL,
        "t.py::test_lucky": TestStatus.XPASS,
    }


def test_ansi_colour_codes_are_ignored() -> None:
    log = (
        f"{BOLD}=== short test summary info ==={RESET}\n"
        f"{GREEN}PASSED{RESET} t.py::{BOLD}test_a{RESET}\n"
        f"{RED}FAILED{RESET} t.py::{BOLD}test_b[x - y]{RESET} - assert 1 == 2\r\n"
        f"{RED}=== {RED}{BOLD}1 failed{RESET}, {GREEN}1 passed{RESET} ==={RESET}\n"
    )
    assert parse_pytest_log(log) == {
        "t.py::test_a": TestStatus.PASSED,
        "t.py::test_b[x - y]": TestStatus.FAILED,
    }


def test_status_words_before_the_summary_are_not_read() -> None:
    """Captured output in the PASSES section can print lines that look like summary lines."""
    log = (
        "==================================== PASSES ====================================\n"
        "_____________________________ test_prints _____________________________\n"
        "----------------------------- Captured stdout call -----------------------------\n"
        "PASSED t.py::test_that_does_not_exist\n"
        "FAILED t.py::test_prints\n"
        "=========================== short test summary info ============================\n"
        "PASSED t.py::test_prints\n"
        "============================== 1 passed in 0.01s ===============================\n"
        "PASSED t.py::after_the_summary\n"
    )
    assert parse_pytest_log(log) == {"t.py::test_prints": TestStatus.PASSED}


def test_every_summary_of_a_multi_run_log_is_read() -> None:
    log = (
        "=== short test summary info ===\nPASSED a.py::test_a\n=== 1 passed ===\n"
        "some build output\n"
        "=== short test summary info ===\nFAILED b.py::test_b - x\n=== 1 failed ===\n"
    )
    assert parse_pytest_log(log) == {
        "a.py::test_a": TestStatus.PASSED,
        "b.py::test_b": TestStatus.FAILED,
    }


def test_teardown_error_after_pass_is_not_a_pass() -> None:
    """Regression: a test that PASSED its call but ERRORed in teardown appears twice in -rA;
    reading the PASSED line last (or only) would grade a broken test as passing."""
    for lines in (
        ["ERROR t.py::test_a - teardown", "PASSED t.py::test_a"],
        ["PASSED t.py::test_a", "ERROR t.py::test_a - teardown"],
    ):
        log = "=== short test summary info ===\n" + "\n".join(lines) + "\n=== done ===\n"
        assert parse_pytest_log(log) == {"t.py::test_a": TestStatus.ERROR}


def test_log_without_summary_header_is_read_whole() -> None:
    assert parse_pytest_log("noise\nPASSED t.py::test_a\nFAILED t.py::test_b - boom\n") == {
        "t.py::test_a": TestStatus.PASSED,
        "t.py::test_b": TestStatus.FAILED,
    }
    assert parse_pytest_log("") == {}
    assert parse_pytest_log("Traceback (most recent call last):\nSyntaxError\n") == {}


def test_registry_returns_this_parser_by_name_and_by_module_path() -> None:
    log = "PASSED t.py::test_a\n"
    by_name = get_parser("pytest")
    by_path = get_parser("deepswe.env.grading.parsers.pytest_summary:parse")
    assert by_name is by_path
    assert by_name(log, None) == {"t.py::test_a": TestStatus.PASSED}  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown log parser 'nosuch'"):
        get_parser("nosuch")
    with pytest.raises(ValueError, match="is not callable"):
        get_parser("deepswe.env.grading.parsers:PARSERS")
    with pytest.raises(ValueError, match="unknown log parser"):  # one path syntax: module:attr
        get_parser("deepswe.env.grading.parsers.pytest_summary.parse")


def test_real_pytest_run(tmp_path: Path) -> None:
    """Run real pytest (-rA, colour forced) on a file exercising every status; parse its log."""
    (tmp_path / "test_real.py").write_text(
        "import pytest\n"
        "def test_ok(): pass\n"
        "def test_bad(): assert 1 == 2, 'PASSED - but not really'\n"
        "@pytest.mark.parametrize('v', ['a - b', 'c [d] e', 'x-y'])\n"
        "def test_param(v): assert v != 'x-y'\n"
        "@pytest.mark.skip(reason='later')\n"
        "def test_skip(): pass\n"
        "@pytest.mark.xfail(reason='known')\n"
        "def test_xfail(): assert False\n"
        "@pytest.mark.xfail(reason='maybe')\n"
        "def test_xpass(): pass\n"
        "@pytest.fixture\n"
        "def broken(): raise RuntimeError('setup')\n"
        "def test_err(broken): pass\n"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-rA",
            "--color=yes",
            "-p",
            "no:cacheprovider",
            "test_real.py",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    statuses = parse_pytest_log(done.stdout)
    assert statuses == {
        "test_real.py::test_ok": TestStatus.PASSED,
        "test_real.py::test_bad": TestStatus.FAILED,
        "test_real.py::test_param[a - b]": TestStatus.PASSED,
        "test_real.py::test_param[c [d] e]": TestStatus.PASSED,
        "test_real.py::test_param[x-y]": TestStatus.FAILED,
        "test_real.py::test_xfail": TestStatus.XFAIL,
        "test_real.py::test_xpass": TestStatus.XPASS,
        "test_real.py::test_err": TestStatus.ERROR,
    }, done.stdout


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_real_r2e_gym_logs(path: Path) -> None:
    """Both commits' logs of every fixture parse to one status per expected test."""
    row = json.loads(path.read_text())["env_args"]["ds"]
    runs = json.loads(row["execution_result_content"])
    n_expected = len(json.loads(row["expected_output_json"]))
    new = parse_pytest_log(runs["new_commit_res_stdout"])
    old = parse_pytest_log(runs["old_commit_res_stdout"])
    assert len(new) == len(old) == n_expected
    assert all(nodeid.startswith("r2e_tests/test_1.py::") for nodeid in new)
    assert set(new.values()) == {TestStatus.PASSED}
    assert TestStatus.FAILED in set(old.values())


_PARAM_CHARS = st.sampled_from(list("ab1 -_.,'=xyz:") + ["[", "]", " - "])


@st.composite
def _param_id(draw: st.DrawFn) -> str:
    """A pytest parameter id: free text whose brackets are balanced (pytest's ids from
    nested lists are), possibly holding spaces, dashes and ` - `."""
    parts, depth = [], 0
    for piece in draw(st.lists(_PARAM_CHARS, min_size=1, max_size=12)):
        if piece == "]" and depth == 0:
            continue
        depth += {"[": 1, "]": -1}.get(piece, 0)
        parts.append(piece)
    return "".join(parts) + "]" * depth


@settings(max_examples=300, deadline=None)
@given(
    tests=st.lists(
        st.tuples(
            st.from_regex(r"test_[a-z0-9_]{1,8}", fullmatch=True),
            st.one_of(st.none(), _param_id()),
            st.sampled_from(["PASSED", "FAILED", "ERROR", "XFAIL", "XPASS"]),
            st.one_of(st.none(), st.text(alphabet="ab [] -:'", min_size=1, max_size=15)),
        ),
        min_size=1,
        max_size=5,
        unique_by=lambda t: (t[0], t[1]),
    ),
    colour=st.booleans(),
)
def test_rendered_summary_lines_round_trip(tests: list, colour: bool) -> None:
    lines, want = [], {}
    for name, param, status, message in tests:
        nodeid = f"tests/test_h.py::{name}" + (f"[{param}]" if param is not None else "")
        shown = f"tests/test_h.py::{BOLD}{nodeid.split('::', 1)[1]}{RESET}" if colour else nodeid
        word = f"{RED}{status}{RESET}" if colour else status
        lines.append(f"{word} {shown}" + (f" - {message}" if message else ""))
        want[nodeid] = TestStatus(status)
    log = "=== short test summary info ===\n" + "\n".join(lines) + "\n=== 1 passed ===\n"
    assert parse_pytest_log(log) == want
