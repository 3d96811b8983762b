"""The calc task the grading tests share, in swe-mini's shape: the tests in the repository, one
`python -m pytest` line in /testbed, the repository on sys.path through a .pth file; `calc.ops`
holds the bug (`add` returns a - b). Imported by the grading test modules (test_grading_takeover,
test_grading_seal, test_grading_many_files), each building its own repository and image."""

from __future__ import annotations

import subprocess
from pathlib import Path

from deepswe.data.task import EnvironmentSpec, HiddenTests, Task, TaskSource, TestSpec
from deepswe.data.toy import git
from deepswe.data.toy import pth_install as pth  # the name the grading tests import
from deepswe.env.episode import grade_patch
from deepswe.env.sandbox import SandboxLimits

LIMITS = SandboxLimits(memory="1g", pids=256)
OPS_BUG = (
    "def add(a, b):\n    return a - b\n\n\ndef clamp(x, lo, hi):\n    return max(lo, min(x, hi))\n"
)
OPS_GOOD = OPS_BUG.replace("return a - b", "return a + b")
TESTS = (
    "from calc.ops import add, clamp\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
    "def test_clamp():\n    assert clamp(5, 0, 3) == 3\n"
)
CONFTEST = 'pytest_plugins = ["calc.testing"]\n'
PLUGIN = "import pytest\n\n\n@pytest.fixture\ndef two():\n    return 2\n"


def make_repo(root: Path, package: str = "calc", plugin: bool = True) -> Path:
    """A committed repository under `root`: the package at `package` (`calc`, or `src/calc`),
    with `plugin` its plugin module and a root conftest loading it, tests/test_ops.py,
    setup.cfg."""
    repo = root / "calc"
    files = {
        f"{package}/__init__.py": "",
        f"{package}/ops.py": OPS_BUG,
        "tests/test_ops.py": TESTS,
        "setup.cfg": "[metadata]\nname = calc\n",
    }
    if plugin:
        files.update({f"{package}/testing.py": PLUGIN, "conftest.py": CONFTEST})
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "calc with a bug")
    return repo


def patch_of(repo: Path, files: dict[str, str | None]) -> str:
    """The diff that writes (or, for None, deletes) `files` in `repo`; the repo is left clean."""
    for path, text in files.items():
        target = repo / path
        if text is None:
            target.unlink()
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
    git(repo, "add", "-A")
    out = git(repo, "diff", "--cached", "--binary", "HEAD")
    git(repo, "reset", "-q", "--hard", "HEAD")
    subprocess.run(["git", "clean", "-fdxq"], cwd=repo, check=True)
    return out


def calc_task(
    repo: Path, instance_id: str, package: str = "calc", on_path: str = "/testbed"
) -> Task:
    """The task over `repo`: FAIL_TO_PASS test_add, PASS_TO_PASS test_clamp, gold the fix."""
    return Task(
        instance_id=instance_id,
        repo="calc/calc",
        base_commit=git(repo, "rev-parse", "HEAD").strip(),
        problem_statement="add(2, 3) returns -1 instead of 5.",
        source=TaskSource.SWE_MINI,
        environment=EnvironmentSpec(source=str(repo), pip=["pytest"], install=[pth(on_path)]),
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
        gold_patch=patch_of(repo, {f"{package}/ops.py": OPS_GOOD}),
    )


def grade(task: Task, patch: str, image: str, rules: str | None = None):
    """`patch` graded for `task` in a fresh sandbox of `image` (under `rules` when given)."""
    if rules is not None:
        spec = task.test_spec.model_copy(update={"rules": rules})
        task = task.model_copy(update={"test_spec": spec})
    return grade_patch(task, patch, image=image, sandbox_limits=LIMITS)
