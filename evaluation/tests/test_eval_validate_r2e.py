"""`deepswe-eval validate` on an R2E-Gym-style row (made here, in R2E-Gym's image layout):
every test's status is compared with the row's expected_output_json and disagreements named."""

from __future__ import annotations

import pytest

from deepswe.data.r2e_toy import make_r2e_layout_task
from deepswe.env.sandbox import SandboxLimits
from deepswe.eval.config import EvalConfig
from deepswe.eval.validate import validate_tasks

pytestmark = pytest.mark.docker


def test_statuses_agree_with_the_expected_output(tmp_path):
    task = make_r2e_layout_task(tmp_path / "src")
    cfg = EvalConfig(sandbox=SandboxLimits(memory="1g", pids=256))
    result = validate_tasks([task], tmp_path / "validation", cfg)
    assert result.ok, result.summary()
    statuses = result.summary()["statuses"]
    assert (statuses["compared"], statuses["agreeing"], statuses["disagreements"]) == (1, 1, {})
    tools = result.summary()["tools"]  # the gold patch replayed through the tools resolves too
    assert (tools["checked"], tools["expressed"], tools["failed"]) == (1, 1, {})
    assert {p.name for p in (tmp_path / "validation").iterdir()} == {"gold", "empty", "tools"}


def test_a_row_whose_expected_output_the_gold_does_not_reproduce_is_named(tmp_path):
    """As if the row's expected_output_json had been recorded on another environment."""
    wrong = {
        "TestOps.test_add": "PASSED",
        "TestOps.test_mul": "FAILED",
        "TestOps.test_div": "PASSED",
    }
    task = make_r2e_layout_task(tmp_path / "src", expected=wrong)
    cfg = EvalConfig(sandbox=SandboxLimits(memory="1g", pids=256))
    result = validate_tasks([task], tmp_path / "validation", cfg, tools=False)
    assert not result.ok and "calc_r2e01" in result.failed
    assert result.disagreements["calc_r2e01"] == [
        "gold run 0: TestOps.test_div: expected PASSED, missing from the run",
        "gold run 0: TestOps.test_mul: expected FAILED, got PASSED",
    ]
