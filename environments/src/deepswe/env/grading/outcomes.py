"""Typed results of grading one episode: the outcome, per-test statuses and the reward."""

from __future__ import annotations

from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field, model_validator


class Outcome(str, Enum):
    """Why an episode got the reward it got. Only RESOLVED earns reward 1.0.

    Infrastructure failures are their own outcome (CONVENTIONS.md: outcomes are honest), so
    a trainer can drop them instead of learning from a silent 0.
    """

    RESOLVED = "resolved"
    UNRESOLVED = "unresolved"
    PATCH_APPLY_FAILED = "patch_apply_failed"
    TEST_TIMEOUT = "test_timeout"
    INFRA_ERROR = "infra_error"
    TAMPERED = "tampered"
    """The grader's canaries or integrity checks found the test process taken over: reward 0,
    counted apart from an honest failure."""


class TestStatus(str, Enum):
    """Status of one test as read from a log.

    The first five values and their spelling are SWE-bench's `TestStatus`
    (swebench.harness.constants); XPASS is pytest's "unexpectedly passed", which SWE-bench
    drops. Values are the words pytest prints in its `-rA` short test summary.
    """

    __test__ = False  # not a pytest test class, despite the name

    PASSED = "PASSED"
    FAILED = "FAILED"
    SKIPPED = "SKIPPED"
    ERROR = "ERROR"
    XFAIL = "XFAIL"
    XPASS = "XPASS"


# SWE-bench's `test_passed`: a listed test counts as passing iff PASSED or XFAIL.
PASSING: frozenset[TestStatus] = frozenset({TestStatus.PASSED, TestStatus.XFAIL})


class TestInfraChange(BaseModel):
    """A test-infrastructure file the patch changed (deepswe.env.grading.testinfra)."""

    __test__ = False  # not a pytest test class, despite the name
    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str
    why: str = Field(
        description="what makes it test infrastructure: conftest, pytest configuration..."
    )
    restored: bool = Field(description="put back to the start before the tests ran (strict rules)")


class GateFlag(BaseModel):
    """A line the patch adds (to any file but the graded ones) that the static gate flags
    (deepswe.env.grading.static_gate)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tier: int = Field(
        description="1: no fix outside a test tool's repository needs it; 2: flag only"
    )
    rule: str
    path: str
    line: int
    text: str


class RunFacts(BaseModel):
    """What a reward run knows besides the tests' statuses, as values (`grade.judge` reads them,
    never the log's text: a file name, a reason or a line of command output that holds a marker
    changes nothing)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    infra_error: str = Field("", description="why the harness failed; empty when it did not")
    applied: bool = Field(True, description="the patch applied (or there was none)")
    apply_why: str = Field("", description="why the patch was refused or did not apply")
    timed_out: bool = Field(False, description="the test run timed out")
    grader_ran_tests: bool = Field(False, description="the section is the grader's own report")
    tampered: list[str] = Field(default_factory=list, description="the test process taken over")
    rejected: str = Field("", description="why the report cannot be trusted (never resolved)")
    reproduction: str = Field(
        "", description="why the issue's reproduction, run as a plain script, still shows the bug"
    )
    test_infra: list[TestInfraChange] = Field(default_factory=list)
    static_gate: list[GateFlag] = Field(default_factory=list)


class GradeResult(BaseModel):
    """The verdict on one episode. `reward` is derived from `outcome`, never set by hand."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    outcome: Outcome
    parser: str = Field(description="registry name (or dotted path) of the log parser used")
    reason: str = Field(description="one short line saying why this outcome")
    statuses: dict[str, TestStatus] = Field(
        default_factory=dict, description="every test found in the log -> its status"
    )
    f2p_failed: list[str] = Field(
        default_factory=list, description="FAIL_TO_PASS tests not passing (incl. missing)"
    )
    p2p_failed: list[str] = Field(
        default_factory=list, description="PASS_TO_PASS tests not passing (incl. missing)"
    )
    missing: list[str] = Field(default_factory=list, description="graded tests absent from the log")
    mismatched: list[str] = Field(
        default_factory=list,
        description="R2E-Gym rule: expected tests found with a status other than expected",
    )
    unexpected: list[str] = Field(
        default_factory=list,
        description="R2E-Gym rule: tests in the log that the expected statuses do not list",
    )
    rules: Literal["strict", "swebench"] = Field(
        "swebench", description="the grading rules applied (deepswe.data.task.TestSpec.rules)"
    )
    grader_ran_tests: bool = Field(
        False,
        description="the grader ran pytest itself and graded its own report (strict rules, a "
        "pytest command); False: the task's command ran and its output was graded",
    )
    test_infra: list[TestInfraChange] = Field(
        default_factory=list,
        description="test infrastructure the patch changed (the gold patch's own files aside)",
    )
    static_gate: list[GateFlag] = Field(
        default_factory=list,
        description="lines the patch adds (graded files aside) that reach for the test machinery "
        "(tier 1: unresolved under strict rules) or look like it (tier 2: flagged only)",
    )

    @model_validator(mode="before")
    @classmethod
    def _reward_is_derived(cls, data: Any) -> Any:
        # Serialised grades carry `reward` (a computed field): reading one back checks it and
        # drops it. It can never be set to anything but what the outcome gives.
        if isinstance(data, dict) and "reward" in data:
            data = dict(data)
            reward = data.pop("reward")
            derived = 1.0 if data.get("outcome") in (Outcome.RESOLVED, "resolved") else 0.0
            if reward != derived:
                raise ValueError(
                    f"reward {reward!r} given, but outcome {data.get('outcome')!r} "
                    f"gives {derived}: the reward is derived, never set"
                )
        return data

    @computed_field  # type: ignore[prop-decorator]
    @property
    def reward(self) -> float:
        """1.0 exactly when RESOLVED, else 0.0 (binary outcome reward, DeepSWE/R2E-Gym)."""
        return 1.0 if self.outcome is Outcome.RESOLVED else 0.0

    @property
    def resolved(self) -> bool:
        return self.outcome is Outcome.RESOLVED
