"""Validating a task set: every task's gold patch resolves it and the empty patch does not.

A validation is evaluations of the same tasks, each `rounds` runs, in ordinary run folders
(resumable, infra errors retried and kept apart, reports written): `<out>/gold`, the gold patch
graded as a patch (policy `gold-patch`, as swebench grades predictions), and `<out>/empty`, then
a verdict per task. Beside them, `<out>/tools` replays the gold patch through the agent's tools
(policy `gold`): whether the tools can express it is reported apart and decides nothing, so a
hunk the tools cannot make does not make a sound task look broken. This is how swe-mini's tasks were released
(360: 720/720; the 7 added to the 326 of the current release: 14/14) and how a new task file
should be checked before anyone trains or reports on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from deepswe.data.task import Task
from deepswe.env.grading.outcomes import GradeResult, Outcome
from deepswe.eval.card import make_card, open_run
from deepswe.eval.config import EvalConfig
from deepswe.eval.runner import run_all
from deepswe.eval.store import EpisodeRecord, EpisodeStatus

EXPECTED = {"gold": "resolved", "empty": "unresolved"}  # run folder -> every run's outcome
POLICY = {"gold": "gold-patch", "empty": "empty", "tools": "gold"}  # run folder -> policy
PHASE = {
    "gold": "the gold patch graded (every run must resolve)",
    "empty": "the empty patch graded (no run may resolve)",
    "tools": "the gold patch replayed through the agent's tools",
}


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
    # The gold patch replayed through the tools: instance id -> why it did not resolve.
    tools_failed: dict[str, str] = field(default_factory=dict)
    tools_checked: int = 0
    # Tasks no environment here serves (recorded unsupported_env, never run): id -> why.
    unsupported: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failed and not self.undecided and not self.unsupported

    def summary(self) -> dict:
        return {
            "tasks": len(self.passed)
            + len(self.failed)
            + len(self.undecided)
            + len(self.unsupported),
            "passed": len(self.passed),
            "failed": self.failed,
            "undecided": self.undecided,
            "unsupported": self.unsupported,
            "tools": {
                "checked": self.tools_checked,
                "expressed": self.tools_checked - len(self.tools_failed),
                "failed": self.tools_failed,
                "how": "the gold patch replayed through the agent's tools (file_editor, "
                "execute_bash) and graded: resolved = the tools can express it; decides no verdict",
            },
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
    for folder, want in EXPECTED.items():
        for r in records[folder]:
            if r.status is EpisodeStatus.INFRA_ERROR:
                return "undecided", f"{folder} run {r.run}: infra_error: {r.reason[:300]}"
            if r.outcome != want:
                why = r.trajectory.grade.reason if r.trajectory and r.trajectory.grade else ""
                got = r.outcome.value if r.outcome else None
                return "failed", f"{folder} run {r.run}: {got}, want {want} ({why})"
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
    tasks: list[Task],
    out: Path,
    cfg: EvalConfig,
    console: Console | None = None,
    tools: bool = True,
    unsupported: dict[str, str] | None = None,
) -> Validation:
    """Grade the gold patch and the empty patch over `tasks` (`cfg.baseline_runs` runs each) in
    `out`/gold and `out`/empty, and with `tools` replay the gold patch through the tools in
    `out`/tools; resumable. `unsupported` (instance id -> why no environment here serves it):
    those are recorded unsupported_env, never run, and counted apart; the others are graded.
    card.ProtocolMismatch if a folder holds another protocol."""
    unsupported = unsupported or {}
    folders = [*EXPECTED, *(["tools"] if tools else [])]
    records: dict[str, dict[str, list[EpisodeRecord]]] = {
        t.instance_id: {f: [] for f in folders} for t in tasks
    }
    console = console or Console(stderr=True)
    for folder in folders:
        policy = cfg.policy.model_copy(update={"name": POLICY[folder]})
        pcfg = cfg.model_copy(update={"policy": policy, "runs": cfg.baseline_runs})
        store, _ = open_run(Path(out) / folder, make_card(pcfg, tasks))
        # the episode lines that follow belong to this phase: say which
        console.print(
            f"[bold]{folder}[/bold]: {PHASE[folder]}, {len(tasks)} task(s) x "
            f"{cfg.baseline_runs} run(s) in {Path(out) / folder}"
        )
        run_all(tasks, pcfg, store, console=console, unsupported=unsupported)
        for r in store.records():
            if r.instance_id in records:
                records[r.instance_id][folder].append(r)
    result = Validation(unsupported={i: w for i, w in unsupported.items() if i in records})
    for t in tasks:
        if t.instance_id in result.unsupported:
            continue
        mine = records[t.instance_id]
        if t.hidden.expected_statuses is not None:
            lines = [
                f"gold run {r.run}: {line}"
                for r in mine["gold"]
                if r.trajectory and r.trajectory.grade
                for line in status_disagreements(t, r.trajectory.grade)
            ]
            result.compared += 1
            if lines:
                result.disagreements[t.instance_id] = lines
        if tools:
            result.tools_checked += 1
            why = _tools_failure(mine["tools"])
            if why:
                result.tools_failed[t.instance_id] = why
        verdict, why = _verdict(t, mine)
        if verdict == "passed":
            result.passed.append(t.instance_id)
        elif verdict == "failed":
            result.failed[t.instance_id] = why
        else:
            result.undecided[t.instance_id] = why
    return result


def _tools_failure(records: list[EpisodeRecord]) -> str:
    """Why the replay through the tools did not resolve, "" when every run did."""
    for r in records:
        if r.outcome is Outcome.RESOLVED:
            continue
        traj = r.trajectory
        grade = traj.grade.reason if traj and traj.grade else r.reason[:300]
        got = r.outcome.value if r.outcome else r.status.value
        refused = [_first_line(s.observation) for s in (traj.steps if traj else [])]
        refused = [line for line in refused if "ERROR" in line or "occurrences" in line]
        return f"run {r.run}: {got} ({grade})" + (f"; tools said: {refused[:3]}" if refused else "")
    return ""


def _first_line(text: str) -> str:
    return next((line for line in text.splitlines() if line.strip()), "")[:200]


__all__ = ["EXPECTED", "POLICY", "Validation", "status_disagreements", "validate_tasks"]
