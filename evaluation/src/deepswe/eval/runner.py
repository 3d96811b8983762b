"""The batch runner: (task x run) episodes on a thread pool, each stored the moment it ends.

Each episode is mostly waiting (on containers and on the model server), so threads are enough;
W workers means W episodes in flight. Episodes already on disk are skipped, which is all that
resuming takes. An infrastructure failure is retried up to `infra_retries` times and, if it
persists, stored as INFRA_ERROR: its own count, never an unresolved, and tried again by the next
resume. An exception that is not an infrastructure failure (a bug in a policy, bad input) is
stored as INFRA_ERROR at once with its traceback, and the other episodes run: one bad episode
never stops a batch, and the command's exit 3 names it.
"""

from __future__ import annotations

import time
import traceback
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from deepswe.data.task import Task
from deepswe.env.episode import INFRA_EXCEPTIONS, run_task
from deepswe.env.grading.outcomes import Outcome
from deepswe.env.policies import make_policy
from deepswe.env.trajectory import Ending, Trajectory
from deepswe.eval.config import EvalConfig, with_grading_rules
from deepswe.eval.store import EpisodeRecord, EpisodeStatus, RunStore


def run_one(task: Task, run: int, cfg: EvalConfig) -> EpisodeRecord:
    """One (task, run) with bounded infra retries; never raises for an episode's failure."""
    started = time.time()
    reason = ""
    last: Trajectory | None = None
    for attempt in range(1, cfg.infra_retries + 2):
        try:
            traj = run_task(
                with_grading_rules(task, cfg),
                make_policy(cfg.policy, task, run),
                limits=cfg.episode,
                backend=cfg.sandbox_backend,
                sandbox_limits=cfg.sandbox,
            )
        except INFRA_EXCEPTIONS as exc:  # the harness itself failed: an infra error, retried
            reason = f"harness: {type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}"
            continue
        except Exception as exc:
            # Anything else (bad input such as a missing gold patch, a bug in a policy or in the
            # harness) is this episode's alone: recorded as infra_error with its traceback, not
            # retried (it would fail the same way), and the batch goes on; the command exits 3
            # naming it, and a resume tries it again.
            why = f"harness error (not retried): {type(exc).__name__}: {exc}\n"
            return _infra_record(task, run, started, 1, why + traceback.format_exc(), None)
        last = traj
        if traj.ending is not Ending.INFRA_ERROR:  # (a grading infra error sets it too)
            return EpisodeRecord(
                instance_id=task.instance_id,
                run=run,
                repo=task.repo,
                status=EpisodeStatus.GRADED,
                outcome=traj.outcome,
                attempts=attempt,
                started_at=started,
                finished_at=time.time(),
                trajectory=traj,
            )
        reason = traj.ending_detail or "infra error"
    return _infra_record(task, run, started, cfg.infra_retries + 1, reason, last)


def _infra_record(
    task: Task, run: int, started: float, attempts: int, reason: str, last: Trajectory | None
) -> EpisodeRecord:
    return EpisodeRecord(
        instance_id=task.instance_id,
        run=run,
        repo=task.repo,
        status=EpisodeStatus.INFRA_ERROR,
        outcome=Outcome.INFRA_ERROR,
        attempts=attempts,
        reason=reason[-4000:],
        started_at=started,
        finished_at=time.time(),
        trajectory=last,
    )


def unsupported_record(task: Task, run: int, reason: str) -> EpisodeRecord:
    now = time.time()
    return EpisodeRecord(
        instance_id=task.instance_id,
        run=run,
        repo=task.repo,
        status=EpisodeStatus.UNSUPPORTED_ENV,
        attempts=0,
        reason=reason,
        started_at=now,
        finished_at=now,
    )


def run_all(
    tasks: list[Task],
    cfg: EvalConfig,
    store: RunStore,
    *,
    unsupported: dict[str, str] | None = None,
    console: Console | None = None,
    on_record: Callable[[EpisodeRecord], None] | None = None,
) -> Counter:
    """Run every (task, run) not yet on disk; returns the counts of the episodes run now.

    `unsupported` maps instance ids to the reason no environment serves them: those get an
    UNSUPPORTED_ENV record per run, no episode.
    """
    unsupported = unsupported or {}
    store.clean()
    done = store.done()
    pending = [(t, k) for t in tasks for k in range(cfg.runs) if (t.instance_id, k) not in done]
    total = len(tasks) * cfg.runs
    ids = {t.instance_id for t in tasks}
    prior = [r for r in store.records() if r.instance_id in ids and (r.instance_id, r.run) in done]
    counts: Counter = Counter()
    resolved = sum(r.resolved for r in prior)
    console = console or Console(stderr=True)
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("resolved {task.fields[resolved]}"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console, transient=False) as progress:
        bar = progress.add_task("episodes", total=total, completed=len(prior), resolved=resolved)
        pool = ThreadPoolExecutor(max_workers=cfg.workers, thread_name_prefix="episode")
        try:
            futures = {}
            for task, k in pending:
                if task.instance_id in unsupported:
                    record = unsupported_record(task, k, unsupported[task.instance_id])
                    store.save(record)
                    counts[record.status.value] += 1
                    progress.advance(bar)
                    continue
                futures[pool.submit(_run_and_save, task, k, cfg, store)] = (task, k)
            for fut in as_completed(futures):
                record = fut.result()
                counts[record.outcome.value if record.outcome else record.status.value] += 1
                resolved += record.resolved
                progress.update(bar, advance=1, resolved=resolved)
                if not console.is_terminal:  # a log or a pipe: no live bar, one line an episode
                    n = int(progress.tasks[0].completed)
                    what = record.outcome.value if record.outcome else record.status.value
                    console.print(
                        f"episode {n}/{total}: {record.instance_id} run {record.run}: "
                        f"{what} (resolved so far {resolved})",
                        markup=False,
                        highlight=False,
                    )
                if on_record:
                    on_record(record)
        except BaseException:
            # Episodes in flight finish and are stored; the queued ones never start.
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
    return counts


def _run_and_save(task: Task, run: int, cfg: EvalConfig, store: RunStore) -> EpisodeRecord:
    # Saved in the worker thread, the moment the episode ends: a kill right after loses nothing.
    record = run_one(task, run, cfg)
    store.save(record)
    return record
