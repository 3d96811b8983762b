"""Test strength per task: how many wrong fixes earn reward 1, measured and proven.

    gold patch -> k mutants (deepswe.eval.mutants) -> each graded like any episode (the task's own
    reward run, strict rules): resolved = a survivor
    survivors -> the wider run: every test in the graded files and more (deepswe.eval.wider),
    run twice with gold (the tests that pass both times), then twice with each survivor: one of
    those run and failing both times proves it wrong (`killed_by`); nothing failing twice leaves it
    undecided (possibly equivalent to gold, or killed only by a flaky test), never called
    wrong. A test absent from the survivor's run proves nothing: test ids can change from run
    to run (isodate's tests/test_date.py numbers its parameters in an order that varies), and
    an id that did not come back did not fail

A task with a proven-wrong survivor is *weak*: a nearly-right fix earns reward 1 there, and
GRPO++ rewards it like the right one. The record (`TaskStrength`) goes into the task's row of the
health manifest (`deepswe-eval health --mutants K`); training counts the weak tasks it keeps,
the report shows Pass@1 on the strong ones beside all, and `--harden` writes task files whose
graded tests include the killing ones (task sets we own only).

The wider set (deepswe.eval.wider, per task set and runner): the graded files' folders, the
repository's tests of the changed module (R2E-Gym), a Django app whole (SWE-Bench-Verified), run
by the task's own command. A test the wider run collects that fails with gold in either run is
left out of the proof.
"""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from deepswe.data.task import Task
from deepswe.env.episode import grade_patch
from deepswe.env.grading.outcomes import Outcome, TestStatus
from deepswe.env.hidden_tests import graded_paths
from deepswe.env.reward import RewardRun
from deepswe.eval.audit_manifest import AuditManifest, Survivor, TaskStrength
from deepswe.eval.config import EvalConfig
from deepswe.eval.mutants import Mutant, make_mutants
from deepswe.eval.wider import repository_tests, wider_paths, wider_task

Grade = Callable[[Task, str], RewardRun]
_FAILING = (TestStatus.FAILED, TestStatus.ERROR)


def measure(
    task: Task, k: int, seed: int | str = 0, grade: Grade | None = None, log=lambda _: None
) -> TaskStrength:
    """The test strength of one task whose gold resolves: `k` mutants, graded; survivors put to
    the wider run. `grade(task, patch)` defaults to the real reward run (grade_patch)."""
    grade = grade or (lambda t, p: grade_patch(t, p))
    start = time.monotonic()
    mutants = make_mutants(task.gold_patch or "", k, f"{seed}:{task.instance_id}")
    survivors: list[Mutant] = []
    for m in mutants:
        outcome = _decided(grade, task, m.patch).outcome
        log(f"{task.instance_id}: mutant {m.operator} ({m.change}): {outcome.value}")
        if outcome is Outcome.RESOLVED:
            survivors.append(m)
    result = TaskStrength(mutants=len(mutants), killed=len(mutants) - len(survivors))
    if survivors:
        result = _prove(task, survivors, result, grade, log)
    return result.model_copy(update={"seconds": round(time.monotonic() - start, 1)})


class StrengthError(RuntimeError):
    """A grading that ended infra_error twice: nothing is decided for the task (run again)."""


def _decided(grade: Grade, task: Task, patch: str):
    """The grade of `patch`, one retry where the infrastructure failed; StrengthError after."""
    for _ in range(2):
        result = grade(task, patch).grade
        if result.outcome is not Outcome.INFRA_ERROR:
            return result
    raise StrengthError(f"{task.instance_id}: grading ended infra_error twice: {result.reason}")


def _prove(
    task: Task, survivors: list[Mutant], result: TaskStrength, grade: Grade, log
) -> TaskStrength:
    """Each survivor against the wider tests gold passes (in both of two runs)."""
    probe = wider_task(task)
    passing = None
    for _ in range(2):
        statuses = _decided(grade, probe, task.gold_patch or "").statuses
        now = {t for t, s in statuses.items() if s is TestStatus.PASSED}
        passing = now if passing is None else passing & now
    passing = passing or set()
    wide = wider_task(task, sorted(passing))
    proven, undecided = [], []
    for m in survivors:
        run = _decided(grade, wide, m.patch)
        failed = _failed(run, passing)
        row = Survivor(operator=m.operator, change=m.change, patch=m.patch, wider=run.outcome.value)
        if failed:
            # as gold had to pass twice, the survivor must fail twice: a test that fails only
            # under load once proved an equivalent mutant wrong (aiohttp_0fdcc291, whose
            # except-tuple swap is gold itself, "killed" by a 0.4 s timeout test)
            failed = [t for t in failed if t in _failed(_decided(grade, wide, m.patch), passing)]
        if failed:
            proven.append(row.model_copy(update={"killed_by": failed[0]}))
        else:
            undecided.append(row)
        log(f"{task.instance_id}: survivor {m.change}: wider run {run.outcome.value}")
    return result.model_copy(
        update={"proven_wrong": proven, "undecided": undecided, "wider": wider_paths(task)}
    )


