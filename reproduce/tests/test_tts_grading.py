"""The scripted kinds of a real swe-mini task, graded by the real grader in Docker: each is what
its construction says (the gold resolves; a comment fails the FAIL_TO_PASS tests; a fix in the
wrong place is unresolved; the gold plus another task's bug passes FAIL_TO_PASS and fails
PASS_TO_PASS), stored as ordinary episode records, and a resume grades nothing twice."""

from __future__ import annotations

import pytest

from deepswe.env.grading.outcomes import Outcome
from deepswe.eval.config import EvalConfig
from deepswe.eval.store import EpisodeStatus, RunStore
from deepswe.reproduce.tts.grading import POLICY, grade_plan
from deepswe.reproduce.tts.plan import plan_task

pytestmark = [pytest.mark.docker, pytest.mark.slow]
TASK = "isodate__isodate-2184d719"  # the first test task: every kind but partial exists for it


@pytest.fixture(scope="module")
def isodate():
    """swe-mini:test with isodate's sources in the cache (what `make data` does for it)."""
    from deepswe.data.datasets import load_tasks
    from deepswe.data.loaders import load_jsonl
    from deepswe.data.swemini.manifest import TASKS, load_manifest
    from deepswe.data.swemini.sources import fetch

    manifest = load_manifest()
    manifest = manifest.model_copy(update={"projects": [manifest.project("isodate")]})
    rows = [r for r in load_jsonl(TASKS) if r.repo.endswith("/isodate")]
    fetch(manifest, rows, log=lambda _: None, rebuild=False)
    return [t for t in load_tasks("swe-mini:test") if t.repo.endswith("/isodate")]


def test_each_kind_is_graded_as_its_construction_says(isodate, tmp_path):
    task = next(t for t in isodate if t.instance_id == TASK)
    counts = {"right": 2, "misedit": 1, "wrong_place": 1, "regression": 1, "comment": 1, "empty": 1}
    plan = plan_task(task, counts, isodate, seed=0)
    assert [p.kind for p in plan] == [k for k, n in counts.items() for _ in range(n)]
    folder = tmp_path / "made"
    got = grade_plan(
        {TASK: plan}, {TASK: task}, EvalConfig(), folder, workers=2, log=lambda _: None
    )
    assert sum(got.values()) == len(plan)
    records = {r.run: r for r in RunStore(folder).records()}
    assert sorted(records) == [p.run for p in plan]
    for p in plan:
        r = records[p.run]
        assert r.status is EpisodeStatus.GRADED, (p.kind, r.reason)
        assert r.trajectory.patch == p.patch and r.trajectory.policy == POLICY
        g = r.trajectory.grade
        if p.kind == "right":
            assert r.outcome is Outcome.RESOLVED, g.reason
        elif p.kind == "regression":  # FAIL_TO_PASS passes, PASS_TO_PASS breaks
            assert r.outcome is Outcome.UNRESOLVED and not g.f2p_failed and g.p2p_failed, p.detail
        elif p.kind in ("comment", "empty"):  # the code is the base's: FAIL_TO_PASS fails
            assert r.outcome is Outcome.UNRESOLVED and g.f2p_failed, p.detail
        elif p.kind == "wrong_place":  # the bug left; this one even masks it for FAIL_TO_PASS
            assert r.outcome is Outcome.UNRESOLVED, p.detail  # (return 28 for February)
        else:  # misedit: only the grader knows
            assert r.outcome in (Outcome.RESOLVED, Outcome.UNRESOLVED)
    again = grade_plan({TASK: plan}, {TASK: task}, EvalConfig(), folder, workers=2)
    assert not again  # a resume: everything is stored, nothing graded again
