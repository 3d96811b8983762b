"""Infra errors are never results: counted apart, retried, and a run that keeps them exits 3; a bug
in a policy is recorded with its traceback and does not stop the batch. Real containers, real
gradings."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from deepswe.data.toy import make_toy_tasks, write_tasks
from deepswe.env.images.task import ensure_task_image
from deepswe.env.policies import PolicySpec, Reply
from deepswe.eval.config import EvalConfig
from deepswe.eval.runner import run_all
from deepswe.eval.store import EpisodeStatus, RunStore

pytestmark = pytest.mark.docker
CLI = str(Path(sys.executable).with_name("deepswe-eval"))
STALE_TEST_PATCH = (  # context that is nowhere in the repository: the task cannot be graded
    "diff --git a/tests/test_smoke.py b/tests/test_smoke.py\n"
    "--- a/tests/test_smoke.py\n+++ b/tests/test_smoke.py\n"
    "@@ -1 +1 @@\n-this line is not in the file\n+x = 1\n"
)


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    root = tmp_path_factory.mktemp("toy")
    tasks = make_toy_tasks(root, n=3)
    ensure_task_image(tasks[0], log=lambda _: None)  # one image serves all three
    return root, tasks


def test_a_task_that_cannot_be_graded_makes_the_run_exit_3(toy):
    root, tasks = toy
    broken = tasks[1].model_copy(
        update={"hidden": tasks[1].hidden.model_copy(update={"test_patch": STALE_TEST_PATCH})}
    )
    data = write_tasks([tasks[0], broken], root / "broken.jsonl")
    out = root / "run-broken"
    cmd = [CLI, "run", "--dataset", str(data), "eval.policy.name=gold", "--out", str(out)]
    cmd += ["eval.infra_retries=1", "eval.sandbox.memory=1g"]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 3, res.stderr
    assert "1 episode(s) are still infra_error after 1 retries" in res.stderr
    assert broken.instance_id in res.stderr and "hidden tests did not apply" in res.stderr
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["counts"] == {"resolved": 1, "infra_error": 1}
    # Every graded episode keeps its test log where swebench keeps it (issue 27).
    log = (out / "reports" / "run-0" / tasks[0].instance_id / "test_output.txt").read_text()
    assert ">>>>> Tests Run By The Grader" in log and "PASSED tests/" in log
    assert "--- the test process's output (not graded) ---" in log
    (record,) = [r for r in RunStore(out).records() if r.status is EpisodeStatus.INFRA_ERROR]
    assert record.attempts == 2 and record.trajectory.reward is None
    assert record.trajectory.ending == "infra_error"
    # A stated tolerance lets the same run finish with exit 0 (and retries the episode again).
    res = subprocess.run([*cmd, "eval.max_infra_errors=1"], capture_output=True, text=True)
    assert res.returncode == 0 and "retrying 1 infra_error episodes" in res.stderr, res.stderr


class TypoPolicy:
    """A plug-in policy with a programming error in its reply."""

    name = "typo"

    def reply(self, messages, *, timeout) -> Reply:
        return Reply(text=messages.contnet)  # AttributeError

    def count_tokens(self, messages):
        return None


def test_a_bug_in_a_policy_is_recorded_with_its_traceback_and_the_batch_goes_on(toy):
    """Regression (issue 27): one episode's exception stopped a whole batch."""
    root, tasks = toy
    store = RunStore(root / "run-typo")
    cfg = EvalConfig(policy=PolicySpec(name=f"{__name__}:TypoPolicy"), runs=2, infra_retries=2)
    counts = run_all(tasks, cfg, store)
    assert counts == {"infra_error": 6}  # every episode ran and was stored
    records = store.records()
    assert len(records) == 6 and all(r.status is EpisodeStatus.INFRA_ERROR for r in records)
    assert all(r.attempts == 1 for r in records)  # a bug is not retried
    assert "AttributeError" in records[0].reason and "contnet" in records[0].reason
    assert "Traceback" in records[0].reason