def _failed(run, passing: set[str]) -> list[str]:
    """The tests gold passed twice that ran in `run` (a grade) and failed: one skipped there
    (a Verified row's swebench rule counts a skip as neither) did not fail."""
    if run.outcome is not Outcome.UNRESOLVED:
        return []
    return [t for t in run.p2p_failed if t in passing and run.statuses.get(t) in _FAILING]


def harden(task: Task, strength: TaskStrength) -> Task:
    """`task` with the tests that killed its proven-wrong survivors among its graded tests (each
    passed with gold in both wider runs); the files holding them become graded files."""
    killers = sorted({s.killed_by for s in strength.proven_wrong if s.killed_by})
    hidden = task.hidden
    p2p = sorted(set(hidden.pass_to_pass) | set(killers) - set(hidden.fail_to_pass))
    new_files = sorted({k.split("::")[0] for k in killers} - set(hidden.graded_files))
    files = sorted(set(hidden.graded_files) | set(new_files))
    update = {"pass_to_pass": p2p, "graded_files": files}
    spec = task.test_spec.model_copy(update={"command": _with_files(task, new_files)})
    return task.model_copy(update={"hidden": hidden.model_copy(update=update), "test_spec": spec})


def _with_files(task: Task, files: list[str]) -> str:
    """The task's command with `files` added to its pytest line where it names test files (a
    command that runs a folder already holds them)."""
    lines = task.test_spec.command.splitlines()
    graded = set(graded_paths(task))
    for k, line in enumerate(lines):
        tokens = shlex.split(line) if "pytest" in line else []
        if any(t.split("::")[0] in graded for t in tokens):
            lines[k] = shlex.join(tokens + [f for f in files if f not in tokens])
            break
    return "\n".join(lines)


def add_strength(
    manifest: AuditManifest,
    tasks: list[Task],
    out: Path,
    cfg: EvalConfig,
    k: int,
    seed: int = 0,
    log=print,
) -> AuditManifest:
    """`manifest` with each healthy task's test strength (resumable: one file a task under
    `out`/strength/, measured once per (k, seed)) and the weak tasks in its summary; written
    back (health.json, health.md)."""
    from deepswe.eval.audit_report import write_manifest
    from deepswe.eval.config import with_grading_rules
    from deepswe.eval.store import atomic_write_json

    folder = Path(out) / "strength"
    folder.mkdir(parents=True, exist_ok=True)
    rows, weak = dict(manifest.tasks), {}

    def grade(task: Task, patch: str) -> RewardRun:
        return grade_patch(
            with_grading_rules(task, cfg),
            patch,
            backend=cfg.sandbox_backend,
            sandbox_limits=cfg.sandbox,
        )

    def one(task: Task) -> TaskStrength:
        cache = folder / f"{task.instance_id}.json"
        stored = json.loads(cache.read_text()) if cache.is_file() else {}
        if stored.get("k") == k and stored.get("seed") == seed:
            return TaskStrength.model_validate(stored["strength"])
        found = measure(task, k, seed, grade, log)
        record = {"k": k, "seed": seed, "strength": found.model_dump(mode="json")}
        atomic_write_json(cache, record)
        return found

    todo = [
        t
        for t in tasks
        if t.gold_patch and rows.get(t.instance_id) is not None and rows[t.instance_id].healthy
    ]
    log(f"strength: {len(todo)} healthy task(s), up to {k} mutant(s) each, {cfg.workers} at once")
    with ThreadPoolExecutor(max_workers=max(1, cfg.workers)) as pool:
        for n, (task, found) in enumerate(zip(todo, pool.map(one, todo), strict=True), 1):
            rows[task.instance_id] = rows[task.instance_id].model_copy(update={"strength": found})
            if found.weak:
                weak[task.instance_id] = found.reason()
            word = "weak" if found.weak else "strong"
            log(f"strength {n}/{len(todo)}: {task.instance_id}: {word} ({found.mutants} mutants)")
    summary = manifest.summary.model_copy(update={"weak": weak})
    updated = manifest.model_copy(update={"tasks": rows, "summary": summary})
    write_manifest(updated, Path(out))
    return updated


__all__ = [
    "StrengthError",
    "Survivor",
    "TaskStrength",
    "add_strength",
    "harden",
    "measure",
    "repository_tests",
    "wider_paths",
    "wider_task",
]
