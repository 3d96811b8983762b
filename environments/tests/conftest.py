"""Fixtures for deepswe.env tests."""

from __future__ import annotations

import pytest

from deepswe.data.task import EnvironmentSpec, HiddenTests, Task, TaskSource, TestSpec
from deepswe.data.toy import diff_to, git


@pytest.fixture(scope="session")
def base_image() -> str:
    """The bookworm base image (built from Debian packages on first use; a no-op after)."""
    from deepswe.env.images import ensure_base_image

    return ensure_base_image("bookworm")


@pytest.fixture(scope="session")
def k8s_cluster(tmp_path_factory):
    """The test Kubernetes API server (k8s_server.py) and a kubeconfig pointing at it."""
    import sys
    from pathlib import Path

    here = str(Path(__file__).parent)
    sys.path.insert(0, here)
    try:
        from k8s_server import serve
    finally:
        sys.path.remove(here)
    kubeconfig = tmp_path_factory.mktemp("k8s") / "kubeconfig"
    server, cluster = serve(kubeconfig)
    cluster.kubeconfig = str(kubeconfig)
    yield cluster
    server.shutdown()
    cluster.shutdown()


OPS_GOOD = (
    "def add(a, b):\n    return a + b\n\n\ndef clamp(x, lo, hi):\n    return max(lo, min(x, hi))\n"
)
OPS_BUG = OPS_GOOD.replace("return a + b", "return a - b")
VISIBLE_TEST = "from calc.ops import clamp\n\n\ndef test_clamp():\n    assert clamp(5, 0, 3) == 3\n"
HIDDEN_TEST = "from calc.ops import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"


@pytest.fixture(scope="session")
def calc_task(tmp_path_factory) -> Task:
    """A real task: a git repo with a bug in calc/ops.py, its fix (gold patch) in a later commit,
    and a hidden test added by the test patch."""
    repo = tmp_path_factory.mktemp("calc")
    git(repo, "init", "-q", "-b", "main")
    (repo / "calc").mkdir()
    (repo / "calc" / "__init__.py").write_text("")
    (repo / "calc" / "ops.py").write_text(OPS_BUG)
    (repo / "tests").mkdir()
    (repo / "tests" / "test_visible.py").write_text(VISIBLE_TEST)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "calc with a bug")
    base = git(repo, "rev-parse", "HEAD").strip()
    gold = diff_to(repo, "calc/ops.py", OPS_GOOD)
    test_patch = diff_to(repo, "tests/test_hidden.py", HIDDEN_TEST)
    # A later commit holds the fix: the sandbox must not let the policy find it.
    (repo / "calc" / "ops.py").write_text(OPS_GOOD)
    git(repo, "commit", "-qam", "the fix")
    return Task(
        instance_id="calc__calc-1",
        repo="calc/calc",
        base_commit=base,
        problem_statement="add(2, 3) returns -1 instead of 5.",
        source=TaskSource.CUSTOM,
        environment=EnvironmentSpec(source=str(repo), pip=["pytest"]),
        test_spec=TestSpec(command="python -m pytest -rA tests", log_parser="pytest"),
        hidden=HiddenTests(
            fail_to_pass=["tests/test_hidden.py::test_add"],
            pass_to_pass=["tests/test_visible.py::test_clamp"],
            test_patch=test_patch,
        ),
        gold_patch=gold,
    )


SETUP_PY = "from setuptools import setup\n\nsetup(name='calc', version='1.0', packages=['calc'])\n"


@pytest.fixture(scope="session")
def installed_calc_task(tmp_path_factory) -> Task:
    """The calc task, installed the usual way in a repository with no .gitignore: the install
    (`pip install -e .`) leaves `calc.egg-info/` untracked in /testbed."""
    repo = tmp_path_factory.mktemp("installed") / "calc"
    (repo / "calc").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "calc" / "__init__.py").write_text("")
    (repo / "calc" / "ops.py").write_text(OPS_BUG)
    (repo / "setup.py").write_text(SETUP_PY)
    (repo / "tests").mkdir()
    (repo / "tests" / "test_visible.py").write_text(VISIBLE_TEST)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "calc with a bug")
    return Task(
        instance_id="calc__calc-installed",
        repo="calc/calc",
        base_commit=git(repo, "rev-parse", "HEAD").strip(),
        problem_statement="add(2, 3) returns -1 instead of 5.",
        source=TaskSource.CUSTOM,
        environment=EnvironmentSpec(
            source=str(repo),
            pip=["pytest"],
            install=["pip install --no-index --no-build-isolation --no-deps -e ."],
        ),
        test_spec=TestSpec(command="python -m pytest -rA tests", log_parser="pytest"),
        hidden=HiddenTests(
            fail_to_pass=["tests/test_hidden.py::test_add"],
            pass_to_pass=["tests/test_visible.py::test_clamp"],
            test_patch=diff_to(repo, "tests/test_hidden.py", HIDDEN_TEST),
        ),
        gold_patch=diff_to(repo, "calc/ops.py", OPS_GOOD),
    )
