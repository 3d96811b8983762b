"""What a patch is, in real containers: the agent's change since the sandbox started, nothing else,
whatever the image's install left behind and whatever the agent did with git or Python."""

from __future__ import annotations

import pytest

from deepswe.data.task import HiddenTests
from deepswe.env.episode import run_task
from deepswe.env.grading.outcomes import Outcome
from deepswe.env.images.task import ensure_task_image
from deepswe.env.policies.scripted import FINISH, ScriptedPolicy, patch_to_actions
from deepswe.env.sandbox import SandboxLimits
from deepswe.env.sandbox.docker import DockerSandbox
from deepswe.env.trajectory import Ending

pytestmark = pytest.mark.docker

LIMITS = SandboxLimits(memory="1g", pids=256)


def bash(cmd: str) -> str:
    return f"<function=execute_bash><parameter=cmd>{cmd}</parameter></function>"


def test_the_install_leaves_untracked_files(installed_calc_task):
    """The precondition of the next test: a fresh sandbox already holds the egg-info."""
    with DockerSandbox(ensure_task_image(installed_calc_task, log=lambda _: None), LIMITS) as sb:
        untracked = sb.run("git status --porcelain --untracked-files=all").stdout.split("\n")
    assert "?? calc.egg-info/PKG-INFO" in untracked


def test_gold_resolves_after_the_agent_runs_python(installed_calc_task):
    """Regression (a correct fix graded unresolved): the egg-info and bytecode the agent's Python
    wrote entered the patch; in the grading sandbox `git apply` refused it, `patch --batch`
    reversed the fix, and the tests ran on the buggy code."""
    script = patch_to_actions(installed_calc_task.gold_patch) + [
        bash("python -c 'import calc.ops' && python -m pytest -q tests"),
        bash("python -m compileall -q calc && ls calc/__pycache__"),  # bytecode, written anyway
        bash("pip install --no-index --no-build-isolation --no-deps -e . >/dev/null"),
        FINISH,
    ]
    traj = run_task(installed_calc_task, ScriptedPolicy(script), sandbox_limits=LIMITS)
    assert "ops.cpython-311.pyc" in traj.steps[-3].observation  # (the last step is finish)
    assert (traj.ending, traj.outcome, traj.reward) == (
        Ending.SUBMITTED,
        Outcome.RESOLVED.value,
        1.0,
    ), traj.grade
    assert [ln for ln in traj.patch.splitlines() if ln.startswith("diff --git")] == [
        "diff --git a/calc/ops.py b/calc/ops.py"
    ]


def test_an_agent_that_commits_its_fix_resolves(calc_task):
    """Diffing against HEAD submitted nothing once the agent had committed."""
    script = patch_to_actions(calc_task.gold_patch) + [
        # R2E-Gym's execute_bash refuses a command starting with `git`; agents write `cd && git`
        bash("cd /testbed && git add -A && git commit -qm 'fix add' && git log --oneline | wc -l"),
        bash("cd /testbed && git checkout -q -b elsewhere && git status --porcelain | wc -l"),
        FINISH,
    ]
    traj = run_task(calc_task, ScriptedPolicy(script), sandbox_limits=LIMITS)
    assert "[STDOUT]\n\n2" in traj.steps[-3].observation  # two commits: base and the fix
    assert (traj.outcome, traj.reward) == (Outcome.RESOLVED.value, 1.0), traj.grade
    assert "+    return a + b" in traj.patch


def test_rewriting_a_graded_test_file_earns_nothing(calc_task):
    """A task whose graded test ships in the repository (as swe-mini's do): the agent replaces
    it by a test of the same name that passes, and leaves the bug. Grading restores the file."""
    task = calc_task.model_copy(
        update={
            "hidden": HiddenTests(
                fail_to_pass=["tests/test_visible.py::test_clamp"],
                graded_files=["tests/test_visible.py"],
            )
        }
    )
    script = [
        bash("printf 'def test_clamp():\\n    pass\\n' > tests/test_visible.py"),
        # a wrong "fix": clamp is broken too, and add is left as it was
        bash("printf 'def clamp(x, lo, hi):\\n    return x\\n' >> calc/ops.py"),
        FINISH,
    ]
    traj = run_task(task, ScriptedPolicy(script), sandbox_limits=LIMITS)
    assert "tests/test_visible.py" in traj.patch  # the agent did submit its rewritten test
    assert (traj.outcome, traj.reward) == (Outcome.UNRESOLVED.value, 0.0), traj.grade
    assert traj.grade.f2p_failed == ["tests/test_visible.py::test_clamp"]
    # Control: without the restore the same patch would have been graded resolved.
    unguarded = task.model_copy(
        update={"hidden": task.hidden.model_copy(update={"graded_files": []})}
    )
    replay = run_task(unguarded, ScriptedPolicy(script), sandbox_limits=LIMITS)
    assert (replay.outcome, replay.reward) == (Outcome.RESOLVED.value, 1.0)


def test_a_grading_failure_is_an_infra_error_not_a_reward(calc_task):
    """The task's own test patch cannot apply (a broken task): the row is infra_error end to end
    (ending included, which is what trainers filter on), with no reward."""
    stale = (  # a test patch whose context is not in the repository
        "diff --git a/tests/test_visible.py b/tests/test_visible.py\n"
        "--- a/tests/test_visible.py\n+++ b/tests/test_visible.py\n"
        "@@ -1 +1 @@\n-this line is not in the file\n+def test_add(): pass\n"
    )
    broken = calc_task.model_copy(
        update={"hidden": calc_task.hidden.model_copy(update={"test_patch": stale})}
    )
    traj = run_task(broken, ScriptedPolicy(patch_to_actions(calc_task.gold_patch) + [FINISH]))
    assert (traj.ending, traj.outcome, traj.reward) == (
        Ending.INFRA_ERROR,
        Outcome.INFRA_ERROR.value,
        None,
    )
    assert traj.ending_detail.startswith("grading failed after the episode ended (submitted)")
    assert "hidden tests did not apply" in traj.ending_detail


def test_a_task_image_that_fails_to_build_is_said_as_such(calc_task):
    """Gold submitted (no episode, as `validate` grades it) on a task whose install command
    fails: the row is infra_error saying the image failed to build and nothing was graded, not
    that grading failed after an episode."""
    env = calc_task.environment.model_copy(update={"install": ["echo cannot install; exit 3"]})
    broken = calc_task.model_copy(
        update={"instance_id": "calc__calc-unbuildable", "environment": env}
    )
    from deepswe.env.policies.scripted import GoldPatchPolicy

    traj = run_task(broken, GoldPatchPolicy(broken.gold_patch))
    assert (traj.ending, traj.outcome, traj.reward) == (
        Ending.INFRA_ERROR,
        Outcome.INFRA_ERROR.value,
        None,
    )
    assert traj.ending_detail.startswith("the task's image failed to build (nothing was graded)")
    assert "cannot install" in traj.ending_detail
