"""Python 3.13's write-through `f_locals` (PEP 667), against the grader's pytest launcher run for
real on the host (test_grading_launcher.launch).

From 3.13 code under test that walks up its stack (`sys._getframe`, a traceback's `tb_frame`, then
`f_back`, none of which the seal can refuse to honest code) can rebind the locals of the frames
waiting for it, with no trace function: pytest's (`CallInfo.from_call`'s `cls`, which makes the
call's outcome once the test returns) and the launcher's own `main`. The launcher holds, through
the vault, the locals of every frame waiting for a test phase (and for collection) and of its
`main` frame, and the vault compares them when the phase returns and when the report closes.

Needs a CPython 3.13 (pyenv's, on this project's CI machine kind; README); skipped elsewhere.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_grading_launcher import (  # noqa: E402
    GRADED,
    NO_FALSE_POSITIVES,
    assert_clean,
    launch,
    make_repo,
    tampered,
)

pytestmark = pytest.mark.slow

# Called by the buggy `add`: rebinds a waiting frame's local, only while the graded test runs
# (the canaries, whose names root chose, are spared).
WALK = """
import os, sys


def _dsw_rebind(where, name, value_of):
    if "::test_add " not in os.environ.get("PYTEST_CURRENT_TEST", ""):
        return
    f = sys._getframe(2)
    while f is not None:
        if f.f_code.co_name == where and name in f.f_locals:
            f.f_locals[name] = value_of(f.f_locals[name])
            return
        f = f.f_back
"""
ATTACKS = {
    # the call's outcome made without its exception
    "from-call-cls": (
        "from_call",
        "cls",
        "lambda real: (lambda **kw: real(**dict(kw, excinfo=None)))",
    ),
    # the launcher's last full check skipped
    "launcher-main-finish": ("main", "finish", "lambda real: (lambda: None)"),
}


@pytest.fixture(scope="module")
def python313(tmp_path_factory: pytest.TempPathFactory) -> str:
    pythons = sorted(Path.home().glob(".pyenv/versions/3.13.*/bin/python3"))
    if not pythons:
        pytest.skip("no pyenv CPython 3.13 here")
    venv = tmp_path_factory.mktemp("venv313")
    subprocess.run([str(pythons[0]), "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    pip = subprocess.run(
        [python, "-m", "pip", "install", "-q", "pytest"], capture_output=True, text=True
    )
    assert pip.returncode == 0, pip.stderr[-600:]
    return python


def _attacked(root: Path, name: str) -> Path:
    where, local, value_of = ATTACKS[name]
    repo = make_repo(root)
    ops = (repo / "calc" / "ops.py").read_text()
    call = f"    _dsw_rebind({where!r}, {local!r}, {value_of})\n"
    ops = WALK + ops.replace("def add(a, b):\n", "def add(a, b):\n" + call)
    (repo / "calc" / "ops.py").write_text(ops)
    return repo


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_a_waiting_frame_rebound_through_f_locals_is_tampered(
    tmp_path: Path, python313: str, name: str
) -> None:
    run = launch(_attacked(tmp_path / "repo", name), python=python313, touched=["calc/ops.py"])
    assert tampered(run), (run.statuses, run.output[-2000:])
    assert any("was rebound" in why for why in run.tampered), run.tampered


def test_the_cls_attack_is_real_without_the_holds(tmp_path: Path, python313: str) -> None:
    """The same patch under plain pytest 3.13: the bug stays and the test passes."""
    repo = _attacked(tmp_path / "repo", "from-call-cls")
    out = subprocess.run(
        [python313, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_ops.py"],
        cwd=repo,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout[-2000:]


def test_no_false_positives_on_313(tmp_path: Path, python313: str) -> None:
    run = launch(make_repo(tmp_path / "plain"), python=python313)
    assert run.statuses == {GRADED[0]: "FAILED", GRADED[1]: "PASSED"}, run.output[-3000:]
    assert_clean(run)
    repo = make_repo(tmp_path / "conftest", fixed=True)
    for rel, text in NO_FALSE_POSITIVES.items():
        (repo / rel).write_text(textwrap.dedent(text))
    assert_clean(launch(repo, "-x", python=python313))
