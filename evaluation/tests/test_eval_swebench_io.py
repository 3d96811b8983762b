"""Our SWE-bench files against swebench's own code: its report.json builder and its
predictions reader must agree with what we write."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from swebench.harness.grading import get_eval_report
from swebench.harness.utils import get_predictions_from_file

from deepswe.data.loaders.swebench import swebench_row_to_task
from deepswe.env.grading import grade
from deepswe.env.grading.markers import END_TEST_OUTPUT, START_TEST_OUTPUT
from deepswe.env.grading.outcomes import GradeResult, Outcome
from deepswe.env.trajectory import Ending, Trajectory
from deepswe.eval.store import EpisodeRecord, EpisodeStatus, RunStore
from deepswe.eval.swebench_io import instance_report, read_predictions, write_swebench_files

F2P = ["tests/test_requests.py::test_auth"]
P2P = ["tests/test_requests.py::test_ok", "tests/test_requests.py::test_net"]


@pytest.fixture
def task():
    row = {
        "repo": "psf/requests",
        "instance_id": "psf__requests-1",
        "base_commit": "abc",
        "version": "2.31",
        "problem_statement": "x",
        "test_patch": "",
        "FAIL_TO_PASS": json.dumps(F2P),
        "PASS_TO_PASS": json.dumps(P2P),
    }
    t = swebench_row_to_task(row)
    return t.model_copy(
        update={"test_spec": t.test_spec.model_copy(update={"command": "pytest -rA"})}
    )


LOGS = {
    "all pass": "PASSED tests/test_requests.py::test_auth\nPASSED tests/test_requests.py::test_ok\n"
    "PASSED tests/test_requests.py::test_net\n",
    "f2p fails": "FAILED tests/test_requests.py::test_auth - assert\nPASSED tests/test_requests.py::test_ok\n"
    "PASSED tests/test_requests.py::test_net\n",
    "p2p skipped": "PASSED tests/test_requests.py::test_auth\nPASSED tests/test_requests.py::test_ok\n"
    "SKIPPED tests/test_requests.py::test_net\n",
    "p2p missing": "PASSED tests/test_requests.py::test_auth\nPASSED tests/test_requests.py::test_ok\n",
}


@pytest.mark.parametrize("case", sorted(LOGS))
def test_report_json_matches_swebench_get_eval_report(task, tmp_path, case):
    log = f"{START_TEST_OUTPUT}\n{LOGS[case]}{END_TEST_OUTPUT}\n"
    ours = instance_report(task, "diff", grade(task, log))
    (tmp_path / "test_output.txt").write_text(log)
    spec = SimpleNamespace(
        instance_id=task.instance_id,
        repo=task.repo,
        version=task.version,
        FAIL_TO_PASS=F2P,
        PASS_TO_PASS=P2P,
    )
    pred = {"instance_id": task.instance_id, "model_name_or_path": "m", "model_patch": "diff"}
    theirs = get_eval_report(
        spec, pred, str(tmp_path / "test_output.txt"), include_tests_status=True
    )
    assert ours == theirs


def test_unapplied_and_missing_patches_follow_swebench(task):
    failed = GradeResult(outcome=Outcome.PATCH_APPLY_FAILED, parser="pytest", reason="")
    assert instance_report(task, "bad", failed)[task.instance_id] == {
        "patch_is_None": False,
        "patch_exists": True,
        "patch_successfully_applied": False,
        "resolved": False,
    }
    assert instance_report(task, None, None)[task.instance_id]["patch_is_None"] is True


def test_predictions_file_is_read_by_swebench(task, tmp_path):
    store = RunStore(tmp_path / "run")
    for k, patch in enumerate(["diff --git a/x b/x\n", ""]):
        traj = Trajectory(
            instance_id=task.instance_id,
            policy="p",
            messages=[],
            ending=Ending.SUBMITTED,
            patch=patch,
            outcome=Outcome.UNRESOLVED,
            grade=GradeResult(outcome=Outcome.UNRESOLVED, parser="pytest", reason=""),
        )
        store.save(
            EpisodeRecord(
                instance_id=task.instance_id,
                run=k,
                repo=task.repo,
                status=EpisodeStatus.GRADED,
                outcome="unresolved",
                trajectory=traj,
            )
        )
    paths = write_swebench_files(store, [task], 2, "my-model")
    preds = get_predictions_from_file(str(paths[0]), "unused", "test")
    assert preds == [
        {
            "instance_id": task.instance_id,
            "model_name_or_path": "my-model",
            "model_patch": "diff --git a/x b/x\n",
        }
    ]
    assert read_predictions(paths[1])[0]["model_patch"] == ""
    report = json.loads(
        (store.root / "reports/run-0" / task.instance_id / "report.json").read_text()
    )
    assert report[task.instance_id]["tests_status"]["FAIL_TO_PASS"]["failure"] == F2P
