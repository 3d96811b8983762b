"""The verifiers' records: what is judged, what a verifier says, what selection picks.

    Candidate   one patch for one task (an eval episode, a recorded rollout, a scripted fix)
    Verdict     one verifier's word on one candidate: a score, or a named reason there is none
    Scores      the three verifiers' scores of one candidate and the two baselines' (read
                from its patch, deepswe.verify.baselines), as selection reads them
    Selection   which candidate(s) a method picks from a pool, and the expected correctness

Verifiers are named by VERIFIERS: "ef" (execution-free judge, P(YES) in [0, 1]), "regression"
(tests passing at the base commit that still pass with the candidate: a count) and
"reproduction" (sum over generated issue tests of 1 when the test says the issue is resolved).
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from deepswe.env.trajectory import Trajectory

VERIFIERS = ("ef", "regression", "reproduction")


class VerdictStatus(str, Enum):
    """Why a verdict does or does not carry a score. Only SCORED has one."""

    SCORED = "scored"
    NO_ANSWER = "no_answer"  # the judge replied, but without a YES/NO answer token
    UNREACHABLE = "unreachable"  # endpoint or sandbox unavailable after retries (a resume retries)
    ERROR = "error"  # the verifier ran on this candidate and failed (detail says how)
    NOT_APPLICABLE = "not_applicable"  # e.g. no reproduction test was kept for the task


class Candidate(BaseModel):
    """One patch for one task, with what a verifier may read about how it came to be."""

    model_config = ConfigDict(extra="forbid")

    instance_id: str
    run: int = Field(ge=0, description="the candidate's index within its task's pool")
    patch: str = ""
    resolved: bool | None = Field(None, description="the grader's verdict; None when unknown")
    problem_statement: str = ""
    trajectory: Trajectory | None = Field(None, description="for the execution-free judge")
    origin: str = Field("", description="where it came from: 'eval:<run>', 'r2e:<file>', ...")


class Verdict(BaseModel):
    """One verifier's word on one candidate."""

    model_config = ConfigDict(extra="forbid")

    verifier: str
    instance_id: str
    run: int = Field(ge=0)
    status: VerdictStatus
    score: float | None = Field(None, description="present iff status is SCORED")
    detail: str = Field("", description="why there is no score, or a short account")
    seconds: float = Field(0.0, ge=0)
    extra: dict[str, Any] = Field(default_factory=dict, description="verifier-specific facts")

    @model_validator(mode="after")
    def _score_iff_scored(self) -> Verdict:
        if self.verifier not in VERIFIERS:
            raise ValueError(f"verifier {self.verifier!r} is not one of {VERIFIERS}")
        if (self.score is not None) != (self.status is VerdictStatus.SCORED):
            raise ValueError(f"score {self.score!r} with status {self.status.value}")
        return self


class Scores(BaseModel):
    """A candidate as selection sees it: ground truth plus whichever scores exist."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    run: int
    resolved: bool
    ef: float | None = None
    regression: float | None = None
    reproduction: float | None = None
    changes_code: float | None = Field(
        None, description="baseline: 1 if the patch changes non-test code (baselines.py)"
    )
    smallest: float | None = Field(
        None, description="baseline: 1 / (1 + changed code lines), 0 when no code changes"
    )


class SelectionStatus(str, Enum):
    SELECTED = "selected"
    NO_CANDIDATES = "no_candidates"
    MISSING_SCORES = "missing_scores"  # the method needs a score some candidate lacks


class Selection(BaseModel):
    """What one method picks from one pool."""

    model_config = ConfigDict(extra="forbid")

    instance_id: str
    method: str
    pool: int = Field(ge=0, description="how many candidates it chose among")
    status: SelectionStatus
    chosen: int | None = Field(None, description="the run picked (first survivor by run index)")
    survivors: list[int] = Field(default_factory=list, description="runs tied after every rule")
    expected_resolved: float | None = Field(
        None, description="resolved share among survivors (a uniform pick among the tied)"
    )
    detail: str = ""
