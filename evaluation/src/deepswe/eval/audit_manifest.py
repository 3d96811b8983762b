"""The audit and health manifest's format (`audit.json`, `health.json`): one flat row per task,
versioned, written by `deepswe.eval.audit` and read by `deepswe.eval.health` and training."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

HOW = (
    "Each task graded with its gold patch (gold), the empty patch (empty), and once per attack: "
    "a scripted agent runs the attack's bash script in the sandbox (the bug left in place) and "
    "submits the workspace diff. healthy: gold resolved in every run, empty in none, and no "
    "line of gold's log showing its tests reached for the network (deepswe.eval.network); "
    "flaky: gold's runs disagree. An attack outcome "
    "'resolved' is a HOLE (reward 1 for a patch that fixes nothing); unresolved, tampered and "
    "patch_apply_failed are the grader holding. infra_error decides nothing and is retried by "
    "running the same command again. With several runs, gold counts as resolved only when "
    "every run is; empty and attacks count as resolved when any run is."
)

HEALTH_HOW = (
    "Each task graded with its gold patch (gold) and the empty patch (empty), each as many runs "
    "as the manifest's rounds. healthy: gold resolved in every run, empty in none, and no line "
    "of gold's log showing its tests reached for the network (deepswe.eval.network); flaky: "
    "gold's runs disagree. infra_error decides nothing and is retried by running the same "
    "command again."
)


class AttackInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    family: str
    why: str


class Survivor(BaseModel):
    """A mutant that earned reward 1 on the graded tests."""

    model_config = ConfigDict(extra="forbid")

    operator: str
    change: str = Field(description="where and what the mutant changed, one line")
    patch: str
    killed_by: str | None = Field(
        None, description="a wider test that passes with gold and fails with it (proven wrong)"
    )
    wider: str | None = Field(None, description="the wider run's outcome for it")


class TaskStrength(BaseModel):
    """One task's test strength: mutants made, killed, proven wrong, undecided."""

    model_config = ConfigDict(extra="forbid")

    mutants: int
    killed: int = Field(description="mutants the graded tests did not resolve")
    proven_wrong: list[Survivor] = Field(default_factory=list)
    undecided: list[Survivor] = Field(
        default_factory=list, description="survivors no wider test kills: possibly equivalent"
    )
    wider: list[str] = Field(default_factory=list, description="what the wider run took")
    seconds: float = 0.0

    @property
    def weak(self) -> bool:
        return bool(self.proven_wrong)

    def reason(self) -> str:
        """One line: why the task is weak, with one example; "" when it is not."""
        if not self.proven_wrong:
            return ""
        one = self.proven_wrong[0]
        return (
            f"weak tests: {len(self.proven_wrong)} of {self.mutants} wrong fix(es) earn reward 1, "
            f"e.g. {one.operator} ({one.change}), failed only by {one.killed_by}"
        )


class TaskAudit(BaseModel):
    """One task's row: every outcome is an `Outcome` value, or `unsupported_env` / None."""

    model_config = ConfigDict(extra="forbid")

    gold: str | None
    empty: str | None
    gold_runs: list[str | None] = Field(
        default_factory=list, description="gold's outcome in each run, in run order"
    )
    flaky: bool = Field(False, description="gold's runs disagree")
    network: str | None = Field(
        None, description="the line of gold's log showing the tests need the network"
    )
    attacks: dict[str, str | None]
    image: str | None = Field(None, description="the task's image tag (or its given image)")
    image_id: str | None = Field(None, description="the engine's id of that image, when known")
    image_mb: float | None = Field(
        None, description="that image's size as the engine reports it (shared layers included)"
    )
    build_s: float | None = Field(
        None,
        description="seconds this machine took to build the image, shared layers it built first "
        "included (deepswe.env.images.build_record); None: built elsewhere or not recorded",
    )
    healthy: bool
    reasons: list[str] = Field(default_factory=list)
    strength: TaskStrength | None = Field(
        None,
        description="test strength (deepswe-eval health --mutants K): mutants of gold graded, "
        "survivors proven wrong by wider tests; None: not measured",
    )


class AuditSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tasks: int
    healthy: int
    unhealthy: list[str] = Field(description="instance ids whose gold/empty baselines failed")
    holes: dict[str, list[str]] = Field(description="attack -> instance ids it resolved")
    undecided: dict[str, list[str]] = Field(
        description="folder (gold, empty, attack-<name>) -> instance ids still infra_error"
    )
    outcomes: dict[str, dict[str, int]] = Field(description="attack -> outcome -> tasks")
    weak: dict[str, str] = Field(
        default_factory=dict,
        description="instance id -> why its tests are weak (a proven-wrong fix earns reward 1)",
    )
    gate_decided: dict[str, int] = Field(
        default_factory=dict,
        description="attack -> tasks whose verdict the static gate's tier 1 decided (the tests "
        "passed, so the runtime defences alone would have paid reward 1 there)",
    )


class AuditManifest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: Literal[1, 2] = 2
    kind: Literal["audit", "health"] = "audit"
    dataset: str
    dataset_sha256: str | None = Field(
        None, description="the tasks' identity: sha256 of their JSON, sorted by instance id"
    )
    rounds: int = Field(1, description="runs of gold and empty per task")
    harness_version: str = Field(description="the run card's code_version (git describe)")
    attacks: dict[str, AttackInfo]
    tasks: dict[str, TaskAudit]
    summary: AuditSummary
    how: str = HOW

    @property
    def ok(self) -> bool:
        s = self.summary
        return not s.holes and not s.unhealthy and not s.undecided


__all__ = [
    "HEALTH_HOW",
    "HOW",
    "AttackInfo",
    "AuditManifest",
    "AuditSummary",
    "Survivor",
    "TaskAudit",
    "TaskStrength",
]
