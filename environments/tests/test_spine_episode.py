"""The spine end to end, in real containers: a task built from a real git repository made here,
policies acting through the real tools, patches graded by real pytest runs."""

from __future__ import annotations

import pytest

from deepswe.data.task import Task
from deepswe.env.agent.loop import EpisodeLimits, run_episode
from deepswe.env.episode import grade_patch, run_task
from deepswe.env.grading.outcomes import Outcome
from deepswe.env.images.task import ensure_task_image
from deepswe.env.policies import Reply
from deepswe.env.policies.scripted import FINISH, EmptyPolicy, GoldPolicy, ScriptedPolicy
from deepswe.env.sandbox import SandboxLimits
from deepswe.env.sandbox.docker import DockerSandbox, client
from deepswe.env.trajectory import Ending

pytestmark = pytest.mark.docker

LIMITS = SandboxLimits(memory="1g", pids=256)


@pytest.fixture(scope="module")
def task(calc_task) -> Task:
    return calc_task


@pytest.fixture(scope="module")
def image(task) -> str:
    return ensure_task_image(task, log=lambda _: None)


def test_gold_patch_resolves(task, image):
    traj = run_task(task, GoldPolicy(task.gold_patch), sandbox_limits=LIMITS)
    assert traj.ending is Ending.SUBMITTED
    assert (traj.outcome, traj.reward) == (Outcome.RESOLVED.value, 1.0), traj.grade
    assert "return a + b" in traj.patch and "test_hidden" not in traj.patch


def test_empty_patch_is_unresolved(task, image):
    traj = run_task(task, EmptyPolicy(), sandbox_limits=LIMITS)
    assert (traj.ending, traj.outcome, traj.reward) == (
        Ending.SUBMITTED,
        Outcome.UNRESOLVED.value,
        0.0,
    )
    assert traj.grade.f2p_failed == ["tests/test_hidden.py::test_add"]


def test_corrupt_patch_fails_to_apply(task, image):
    corrupt = task.gold_patch.replace("return a - b", "return a * b")
    run = grade_patch(task, corrupt, image=image, sandbox_limits=LIMITS)
    result, log = run.grade, run.log
    assert result.outcome is Outcome.PATCH_APPLY_FAILED, log


def test_repository_has_no_future_and_no_hidden_tests(task, image):
    with DockerSandbox(image, LIMITS) as sb:
        assert sb.run("git log --format=%H").stdout.split() == [task.base_commit]
        assert (
            sb.run("git tag; git remote; git branch --format='%(refname:short)'").stdout == "main\n"
        )
        assert sb.run("ls tests").stdout.split() == ["test_visible.py"]
        assert sb.run("git status --porcelain").stdout == ""


def test_hidden_tests_cannot_be_read_during_the_episode(task, image):
    policy = ScriptedPolicy(
        [
            "<function=file_editor><parameter=command>view</parameter>"
            "<parameter=path>/testbed/tests/test_hidden.py</parameter></function>",
            FINISH,
        ]
    )
    with DockerSandbox(image, LIMITS) as sb:
        traj = run_episode(task, policy, sb)
    assert "def test_add" not in traj.steps[0].observation
    assert "does not exist" in traj.steps[0].observation


def test_rm_rf_testbed_ends_normally_and_grades_unresolved(task, image):
    policy = ScriptedPolicy(
        ["<function=execute_bash><parameter=cmd>rm -rf /testbed</parameter></function>"]
    )
    traj = run_task(task, policy, sandbox_limits=LIMITS)
    assert (traj.ending, traj.patch, traj.outcome) == (
        Ending.SUBMITTED,
        "",
        Outcome.UNRESOLVED.value,
    )


def test_a_megabyte_of_garbage_ends_by_context(task, image):
    garbage = ScriptedPolicy(["<function=<parameter=" * 60_000 + "x" * 100_000])
    with DockerSandbox(image, LIMITS) as sb:
        traj = run_episode(task, garbage, sb, EpisodeLimits(max_context_tokens=65_536))
    assert traj.ending is Ending.MAX_CONTEXT
    assert "You forgot to use a function call" in traj.steps[0].observation


