"""R2E-Gym's layout, in real containers: an image that ships its hidden tests in /r2e_tests and
its test script in /testbed/run_tests.sh, with the virtualenv at /testbed/.venv, as R2E-Gym's
own images do (R2E-Gym's repo_analysis/base_dockerfiles). The repository is made here.

During the episode the agent can neither read nor list the tests or the script; grading puts
the row's tests at /root/r2e_tests behind /testbed/r2e_tests and runs the task's command, so a
patch that edits or adds run_tests.sh changes nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from deepswe.data.r2e_toy import EXPECTED, OPS_GOOD, make_r2e_layout_task
from deepswe.data.task import Task
from deepswe.env.agent.loop import run_episode
from deepswe.env.episode import grade_patch, run_task
from deepswe.env.grading.outcomes import Outcome
from deepswe.env.images.task import ensure_task_image
from deepswe.env.policies.scripted import FINISH, EmptyPolicy, GoldPolicy, ScriptedPolicy
from deepswe.env.sandbox import SandboxLimits
from deepswe.env.sandbox.docker import DockerSandbox

pytestmark = pytest.mark.docker

LIMITS = SandboxLimits(memory="1g", pids=256)
# What R2E-Gym's run_tests.sh would be if a patch rewrote it: every test "passes".
FAKE_SCRIPT = "echo 'PASSED r2e_tests/test_1.py::TestOps::test_add'\n"


@pytest.fixture(scope="module")
def task(tmp_path_factory) -> Task:
    return make_r2e_layout_task(tmp_path_factory.mktemp("r2e"))


@pytest.fixture(scope="module")
def repo(task) -> Path:
    return Path(task.environment.source)


@pytest.fixture(scope="module")
def image(task) -> str:
    return ensure_task_image(task, log=lambda _: None)


def _bash(cmd: str) -> str:
    return f"<function=execute_bash><parameter=cmd>{cmd}</parameter></function>"


def test_the_image_ships_them_as_r2e_gyms_does(image):
    """The fixture is the layout under test: without the grader's step, they are there."""
    with DockerSandbox(image, LIMITS) as sb:
        r = sb.run("ls /r2e_tests /testbed/run_tests.sh /testbed/.venv/bin/python")
    assert r.exit_code == 0 and "test_1.py" in r.stdout


def test_the_agent_cannot_read_or_list_the_hidden_tests_or_the_script(task, image):
    probes = [
        "ls /r2e_tests /root/r2e_tests /testbed/r2e_tests",
        "cat /testbed/run_tests.sh /root/run_tests.sh",
        "grep -rl test_add / --include=*.py 2>/dev/null | grep -v /opt/ | head",
        "find / -name 'run_tests.sh' -o -name 'r2e_tests' 2>/dev/null | head",
    ]
    policy = ScriptedPolicy([_bash(p) for p in probes] + [FINISH])
    with DockerSandbox(image, LIMITS) as sb:
        traj = run_episode(task, policy, sb)
    seen = [s.observation for s in traj.steps[: len(probes)]]
    assert "No such file" in seen[0] and "test_1.py" not in seen[0]
    assert "No such file" in seen[1] and "pytest" not in seen[1]
    assert "r2e_tests" not in seen[2] and "run_tests" not in seen[3]
    assert "r2e_tests" not in seen[3]
    assert traj.patch == ""  # hiding them is not the agent's change, nor is .venv


def test_gold_resolves_empty_does_not_and_statuses_match_expected(task, image):
    gold = run_task(task, GoldPolicy(task.gold_patch), sandbox_limits=LIMITS)
    assert gold.outcome == Outcome.RESOLVED.value, gold.grade
    assert gold.grade.grader_ran_tests and gold.grade.rules == "strict"
    assert {k: v.value for k, v in gold.grade.statuses.items()} == EXPECTED
    empty = run_task(task, EmptyPolicy(), sandbox_limits=LIMITS)
    assert empty.outcome == Outcome.UNRESOLVED.value
    assert empty.grade.mismatched == ["TestOps.test_add"]


def test_a_patch_that_rewrites_or_adds_the_test_script_changes_nothing(task, image, repo):
    from deepswe.data.toy import diff_to

    for patch in (
        diff_to(repo, "run_tests.sh", FAKE_SCRIPT),  # the script added in the repository
        diff_to(repo, "r2e_tests/test_1.py", "def test_nothing():\n    pass\n"),
    ):
        run = grade_patch(task, patch, sandbox_limits=LIMITS)
        assert run.grade.outcome is Outcome.UNRESOLVED, run.text
        assert run.grade.mismatched == ["TestOps.test_add"]
    with_fix = diff_to(repo, "calc/ops.py", OPS_GOOD) + diff_to(repo, "run_tests.sh", "exit 1\n")
    assert grade_patch(task, with_fix, sandbox_limits=LIMITS).grade.resolved


def test_the_grading_log_names_the_hidden_tests_from_the_row(task, image):
    run = grade_patch(task, task.gold_patch, sandbox_limits=LIMITS)
    assert "PASSED r2e_tests/test_1.py::TestOps::test_add" in run.log


def test_the_tests_folder_gets_r2e_gyms_init_and_the_fix_commits_helper(tmp_path):
    """R2E-Gym's create_tests writes r2e_tests/__init__.py and copies Tests/helper.py as the fix
    commit has it; a row lists neither among its test files. Pillow's tests import `.helper`."""
    task = make_r2e_layout_task(tmp_path, helper=True)
    assert (
        set(task.hidden.test_files) == {"test_1.py"} and "Tests/helper.py" in task.hidden.test_patch
    )
    gold = grade_patch(task, task.gold_patch, sandbox_limits=LIMITS)
    assert gold.grade.outcome is Outcome.RESOLVED, gold.text
    empty = grade_patch(task, "", sandbox_limits=LIMITS)
    assert empty.grade.mismatched == ["TestOps.test_add"]
