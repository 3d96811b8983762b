"""Validation of every task in its own sandbox, through the spine (deepswe.env).

A task passes when `run_task(task, GoldPolicy(gold_patch))` is resolved and
`run_task(task, EmptyPolicy())` is unresolved, `rounds` times over. Each verdict is appended to a
JSONL progress file as soon as it is known, so a killed validation resumes without redoing
work; two tasks run at a time (each run starts two containers).

deepswe.env is imported inside the functions: deepswe-data does not depend on it, only this
verb needs it (installed alongside in the monorepo's venv).
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from deepswe.data.task import Task


def _key(task: Task, round_: int) -> str:
    return f"{task.instance_id}@{task.base_commit[:12]}#{round_}"


def read_progress(path: Path) -> dict[str, dict]:
    done: dict[str, dict] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                done[row["key"]] = row
    return done


def validate_one(task: Task, limits=None) -> dict:
    """Gold and empty episodes of one task; returns outcomes, image tag and timings."""
    from deepswe.env.episode import run_task
    from deepswe.env.images.task import ensure_task_image
    from deepswe.env.policies.scripted import EmptyPolicy, GoldPolicy

    t0 = time.monotonic()
    image = ensure_task_image(task, log=lambda _: None)
    built = time.monotonic() - t0
    gold = run_task(task, GoldPolicy(task.gold_patch or ""), sandbox_limits=limits)
    empty = run_task(task, EmptyPolicy(), sandbox_limits=limits)
    ok = gold.outcome == "resolved" and empty.outcome == "unresolved"
    detail = (
        {}
        if ok
        else {
            "gold": gold.grade_detail,
            "empty_f2p_failed": (empty.grade_detail or {}).get("f2p_failed"),
        }
    )
    return {
        "instance_id": task.instance_id,
        "ok": ok,
        "gold": gold.outcome,
        "empty": empty.outcome,
        "image": image,
        "build_s": round(built, 2),
        "seconds": round(time.monotonic() - t0, 2),
        "detail": json.dumps(detail, default=str)[:4000] if detail else "",
    }


def validate_tasks(
    tasks: list[Task],
    progress_file: Path,
    workers: int = 2,
    rounds: int = 1,
    show_progress: bool = True,
) -> dict:
    """Validate `tasks` (resuming from `progress_file`); return counts and the failures."""
    from deepswe.env.images.task import ensure_env_image
    from deepswe.env.sandbox import SandboxLimits

    limits = SandboxLimits(memory="2g", pids=512)
    for spec in {
        t.environment.model_dump_json(include={"base", "pip"}): t.environment
        for t in tasks
        if t.environment
    }.values():
        ensure_env_image(spec, log=lambda _: None)  # once, before two workers race to build it
    done = read_progress(progress_file)
    # only passing verdicts are kept: a failure (harness error, or a task since re-synthesised
    # with other test lists) is checked again on the next run
    todo = [(t, r) for r in range(rounds) for t in tasks if not done.get(_key(t, r), {}).get("ok")]
    lock = threading.Lock()
    progress_file.parent.mkdir(parents=True, exist_ok=True)
    with (
        Progress(
            TextColumn("[bold]validating"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            disable=not show_progress,
        ) as progress,
        ThreadPoolExecutor(max_workers=workers) as pool,
    ):
        bar = progress.add_task(
            "validate", total=len(tasks) * rounds, completed=len(tasks) * rounds - len(todo)
        )
        futures = {pool.submit(validate_one, t, limits): (t, r) for t, r in todo}
        for fut in as_completed(futures):
            task, r = futures[fut]
            try:
                row = fut.result()
            except Exception as exc:  # a harness failure of one task must not lose the others
                row = {
                    "instance_id": task.instance_id,
                    "ok": False,
                    "gold": None,
                    "empty": None,
                    "detail": repr(exc)[:2000],
                }
            row["key"], row["round"] = _key(task, r), r
            with lock, progress_file.open("a") as f:
                f.write(json.dumps(row, sort_keys=True) + "\n")
            done[row["key"]] = row
            progress.advance(bar)
    wanted = {_key(t, r) for r in range(rounds) for t in tasks}
    rows = [done[k] for k in sorted(wanted)]
    counts = Counter("ok" if row["ok"] else "failed" for row in rows)
    return {
        "validated": len(rows),
        "ok": counts["ok"],
        "failed": [row["instance_id"] for row in rows if not row["ok"]],
        "mean_seconds": round(sum(row.get("seconds", 0) for row in rows) / max(len(rows), 1), 2),
    }
