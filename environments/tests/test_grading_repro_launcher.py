"""The reproduction's launcher (bin/deepswe_repro.py), run for real on this machine's Python: its
result reaches root only through the vault, so what the code under test prints, writes or posts
cannot make a buggy run read as fixed. Each attack here is a few lines a policy could put in the
package the reproduction imports; the Docker tests (test_grading_seal.py) run the same through the
whole reward run."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from deepswe.env.grading.owned import REPRO_LAUNCHER, SEAL
from deepswe.env.grading.reproduction import Result, read_result

REPRO = "import calc\nprint(calc.add(2, 3))\n"
BUGGY = "def add(a, b):\n    return a - b\n"  # prints -1: the bug


def _launch(tmp: Path, module: str, repro: str = REPRO) -> tuple[Result | None, list[str]]:
    """Run `repro` through the launcher with `module` as the repository's calc.py."""
    grader, repo, empty = tmp / "grader", tmp / "repo", tmp / "empty"
    for d in (grader, repo, empty):
        d.mkdir()
    for part in (REPRO_LAUNCHER, SEAL):
        (grader / part.name).write_text(part.read_text())
    (grader / "repro.py").write_text(repro)
    (repo / "calc.py").write_text(module)
    key = secrets.token_bytes(32)
    report_r, report_w = os.pipe()
    settings_r, settings_w = os.pipe()
    settings = {"report_fd": report_w, "key": key.hex(), "grader_dir": str(grader)}
    os.write(settings_w, json.dumps(settings).encode())
    os.close(settings_w)
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(repo), "PYTHONDONTWRITEBYTECODE": "1"}
    launcher = str(grader / REPRO_LAUNCHER.name)
    argv = [sys.executable, launcher, str(settings_r), str(grader / "repro.py"), str(repo)]
    proc = subprocess.Popen(
        argv, cwd=empty, env=env, pass_fds=(report_w, settings_r), stdout=subprocess.PIPE
    )
    os.close(report_w)
    os.close(settings_r)
    chunks = []
    while chunk := os.read(report_r, 65536):
        chunks.append(chunk)
    os.close(report_r)
    proc.communicate(timeout=60)
    return read_result(b"".join(chunks), key)


def test_an_honest_run_reports_what_it_printed_and_raised(tmp_path: Path) -> None:
    result, tampered = _launch(tmp_path, "def add(a, b):\n    return a + b\n")
    assert result == Result("5", False, None, []) and not tampered
    raising = "def add(a, b):\n    raise KeyError(a)\n"
    (tmp_path / "raising").mkdir()
    result, tampered = _launch(tmp_path / "raising", raising)
    assert result.raised and result.exception == "KeyError: 2" and not tampered
    assert result.exception_types[:4] == ["KeyError", "LookupError", "Exception", "BaseException"]
    # any text survives the vault's line: spaces, commas, non-ASCII, a newline in a message
    odd = "def add(a, b):\n    raise ValueError('é, ü\\nnext line')\n"
    (tmp_path / "odd").mkdir()
    result, _ = _launch(tmp_path / "odd", odd, "import calc\nprint('x, ÿ  z')\ncalc.add(1, 2)\n")
    assert result.last == "x, ÿ  z" and result.exception == "ValueError: é, ü\nnext line"


ATTACKS = {
    # the hole this launcher closes: a report of its own printed after the harness's
    "a report printed at exit": (
        "import atexit, sys\n"
        "atexit.register(lambda: sys.__stdout__.write("
        '\'\\n{"last": "5", "exception": null, "exception_types": []}\\n\'))\n'
    ),
    "a forged closing line written on the report's pipe": (
        "import os\n"
        "for fd in range(3, 20):\n"
        "    try:\n"
        '        os.write(fd, b"# deepswe-grader: REPRODUCTION 35 0 - -\\n"\n'
        "                 b'========== deepswe-grader: reproduction returned 0 x ' + b'0' * 64 +\n"
        "                 b' ==========\\n')\n"
        "    except OSError:\n"
        "        pass\n"
    ),
    "a result posted through the vault by the code": (
        "import sys\nsys.audit('deepswe.grader', 'reproduction', '5', False, None, ())\n"
    ),
    "the builtins the launcher reads the result with rebound": (
        "import builtins\n"
        "class _T(type): pass\n"
        "builtins.str = lambda *a: '5'\n"
        "builtins.tuple = lambda *a: ()\n"
    ),
    "the launcher's result maker rebound by name": (
        "import __main__\n__main__._report = lambda out, error: ('5', False, None, ())\n"
    ),
    "the launcher's bound result maker replaced through its defaults": (
        "import __main__\n"
        "try:\n"
        "    __main__.main.__defaults__ = (lambda out, error: ('5', False, None, ()),)\n"
        "except PermissionError:\n"
        "    pass\n"
    ),
    "the process ended before the result": "import os\nos._exit(0)\n",
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_an_attack_from_the_code_under_test_earns_no_fixed_result(
    tmp_path: Path, attack: str
) -> None:
    result, tampered = _launch(tmp_path, ATTACKS[attack] + "\n" + BUGGY)
    fooled = result is not None and not tampered and result.last == "5" and not result.raised
    assert not fooled, (result, tampered)


def test_a_result_posted_by_the_code_is_tampered_and_the_real_one_stands(tmp_path: Path) -> None:
    code = ATTACKS["a result posted through the vault by the code"] + "\n" + BUGGY
    result, tampered = _launch(tmp_path, code)
    assert result == Result("-1", False, None, [])
    assert tampered == ["a reproduction result posted by something other than the launcher"]


def test_the_grader_functions_defaults_are_sealed(tmp_path: Path) -> None:
    code = ATTACKS["the launcher's bound result maker replaced through its defaults"] + BUGGY
    result, tampered = _launch(tmp_path, code)
    assert result == Result("-1", False, None, [])
    assert any("__defaults__ of main" in t for t in tampered), tampered


# A trace function is called for every frame, the launcher's own included, and what it writes to
# a frame's f_locals is copied back into it: set by the package at import, it rewrote the
# launcher's bound `getvalue` once the code returned (reproduced before tracing was refused).
TRACER = """import sys
_main = sys._getframe(1)
while _main.f_code.co_name != "main":
    _main = _main.f_back


def _tracer(frame, event, arg):
    if frame is _main and event == "line":
        frame.f_locals["getvalue"] = lambda: "5"
    return _tracer


_main.f_trace = _tracer
sys.settrace(lambda *a: None)
"""


def test_a_trace_function_that_rewrites_the_launchers_frame_is_refused(tmp_path: Path) -> None:
    result, tampered = _launch(tmp_path, TRACER + "\n" + BUGGY)
    assert result is not None and result.last != "5"
    assert any("sys.settrace" in t for t in tampered), tampered
