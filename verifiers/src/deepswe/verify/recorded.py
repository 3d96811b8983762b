"""Recorded R2E-Gym / DeepSWE rollouts -> candidate pools with their scores, no GPU, no Docker.

Input: trajectory records as R2E-Gym's runner writes them (`r2egym.agenthub.trajectory.
Trajectory`: one JSON object per file, or one per line of a .jsonl, e.g. DeepSWE's
`traj/<exp>_run_<i>.jsonl`), a file or a folder of them. Fields read: docker_image,
output_patch, reward, verifier_prob, regression_test_output (or a bare regression_pass_count),
reproduction_test_scores, problem_statement, ds / env_args.ds (the dataset row), exp_name.

How the scores are computed (R2E-Gym, agentica-project/R2E-Gym: trajectory.py properties
`regression_pass_count`, `reproduction_test_score`; verifiers/run_reproduction_tests.py):
- pools are grouped per task (the reference groups by docker_image; we by instance id, from
  ds.instance_id, else the dataset row's task id, else the image name after its last "."
  as the reference's `instance_name` does for SWE-bench images); runs are numbered per task in
  natural file order (run_2 before run_10), then line order;
- resolved = reward == 1. A rollout without a reward is not a candidate: it is listed in
  `skipped`, never counted as unresolved;
- ef = verifier_prob; None stays None (the reference would crash comparing it);
- regression = the number of tests whose status is PASSED when regression_test_output is read
  by the task's own log parser (the reference: swebench's per-repository parser via
  `swebench_parse`; we use `deepswe.env.grading.parsers`, the same parsers as grading); a
  recorded regression_pass_count is used when there is no output; neither -> None;
- reproduction = the sum over generated tests of each test's verdict. The reference's runner
  stores, per test, `out.count("resolved")`: every substring "resolved" in the output counts
  ("unresolved", a traceback, the marker printed twice). From a recorded count the verdict can
  only be recovered as count >= 1, so by default ("per-test") each test contributes at most 1;
  "raw-sum" reproduces the reference's number. An empty list (no test kept, or never run) is
  None, never 0; the selection then skips that rule for the pool (deepswe.verify.select);
- the baselines' scores (changes_code, smallest) are read from output_patch (baselines.py).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from deepswe.data.loaders import row_to_task
from deepswe.data.task import Task
from deepswe.env.grading import TestStatus
from deepswe.env.grading.parsers import get_parser
from deepswe.verify.baselines import baseline_scores
from deepswe.verify.types import Candidate, Scores

ReproCounting = Literal["per-test", "raw-sum"]


class RecordedError(ValueError):
    """Bad recorded input; the message names the file (and line) and the field."""


class Record(BaseModel):
    """The fields of one R2E-Gym trajectory record that selection reads (others ignored)."""

    model_config = ConfigDict(extra="ignore")

    docker_image: str = Field(min_length=1)
    output_patch: str = ""
    reward: float | None = None
    verifier_prob: float | None = None
    regression_test_output: str | None = None
    regression_pass_count: float | None = None
    reproduction_test_scores: list[float] = []
    problem_statement: str = ""
    exp_name: str | None = None
    ds: dict[str, Any] | None = None
    env_args: dict[str, Any] = {}

    def row(self) -> dict[str, Any] | None:
        if self.ds:
            return self.ds
        row = self.env_args.get("ds")
        return row if isinstance(row, dict) and row else None


class Skipped(BaseModel):
    where: str
    instance_id: str
    reason: str


class Recorded(BaseModel):
    """Candidate pools (with patches) and their Scores, task by task, runs in order."""

    candidates: dict[str, list[Candidate]] = {}
    scores: dict[str, list[Scores]] = {}
    skipped: list[Skipped] = []
    notes: list[str] = Field(default_factory=list, description="scores left missing, and why")
    records: int = 0


def _natural(path: Path) -> list[object]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(path))]


def _raw_records(path: Path) -> list[tuple[str, Any]]:
    if path.is_dir():
        files = sorted(
            (p for p in path.rglob("*") if p.suffix in {".json", ".jsonl"}), key=_natural
        )
        if not files:
            raise RecordedError(f"{path}: no .json or .jsonl trajectory files in this folder")
    elif path.is_file():
        files = [path]
    else:
        raise RecordedError(f"{path}: no such file or folder")
    out: list[tuple[str, Any]] = []
    for f in files:
        text = f.read_text(encoding="utf-8")
        lines = enumerate(text.splitlines(), 1) if f.suffix == ".jsonl" else [(0, text)]
        for n, line in lines:
            if not line.strip():
                continue
            where = f"{f}:{n}" if n else str(f)
            try:
                out.append((where, json.loads(line)))
            except json.JSONDecodeError as e:
                raise RecordedError(f"{where}: not JSON ({e.msg} at column {e.colno})") from e
    return out


def parse_record(where: str, raw: Any) -> Record:
    """One record, validated; RecordedError names `where` and the bad field."""
    if not isinstance(raw, dict):
        raise RecordedError(f"{where}: expected a JSON object, got {type(raw).__name__}")
    try:
        return Record.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        field = ".".join(str(x) for x in err["loc"]) or "(record)"
        raise RecordedError(f"{where}: field {field}: {err['msg']}") from e


def regression_pass_count(output: str, task: Task) -> int:
    """Tests PASSED in a regression run's log, read by the task's own log parser."""
    statuses = get_parser(task.test_spec.log_parser)(output, task)
    return sum(status is TestStatus.PASSED for status in statuses.values())


def reproduction_score(values: list[float], counting: ReproCounting = "per-test") -> float | None:
    """Sum over generated tests; per-test caps each recorded count at 1. Empty -> None."""
    if not values:
        return None
    return float(sum(min(v, 1.0) if counting == "per-test" else v for v in values))


def _instance_id(rec: Record, task: Task | None) -> str:
    row = rec.row() or {}
    if row.get("instance_id"):
        return str(row["instance_id"])
    if task is not None:
        return task.instance_id
    return (
        rec.docker_image.rsplit(".", 1)[-1] if "sweb.eval" in rec.docker_image else rec.docker_image
    )


def _finite(x: float | None) -> float | None:
    return None if x is None or math.isnan(x) else x


def load_recorded(path: Path | str, *, counting: ReproCounting = "per-test") -> Recorded:
    """Every record under `path`, grouped into per-task pools of candidates and Scores."""
    out = Recorded()
    tasks: dict[str, Task | None] = {}  # by docker image: one dataset row per task
    for where, raw in _raw_records(Path(path)):
        rec = parse_record(where, raw)
        out.records += 1
        if rec.docker_image not in tasks:
            tasks[rec.docker_image] = _task(rec, out.notes, where)
        task = tasks[rec.docker_image]
        iid = _instance_id(rec, task)
        if rec.reward is None:
            out.skipped.append(Skipped(where=where, instance_id=iid, reason="no reward recorded"))
            continue
        if rec.reward not in (0.0, 1.0):
            raise RecordedError(f"{where}: field reward: expected 0 or 1, got {rec.reward}")
        run = len(out.scores.get(iid, []))
        regression = _regression(rec, task, out.notes, where)
        out.scores.setdefault(iid, []).append(
            Scores(
                run=run,
                resolved=rec.reward == 1.0,
                ef=_finite(rec.verifier_prob),
                regression=regression,
                reproduction=reproduction_score(rec.reproduction_test_scores, counting),
                **baseline_scores(rec.output_patch),
            )
        )
        out.candidates.setdefault(iid, []).append(
            Candidate(
                instance_id=iid,
                run=run,
                patch=rec.output_patch,
                resolved=rec.reward == 1.0,
                problem_statement=rec.problem_statement,
                origin=f"r2e:{where}",
            )
        )
    return out


def _task(rec: Record, notes: list[str], where: str) -> Task | None:
    row = rec.row()
    if row is None:
        return None
    try:
        return row_to_task(row)
    except (ValueError, KeyError) as e:  # a row we cannot read: its logs cannot be parsed
        notes.append(f"{where}: ds is not a dataset row we can read ({type(e).__name__}: {e})")
        return None


def _regression(rec: Record, task: Task | None, notes: list[str], where: str) -> float | None:
    if rec.regression_test_output is None:
        return _finite(rec.regression_pass_count)
    if task is None:
        notes.append(f"{where}: regression_test_output without a readable ds row: no log parser")
        return _finite(rec.regression_pass_count)
    return float(regression_pass_count(rec.regression_test_output, task))
