"""What grading re-installs is there offline (deepswe.env.images.grading_wheels): a gold patch
that declares a new dependency resolves, as under swebench online; the agent's image never
holds those wheels; a dependency nobody fetched is named in the test log.

pylint-4661's shape: the gold patch adds a requirement to setup.cfg and the code imports it;
the test command re-installs the project after the patch, as swebench's eval script does.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from deepswe.data.task import EnvironmentSpec, HiddenTests, Task, TaskSource, TestSpec
from deepswe.data.toy import commit_repo, git
from deepswe.env.grading.outcomes import Outcome
from deepswe.env.images.grading_wheels import added_requirements, grading_requirements
from deepswe.env.recipes.swebench.environment import reinstall_command

SETUP_CFG = "[metadata]\nname = calc\nversion = 0.1\n\n[options]\npackages = calc\n"
OPS_BUG = "def add(a, b):\n    return a - b\n"
TESTS = "from calc.ops import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
INSTALL = "python -m pip install -e . --no-build-isolation"


def _repo(root: Path) -> tuple[Path, str, str]:
    repo = root / "calc"
    files = {
        "setup.cfg": SETUP_CFG,
        "setup.py": "from setuptools import setup\n\nsetup()\n",
        "calc/__init__.py": "",
        "calc/ops.py": OPS_BUG,
        "tests/test_ops.py": TESTS,
    }
    base = commit_repo(repo, files, "calc")
    # the fix imports six and declares it, as pylint-4661's declares appdirs
    (repo / "setup.cfg").write_text(SETUP_CFG + "install_requires =\n    six\n")
    (repo / "calc" / "ops.py").write_text(
        "import six  # noqa: F401\n\n\n" + OPS_BUG.replace("-", "+")
    )
    gold = git(repo, "diff")
    git(repo, "checkout", "-q", ".")
    return repo, base, gold


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return _repo(tmp_path_factory.mktemp("gw"))


def test_the_requirements_the_patches_add_are_found_on_the_host(repo):
    path, base, gold = repo
    assert added_requirements(str(path), base, [gold, ""], "3.11") == ["six"]
    assert added_requirements(str(path), base, [""], "3.11") == []
    assert added_requirements(str(path), base, ["not a diff\n"], "3.11") == []
    assert grading_requirements(_task(path, base, gold, True)) == ["six"]
    assert grading_requirements(_task(path, base, gold, False)) == []


def _task(path: Path, base: str, gold: str, reinstall: bool) -> Task:
    command = reinstall_command(INSTALL) + "\npython -m pytest -rA -p no:cacheprovider tests"
    return Task(
        instance_id="calc__wheels-1",
        repo="calc/calc",
        base_commit=base,
        problem_statement="add is wrong",
        source=TaskSource.CUSTOM,
        environment=EnvironmentSpec(
            source=str(path),
            pip=["pytest", "setuptools", "wheel"],
            install=[INSTALL],
            reinstall_after_patch=reinstall,
        ),
        test_spec=TestSpec(command=command, log_parser="pytest", timeout_s=300, rules="swebench"),
        hidden=HiddenTests(fail_to_pass=["tests/test_ops.py::test_add"]),
        gold_patch=gold,
    )


@pytest.mark.docker
def test_gold_resolves_offline_with_the_grading_wheels_and_only_then(repo):
    from deepswe.env.episode import grade_patch
    from deepswe.env.images.task import ensure_task_image
    from deepswe.env.sandbox import SandboxLimits
    from deepswe.env.sandbox.docker import DockerSandbox

    path, base, gold = repo
    limits = SandboxLimits(memory="1g", pids=256)
    task = _task(path, base, gold, True)  # six found from the patches, when first graded
    image = ensure_task_image(task, log=lambda _: None)
    run = grade_patch(task, gold, image=image, sandbox_limits=limits)
    assert run.grade.outcome is Outcome.RESOLVED, run.text[-3000:]
    assert (
        grade_patch(task, "", image=image, sandbox_limits=limits).grade.outcome
        is Outcome.UNRESOLVED
    )
    with DockerSandbox(image, limits) as sb:  # the agent's sandbox: nothing of the fix
        r = sb.run("ls /wheels-grading 2>&1; python -c 'import six' 2>&1", timeout=30)
    assert "No such file" in r.stdout and "ModuleNotFoundError" in r.stdout
    bare = _task(path, base, gold, False)  # nobody fetched six: pip's own reason in the log
    run = grade_patch(bare, gold, image=image, sandbox_limits=limits)
    assert run.grade.outcome is not Outcome.RESOLVED
    assert "deepswe: re-install failed offline" in run.text
    assert "No matching distribution found for six" in run.text
