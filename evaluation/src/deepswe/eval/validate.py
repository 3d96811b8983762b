"""Validating a task set: every task's gold patch resolves it and the empty patch does not.

A validation is two evaluations of the same tasks, `gold` and `empty`, each `rounds` runs, in
`<out>/gold` and `<out>/empty` (ordinary run folders: resumable, infra errors retried and kept
apart, reports written), then a verdict per task. This is how swe-mini's tasks were released
(360: 720/720; the 7 added to the 326 of the current release: 14/14) and how a new task file
should be checked before anyone trains or reports on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from deepswe.data.task import Task
from deepswe.env.grading.outcomes import GradeResult
from deepswe.eval.card import make_card, open_run
from deepswe.eval.config import EvalConfig
from deepswe.eval.runner import run_all
from deepswe.eval.store import EpisodeRecord, EpisodeStatus

EXPECTED = {"gold": "resolved", "empty": "unresolved"}


@dataclass
class Validation:
    """Per-task verdicts. A task passes when every gold run is resolved and every empty run is
    graded unresolved; an infra_error anywhere leaves it undecided, not failed."""

    passed: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # instance id -> what went wrong
    undecided: dict[str, str] = field(default_factory=dict)  # instance id -> the infra error
    # Tasks with expected statuses (R2E-Gym's expected_output_json): every gold run's test
    # statuses against them, one line per test that differs.
    disagreements: dict[str, list[str]] = field(default_factory=dict)
    compared: int = 0  # tasks whose gold statuses were compared

    @property
    def ok(self) -> bool:
        return not self.failed and not self.undecided

    def summary(self) -> dict:
        return {
            "tasks": len(self.passed) + len(self.failed) + len(self.undecided),
            "passed": len(self.passed),
            "failed": self.failed,
            "undecided": self.undecided,
            "statuses": {
                "compared": self.compared,
                "agreeing": self.compared - len(self.disagreements),
                "disagreements": self.disagreements,
                "how": "each gold run's test statuses against the task's expected statuses "
                "(R2E-Gym's expected_output_json), names normalised as R2E-Gym does",
            },
        }


def _verdict(task: Task, records: dict[str, list[EpisodeRecord]]) -> tuple[str, str]:
    """("passed" | "failed" | "undecided", why) for one task from its gold and empty records."""
    for policy, want in EXPECTED.items():
        for r in records[policy]:
            if r.status is EpisodeStatus.INFRA_ERROR:
                return "undecided", f"{policy} run {r.run}: infra_error: {r.reason[:300]}"
            if r.outcome != want:
                why = r.trajectory.grade.reason if r.trajectory and r.trajectory.grade else ""
                got = r.outcome.value if r.outcome else None
                return "failed", f"{policy} run {r.run}: {got}, want {want} ({why})"
    return "passed", ""


def status_disagreements(task: Task, grade: GradeResult) -> list[str]:
    """One line per test whose status differs from what the task expects (R2E-Gym's rule)."""
    from deepswe.env.grading.parsers.r2e_gym import expected_statuses

    want = expected_statuses(task)
    lines = [f"{t}: expected {want[t].value}, missing from the run" for t in grade.missing]
    lines += [
        f"{t}: expected {want[t].value}, got {grade.statuses[t].value}" for t in grade.mismatched
    ]
    lines += [f"{t}: {grade.statuses[t].value}, not expected" for t in grade.unexpected]
    return lines


def validate_tasks(
    tasks: list[Task], out: Path, cfg: EvalConfig, console: Console | None = None
) -> Validation:
    """Run gold and empty over `tasks` (`cfg.baseline_runs` runs each) in `out`/gold and
    `out`/empty, resumable; card.ProtocolMismatch if those folders hold another protocol."""
    records: dict[str, dict[str, list[EpisodeRecord]]] = {
        t.instance_id: {p: [] for p in EXPECTED} for t in tasks
    }
    for policy in EXPECTED:
        pcfg = cfg.model_copy(update={"policy": cfg.policy.model_copy(update={"name": policy}),
                                      "runs": cfg.baseline_runs})  # fmt: skip
        store, _ = open_run(Path(out) / policy, make_card(pcfg, tasks))
        run_all(tasks, pcfg, store, console=console)
        for r in store.records():
            if r.instance_id in records:
                records[r.instance_id][policy].append(r)
    result = Validation()
    for t in tasks:
        if t.hidden.expected_statuses is not None:
            lines = [
                f"gold run {r.run}: {line}"
                for r in records[t.instance_id]["gold"]
                if r.trajectory and r.trajectory.grade
                for line in status_disagreements(t, r.trajectory.grade)
            ]
            result.compared += 1
            if lines:
                result.disagreements[t.instance_id] = lines
        verdict, why = _verdict(t, records[t.instance_id])
        if verdict == "passed":
            result.passed.append(t.instance_id)
        elif verdict == "failed":
            result.failed[t.instance_id] = why
        else:
            result.undecided[t.instance_id] = why
    return result


__all__ = ["EXPECTED", "Validation", "status_disagreements", "validate_tasks"]
