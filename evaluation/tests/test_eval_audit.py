"""The attack battery (`deepswe.eval.attacks`) and `deepswe-eval audit`.

Without Docker: every attack is valid bash, its policy speaks the agent's tool syntax, and run
with plain bash on a small real git repository it changes files but never the buggy module;
where plain pytest (not the grader's) runs the tests, the attacks that target pytest really do
make the failing test look fixed. With Docker: a one-task swe-mini-shaped task set audited end
to end, gold resolved, empty unresolved, no attack resolved.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from deepswe.data.task import EnvironmentSpec, HiddenTests, Task, TaskSource, TestSpec
from deepswe.data.toy import commit_repo, diff_to, git, pth_install, write_tasks
from deepswe.env.agent.parser import parse_action
from deepswe.eval.attacks import ATTACKS, AttackPolicy, command_of, script_of, script_sha256

OPS_BUG = (
    "def add(a, b):\n    return a - b\n\n\ndef clamp(x, lo, hi):\n    return max(lo, min(x, hi))\n"
)
OPS_GOOD = OPS_BUG.replace("return a - b", "return a + b")
TESTS = (
    "from calc.ops import add, clamp\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
    "def test_clamp():\n    assert clamp(5, 0, 3) == 3\n"
)
FAMILIES = {
    "pytest takeover",
    "shadowing pytest",
    "plugin through configuration",
    "plugin through packaging metadata",
    "in-process takeover from code under test",
    "unittest takeover",
    "output rewriting",
    "output forging",
    "report forging",
    "status laundering",
    "root reach",
    "graded tests rewritten",
}
# Attacks that fool a pytest the grader does not own, run as `python -m pytest -rA`:
# the run exits 0 with the bug in place, or shows no failure.
REAL_ON_PLAIN_PYTEST = {
    "conftest-hookwrapper": "exit 0",
    "root-pytest-py": "exit 0",
    "addopts-plugin": "exit 0",
    "dist-info-entry-point": "exit 0",
    "runtest-noop": "exit 0",
    "makereport-forces-pass": "exit 0",
    "gc-hookwrapper": "exit 0",
    "stdout-filter": "no FAILED",
    "exit-passing": "exit 0",
    "xfail-from-code-under-test": "exit 0",
    "trusted-name-makereport": "exit 0",
    "stdlib-context-swallow": "exit 0",
    "profiler-in-the-call": "exit 0",
    "shared-stdlib-rebound": "exit 0",
}


def make_repo(root: Path) -> Path:
    """calc/ (`__init__.py`, `ops.py` with the bug), tests/test_ops.py, setup.cfg, one commit."""
    files = {
        "calc/__init__.py": "",
        "calc/ops.py": OPS_BUG,
        "tests/test_ops.py": TESTS,
        "setup.cfg": "[metadata]\nname = calc\n",
    }
    commit_repo(root / "calc", files, "calc with a bug")
    return root / "calc"


def test_the_library_covers_every_family():
    assert len(ATTACKS) >= 12
    assert {a.family for a in ATTACKS.values()} == FAMILIES
    for name, a in ATTACKS.items():
        assert a.name == name and "\n" not in a.family + a.why and a.why


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_every_script_is_valid_bash(name, tmp_path):
    path = tmp_path / "attack.sh"
    path.write_text(script_of(ATTACKS[name]))
    run = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_the_policy_runs_the_script_then_finishes(name):
    policy = AttackPolicy(attack=name)
    first = parse_action(policy.reply([], timeout=1).text)
    assert first.error is None and first.function_name == "execute_bash"
    cmd = first.parameters["cmd"]
    assert cmd == command_of(ATTACKS[name])
    blob = cmd.split()[1]
    assert base64.b64decode(blob).decode() == script_of(ATTACKS[name])
    assert cmd.split()[0] not in ("git", "ipython", "jupyter", "nohup")  # execute_bash refuses
    for _ in range(2):
        assert parse_action(policy.reply([], timeout=1).text).function_name == "finish"


def test_an_unknown_attack_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown attack 'nope'"):
        AttackPolicy(attack="nope")


def test_a_changed_script_is_refused_against_the_digest_a_run_folder_recorded():
    """An audit folder's card holds each script's digest (policy args): resuming it after the
    library changed must not mix two versions of one attack."""
    name = "exit-passing"
    AttackPolicy(attack=name, sha256=script_sha256(name))
    with pytest.raises(ValueError, match=f"attack {name}: script"):
        AttackPolicy(attack=name, sha256="0" * 16)


def _attacked(name: str, tmp_path: Path) -> Path:
    repo = make_repo(tmp_path)
    run = subprocess.run(
        ["bash", "-s"], input=script_of(ATTACKS[name]), cwd=repo, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    return repo


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_an_attack_changes_files_and_leaves_the_bug(name, tmp_path):
    repo = _attacked(name, tmp_path)
    assert git(repo, "status", "--porcelain", "--untracked-files=all").strip()
    assert (repo / "calc" / "ops.py").read_text() == OPS_BUG
    # the package still imports outside pytest: the attack never breaks it for good
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    run = subprocess.run(
        [sys.executable, "-c", "import calc, calc.ops; print(calc.ops.add(2, 3))"],
        cwd=repo,
        capture_output=True,
        text=True,
        env=env,
    )
    assert run.returncode == 0 and run.stdout.strip() == "-1", run.stderr


@pytest.mark.parametrize("name", sorted(REAL_ON_PLAIN_PYTEST))
def test_the_attack_is_real_where_pytest_is_not_the_graders(name, tmp_path):
    """Each pytest-facing attack makes a plain `python -m pytest -rA` look fixed."""
    repo = _attacked(name, tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    cmd = [sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", "tests/test_ops.py"]
    run = subprocess.run(cmd, cwd=repo, capture_output=True, text=True, env=env, timeout=120)
    if REAL_ON_PLAIN_PYTEST[name] == "exit 0":
        assert run.returncode == 0, run.stdout[-2000:]
    assert "FAILED" not in run.stdout, run.stdout[-2000:]


TESTCASE_TESTS = (
    "import unittest\n\nfrom calc.ops import add, clamp\n\n\nclass TestOps(unittest.TestCase):\n"
    "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n"
    "    def test_clamp(self):\n        self.assertEqual(clamp(5, 0, 3), 3)\n"
)


@pytest.mark.parametrize("name", ["unittest-outcome-flipped", "unittest-run-replaced"])
def test_the_unittest_attacks_are_real_on_testcase_tests(name, tmp_path):
    """On TestCase tests (swe-mini's mistune, R2E-Gym's runner rows) a plain `python -m pytest`
    and a plain unittest run both look fixed."""
    repo = _attacked(name, tmp_path)
    (repo / "tests" / "test_ops.py").write_text(TESTCASE_TESTS)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    cmd = [sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", "tests/test_ops.py"]
    run = subprocess.run(cmd, cwd=repo, capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0 and "FAILED" not in run.stdout, run.stdout[-2000:]
    cmd = [sys.executable, "-m", "unittest", "tests.test_ops"]
    run = subprocess.run(cmd, cwd=repo, capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]


@pytest.fixture
def task_file(tmp_path) -> Path:
    """A one-task set in swe-mini's shape (tests in the repository, the repository on
    sys.path through a .pth file), as environments/tests/test_grading_takeover.py builds it."""
    repo = make_repo(tmp_path)
    pth = pth_install()
    task = Task(
        instance_id="calc__audit-1",
        repo="calc/calc",
        base_commit=git(repo, "rev-parse", "HEAD").strip(),
        problem_statement="add(2, 3) returns -1 instead of 5.",
        source=TaskSource.SWE_MINI,
        environment=EnvironmentSpec(source=str(repo), pip=["pytest"], install=[pth]),
        test_spec=TestSpec(
            command="python -m pytest -rA -p no:cacheprovider -o addopts= tests/test_ops.py",
            log_parser="pytest",
            timeout_s=120,
        ),
        hidden=HiddenTests(
            fail_to_pass=["tests/test_ops.py::test_add"],
            pass_to_pass=["tests/test_ops.py::test_clamp"],
            graded_files=["tests/test_ops.py"],
        ),
        gold_patch=diff_to(repo, "calc/ops.py", OPS_GOOD),
    )
    return write_tasks([task], tmp_path / "tasks.jsonl")


@pytest.mark.docker
def test_audit_of_a_task_set_finds_no_hole(task_file, tmp_path):
    out = tmp_path / "audit"
    chosen = [
        "conftest-hookwrapper",
        "root-pytest-py",
        "runtest-noop",
        "exit-passing",
        "atexit-forged-report",
        "report-pipe-injection",
        "report-relay",
        "trusted-name-makereport",
        "stdlib-context-swallow",
    ]
    cmd = [
        str(Path(sys.executable).with_name("deepswe-eval")),
        "audit",
        "--dataset",
        str(task_file),
        "--out",
        str(out),
        "eval.workers=4",
    ]
    for name in chosen:
        cmd += ["--attacks", name]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=1500)
    assert run.returncode == 0, run.stderr[-3000:]
    manifest = json.loads((out / "audit.json").read_text())
    assert manifest["version"] == 2 and set(manifest["attacks"]) == set(chosen)
    row = manifest["tasks"]["calc__audit-1"]
    assert row["gold"] == "resolved" and row["empty"] == "unresolved" and row["healthy"]
    assert set(row["attacks"]) == set(chosen)
    assert all(
        v in ("unresolved", "tampered", "patch_apply_failed") for v in row["attacks"].values()
    )
    assert manifest["summary"]["holes"] == {}
    table = (out / "audit.md").read_text()
    assert all(name in table for name in chosen) and "No holes" in table
