"""SWE-bench's file formats: predictions.jsonl (what the official harness and sb-cli read) and
the per-instance report.json its harness writes.

predictions.jsonl: one object a line, `{"instance_id", "model_name_or_path", "model_patch"}`
(swebench.harness.constants KEY_INSTANCE_ID / KEY_MODEL / KEY_PREDICTION).
report.json: `{instance_id: {patch_is_None, patch_exists, patch_successfully_applied, resolved,
tests_status: {FAIL_TO_PASS: {success, failure}, PASS_TO_PASS: ..., FAIL_TO_FAIL: ...,
PASS_TO_FAIL: ...}}}` (swebench.harness.grading.get_eval_report).
"""

from __future__ import annotations

import json
from pathlib import Path

from deepswe.data.task import Task
from deepswe.env.grading.outcomes import GradeResult, Outcome
from deepswe.eval.store import EpisodeRecord, EpisodeStatus, RunStore, atomic_write_json


def prediction(record: EpisodeRecord, model_name: str) -> dict:
    patch = record.trajectory.patch if record.trajectory else ""
    return {
        "instance_id": record.instance_id,
        "model_name_or_path": model_name,
        "model_patch": patch,
    }


def tests_status(task: Task, statuses: dict[str, str]) -> dict:
    """swebench's own `get_eval_tests_report` over the grader's status map (so SKIPPED counts
    as neither success nor failure, exactly as in the official report): the grader's rule."""
    from deepswe.env.grading.parsers.swebench_lib import tests_report

    return tests_report(statuses, task)


def instance_report(task: Task, patch: str | None, grade: GradeResult | None) -> dict:
    """swebench's report.json entry for one instance (the rules of
    swebench.harness.grading.get_eval_report), from our grade, or None when nothing was
    graded. As there: `patch_exists` means "not None" (an empty string exists), and a log that
    timed out or did not apply has no `tests_status`."""
    outcome = grade.outcome if grade else None
    entry: dict = {
        "patch_is_None": patch is None,
        "patch_exists": patch is not None,
        "patch_successfully_applied": False,
        "resolved": False,
    }
    if patch is None or grade is None or outcome not in (Outcome.RESOLVED, Outcome.UNRESOLVED):
        return {task.instance_id: entry}
    entry["patch_successfully_applied"] = True
    entry["resolved"] = outcome is Outcome.RESOLVED
    entry["tests_status"] = tests_status(task, {k: v.value for k, v in grade.statuses.items()})
    return {task.instance_id: entry}


def write_swebench_files(
    store: RunStore, tasks: list[Task], runs: int, model_name: str
) -> list[Path]:
    """Per run: predictions/run-<k>.jsonl and reports/run-<k>/<instance_id>/report.json, with
    the episode's test log beside it as test_output.txt (as swebench keeps it).

    Only episodes that produced a trajectory appear (unsupported_env has no patch to submit).
    """
    by_id = {t.instance_id: t for t in tasks}
    written = []
    records = store.records()
    for k in range(runs):
        lines = []
        for r in records:
            if r.run != k or r.instance_id not in by_id or r.trajectory is None:
                continue
            lines.append(json.dumps(prediction(r, model_name)))
            traj = r.trajectory
            graded = r.status is EpisodeStatus.GRADED
            report = instance_report(
                by_id[r.instance_id], traj.patch, traj.grade if graded else None
            )
            path = store.root / "reports" / f"run-{k}" / r.instance_id / "report.json"
            atomic_write_json(path, report)
            if traj.test_log:
                (path.parent / "test_output.txt").write_text(traj.test_log, encoding="utf-8")
        pred = store.root / "predictions" / f"run-{k}.jsonl"
        pred.parent.mkdir(parents=True, exist_ok=True)
        pred.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        written.append(pred)
    return written


def read_predictions(path: Path) -> list[dict]:
    """predictions in SWE-bench's JSONL (or JSON list / dict keyed by id) form."""
    text = Path(path).read_text(encoding="utf-8")
    if path.suffix == ".json":
        doc = json.loads(text)
        rows = list(doc.values()) if isinstance(doc, dict) else doc
    else:
        rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    for i, row in enumerate(rows, 1):
        missing = {"instance_id", "model_patch"} - set(row)
        if missing:
            raise ValueError(f"{path}:{i}: prediction lacks {sorted(missing)}")
    return rows