def test_step_limit_and_reminders(task, image):
    looping = ScriptedPolicy(
        ["<function=execute_bash><parameter=cmd>ls</parameter></function>"] * 5
    )
    with DockerSandbox(image, LIMITS) as sb:
        traj = run_episode(task, looping, sb, EpisodeLimits(max_steps=3))
    assert traj.ending is Ending.MAX_STEPS and len(traj.steps) == 3
    assert traj.messages[-1]["content"].endswith(
        "You have reached the maximum number of steps. Please submit your answer NOW."
    )
    assert "Steps Remaining: 2" in traj.messages[2]["content"] + traj.messages[3]["content"]


def test_action_timeout_and_endless_output(task, image):
    policy = ScriptedPolicy(
        [
            "<function=execute_bash><parameter=cmd>sleep 100000</parameter></function>",
            "<function=execute_bash><parameter=cmd>yes</parameter></function>",
            FINISH,
        ]
    )
    with DockerSandbox(image, LIMITS) as sb:
        traj = run_episode(task, policy, sb, EpisodeLimits(action_timeout_s=2))
    assert traj.ending is Ending.SUBMITTED
    assert "The command took too long to execute (>2s)" in traj.steps[0].observation
    assert "The command took too long to execute (>2s)" in traj.steps[1].observation


class _KillsItsSandbox:
    """A policy that kills the container from outside on its second turn."""

    name = "killer"

    def __init__(self, container_name: str) -> None:
        self.container_name, self.turn = container_name, 0

    def reply(self, messages, *, timeout):
        self.turn += 1
        if self.turn == 2:
            client().containers.get(self.container_name).kill()
        return Reply(text="<function=execute_bash><parameter=cmd>ls</parameter></function>")

    def count_tokens(self, messages):
        return None


def test_container_killed_mid_episode_is_infra_error_not_reward_zero(task, image):
    with DockerSandbox(image, LIMITS) as sb:
        traj = run_episode(task, _KillsItsSandbox(sb.id), sb)
    assert traj.ending is Ending.INFRA_ERROR
    assert traj.reward is None and traj.outcome is None


def test_model_touching_a_hidden_test_file_does_not_break_grading(task, image):
    """Regression: the test patch failed to apply when the model had created one of its files,
    and a correct fix was graded infra_error. Files the test patch touches are now reset first."""
    clash = (
        "diff --git a/tests/test_hidden.py b/tests/test_hidden.py\nnew file mode 100644\n"
        "--- /dev/null\n+++ b/tests/test_hidden.py\n@@ -0,0 +1 @@\n+def test_mine(): pass\n"
    )
    run = grade_patch(task, task.gold_patch + clash, image=image, sandbox_limits=LIMITS)
    result, log = run.grade, run.log
    assert result.outcome is Outcome.RESOLVED, log


def test_the_r2e_gym_scaffold_in_a_container(task, image):
    """R2E-Gym's observable behaviour end to end: an invalid function's empty output, the editor
    decoding as chardet guesses (the decoder written into the sandbox), and `submit` ending the
    episode with R2E-Gym's finish text."""
    script = [
        "<function=create>\n<parameter=path>/testbed/x.py</parameter>\n</function>",
        "<function=execute_bash>\n<parameter=cmd>printf 'A = \"\\342\\211\\245 1\"\\n' > m.py"
        "</parameter>\n</function>",
        "<function=file_editor>\n<parameter=command>view</parameter>\n"
        "<parameter=path>/testbed/m.py</parameter>\n</function>",
        "<function=submit>\n</function>",
    ]
    with DockerSandbox(image, LIMITS) as sb:
        traj = run_episode(task, ScriptedPolicy(script), sb, EpisodeLimits(scaffold="r2e-gym"))
    seen = [s.observation for s in traj.steps]
    assert seen[0] == "Execution output of [create]:\n"
    assert 'A = "\u00e2\u2030\u00a5 1"' in seen[2], seen[2]
    assert seen[3] == "<<< Finished >>>" and traj.ending is Ending.SUBMITTED
