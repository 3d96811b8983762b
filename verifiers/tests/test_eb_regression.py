"""Regression runs in real containers, on the toy dataset's repository (deepswe.data.toy): its
one repository test, tests/test_smoke.py::test_import, passes at the base commit."""

from __future__ import annotations

import pytest

from deepswe.data.task import Task
from deepswe.data.toy import diff_to, git, make_toy_tasks
from deepswe.env.sandbox import SandboxLimits
from deepswe.verify.eb import SandboxPlan, regression, score_regression
from deepswe.verify.store import VerdictStore
from deepswe.verify.types import Candidate, VerdictStatus

pytestmark = pytest.mark.docker

PLAN = SandboxPlan(limits=SandboxLimits(memory="1g", pids=256), workers=2)
SMOKE = "tests/test_smoke.py"


@pytest.fixture(scope="module")
def toy(tmp_path_factory) -> tuple[Task, dict[str, str]]:
    """The toy `add` task, its smoke test graded (as swe-mini grades repository tests), and
    patches: gold, one that breaks the import, and one that also rewrites the smoke test."""
    root = tmp_path_factory.mktemp("toy")
    (task,) = make_toy_tasks(root, n=1)
    task = task.model_copy(
        update={"hidden": task.hidden.model_copy(update={"graded_files": [SMOKE]})}
    )
    repo = root / "toycalc"
    git(repo, "checkout", "-q", task.base_commit)  # the later commit holds every fix
    ops = (repo / "toycalc" / "ops.py").read_text()
    breaking = diff_to(repo, "toycalc/ops.py", ops + "\nraise ImportError('broken')\n")
    rigged = breaking + diff_to(repo, SMOKE, "def test_import():\n    assert True\n")
    git(repo, "checkout", "-q", "main")
    return task, {"gold": task.gold_patch or "", "breaking": breaking, "rigged": rigged}


def _pool(task: Task, patches: list[str]) -> dict[str, list[Candidate]]:
    return {
        task.instance_id: [
            Candidate(instance_id=task.instance_id, run=k, patch=p) for k, p in enumerate(patches)
        ]
    }


def test_breaking_candidates_score_below_gold_and_rewritten_tests_are_restored(
    toy, tmp_path, monkeypatch
):
    task, patches = toy
    order = ["gold", "breaking", "rigged", "gold", ""]
    pools = _pool(task, [patches.get(name, "") for name in order])
    logs: list[str] = []
    store = VerdictStore(tmp_path / "run")
    got = score_regression(pools, {task.instance_id: task}, store, plan=PLAN, log=logs.append)
    scores = [got[(task.instance_id, k)].score for k in range(len(order))]
    assert all(got[(task.instance_id, k)].status is VerdictStatus.SCORED for k in range(5))
    # gold and the empty patch keep the one base-passing test; the breaking patch does not, and
    # the rigged one, whose rewrite of the graded smoke test is undone, does not either.
    assert scores == [1.0, 0.0, 0.0, 1.0, 1.0], [got[(task.instance_id, k)] for k in range(5)]
    assert got[(task.instance_id, 1)].extra["broken"] == [f"{SMOKE}::test_import"]
    # identical patches run once: base, gold, breaking, rigged; the empty patch is the base run
    assert sum("candidate runs" in line for line in logs) == 4
    assert len(list((tmp_path / "run" / "eb" / "regression").rglob("*.json"))) == 4
    assert [got[(task.instance_id, k)].extra["cached"] for k in (0, 3, 4)] == [False, False, True]
    # a resume finds everything done and runs nothing
    logs.clear()
    assert (
        score_regression(pools, {task.instance_id: task}, store, plan=PLAN, log=logs.append) == {}
    )
    assert logs == []
    # control: without the restore, the rigged patch's own smoke test would pass
    monkeypatch.setattr(regression, "restored_paths", lambda task, passing: [])
    rigged = _pool(task, [patches["rigged"]])
    again = score_regression(
        rigged, {task.instance_id: task}, VerdictStore(tmp_path / "x"), plan=PLAN
    )
    assert again[(task.instance_id, 0)].score == 1.0


def test_a_patch_that_does_not_apply_scores_zero_and_says_so(toy, tmp_path):
    task, _ = toy
    bad = "--- a/nowhere.py\n+++ b/nowhere.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"
    got = score_regression(
        _pool(task, [bad]), {task.instance_id: task}, VerdictStore(tmp_path), plan=PLAN, log=print
    )
    v = got[(task.instance_id, 0)]
    assert (v.status, v.score, v.extra["apply_failed"]) == (VerdictStatus.SCORED, 0.0, True)
    assert "did not apply" in v.detail
