"""Scripted candidates graded by the real grader, in process: each planned patch goes through
`deepswe.env.episode.run_task` as a submission (a patch made elsewhere: no episode, graded as it
is, as the gold-patch policy's patch is), under the eval section's grading rules, sandbox
limits and infra retries, and is stored as an EpisodeRecord in an ordinary run folder:

    candidates/<split>/made/episodes/<instance_id>/run-<k>.json    run k = plan.json's run k

Identical patches of a task (the gold patch asked for twice) are graded once and stored under
each run: grading is deterministic (swe-mini keeps no flaky test), so a second run would only
repeat the first. Episodes already stored are skipped, so a resume grades only what is left; an
infra error is stored as INFRA_ERROR (never unresolved) and tried again by the next resume.
"""

from __future__ import annotations

import time
import traceback
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from deepswe.data.task import Task
from deepswe.env.episode import INFRA_EXCEPTIONS, run_task
from deepswe.env.grading.outcomes import Outcome
from deepswe.env.policies.scripted import SubmittedPatch
from deepswe.env.trajectory import Ending, Trajectory
from deepswe.eval.config import EvalConfig, with_grading_rules
from deepswe.eval.store import EpisodeRecord, EpisodeStatus, RunStore
from deepswe.reproduce.tts.plan import Planned

POLICY = "submitted"  # the same name for every kind: nothing downstream can read the kind off it


def grade_once(task: Task, patch: str, cfg: EvalConfig) -> tuple[Trajectory | None, int, str]:
    """(graded trajectory or None, attempts, why not): infra failures retried as the eval
    runner retries them (cfg.infra_retries)."""
    reason = ""
    for attempt in range(1, cfg.infra_retries + 2):
        try:
            traj = run_task(
                with_grading_rules(task, cfg),
                SubmittedPatch(patch, POLICY),
                limits=cfg.episode,
                backend=cfg.sandbox_backend,
                sandbox_limits=cfg.sandbox,
            )
        except INFRA_EXCEPTIONS as exc:
            reason = f"harness: {type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}"
            continue
        if traj.ending is not Ending.INFRA_ERROR:
            return traj, attempt, ""
        reason = traj.ending_detail or "infra error"
    return None, cfg.infra_retries + 1, reason


def _record(
    task: Task, run: int, traj: Trajectory | None, attempts: int, reason: str, started: float
) -> EpisodeRecord:
    graded = traj is not None
    return EpisodeRecord(
        instance_id=task.instance_id,
        run=run,
        repo=task.repo,
        status=EpisodeStatus.GRADED if graded else EpisodeStatus.INFRA_ERROR,
        outcome=traj.outcome if graded else Outcome.INFRA_ERROR,
        attempts=attempts,
        reason=reason[-4000:],
        started_at=started,
        finished_at=time.time(),
        trajectory=traj,
    )


def grade_plan(
    plan: dict[str, list[Planned]],
    tasks: dict[str, Task],
    cfg: EvalConfig,
    folder: Path,
    workers: int,
    log: Callable[[str], None] = print,
) -> Counter:
    """Grade every planned candidate not yet stored in `folder`; counts of outcomes stored now."""
    store = RunStore(folder)
    store.clean()
    done = store.done()
    groups: dict[tuple[str, str], list[Planned]] = {}
    for iid, rows in plan.items():
        for p in rows:
            if (iid, p.run) not in done:
                groups.setdefault((iid, p.patch), []).append(p)
    counts: Counter = Counter()
    if not groups:
        return counts

    def job(key: tuple[str, str]) -> str:
        iid, patch = key
        started = time.time()
        traj, attempts, reason = grade_once(tasks[iid], patch, cfg)
        for p in groups[key]:
            store.save(_record(tasks[iid], p.run, traj, attempts, reason, started))
        return traj.outcome.value if traj is not None and traj.outcome else "infra_error"

    t0, total = time.monotonic(), len(groups)
    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="grade") as pool:
        futures = {pool.submit(job, key): key for key in groups}
        for n, fut in enumerate(as_completed(futures), 1):
            counts[fut.result()] += len(groups[futures[fut]])
            if n % 10 == 0 or n == total:
                log(
                    f"tts candidates: graded {n}/{total} distinct patches "
                    f"({time.monotonic() - t0:.0f}s): {dict(counts)}"
                )
    return counts
