"""The gold policy replays a hunk whose context is not unique in its file (pylint-6386's gold
patch has one): the first edit is refused, the policy reads the lines around the hunk and makes
the edit again with wider context, as an agent could. Real container, real tools."""

from __future__ import annotations

import pytest

from deepswe.data.task import EnvironmentSpec, HiddenTests, Task, TaskSource, TestSpec
from deepswe.data.toy import diff_to, git
from deepswe.env.episode import run_task
from deepswe.env.grading.outcomes import Outcome
from deepswe.env.policies.scripted import GoldPatchPolicy, GoldPolicy
from deepswe.env.sandbox import SandboxLimits

pytestmark = pytest.mark.docker

BODY = "    # step one\n    # step two\n    x = a\n    y = b\n    return x - y\n    # end\n    # end\n    # end\n"
OPS = f"def add(a, b):\n{BODY}\n\ndef sub(a, b):\n{BODY}"
TEST = "from ops import add, sub\n\n\ndef test_add():\n    assert add(5, 3) == 8\n\n\ndef test_sub():\n    assert sub(5, 3) == 2\n"


@pytest.fixture(scope="module")
def task(tmp_path_factory) -> Task:
    repo = tmp_path_factory.mktemp("widen") / "ops"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "ops.py").write_text(OPS)
    (repo / "test_ops.py").write_text(TEST)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "ops")
    fixed = OPS.replace("return x - y", "return x + y", 1)  # add's, not sub's
    return Task(
        instance_id="ops__widen-1",
        repo="ops/ops",
        base_commit=git(repo, "rev-parse", "HEAD").strip(),
        problem_statement="add subtracts.",
        source=TaskSource.CUSTOM,
        environment=EnvironmentSpec(source=str(repo), pip=["pytest"]),
        test_spec=TestSpec(command="python -m pytest -rA test_ops.py", log_parser="pytest"),
        hidden=HiddenTests(
            fail_to_pass=["test_ops.py::test_add"],
            pass_to_pass=["test_ops.py::test_sub"],
            graded_files=["test_ops.py"],
        ),
        gold_patch=diff_to(repo, "ops.py", fixed),
    )


def test_a_hunk_with_context_twice_in_its_file_is_replayed_with_wider_context(task):
    assert task.gold_patch.count("return x") == 2  # one hunk; its context fits both functions
    traj = run_task(task, GoldPolicy(task.gold_patch), sandbox_limits=SandboxLimits(memory="1g"))
    assert "Multiple occurrences" in traj.steps[0].observation  # the plain hunk was refused
    assert traj.outcome == Outcome.RESOLVED.value, traj.grade
    assert traj.patch.count("+    return x + y") == 1 and len(traj.steps) == 4


def test_the_gold_patch_as_a_patch_needs_no_episode(task):
    traj = run_task(
        task, GoldPatchPolicy(task.gold_patch), sandbox_limits=SandboxLimits(memory="1g")
    )
    assert traj.steps == [] and traj.patch == task.gold_patch
    assert traj.outcome == Outcome.RESOLVED.value and traj.policy == "gold-patch"
