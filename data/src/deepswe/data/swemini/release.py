"""The whole synthesis run: every project (two workers), one sorted tasks.jsonl, a stats file.

The output depends only on the manifest, the seed and the test outcomes: projects are
synthesised independently, tasks are sorted by instance_id before writing, and JSON is written
by the same pydantic models, so `synth --seed S` regenerates the file byte for byte.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from deepswe.data.store import write_jsonl
from deepswe.data.swemini.manifest import Manifest, cache_dir
from deepswe.data.swemini.synth import ProjectResult, synth_project
from deepswe.data.task import Task


def _worker(args: tuple) -> ProjectResult:
    manifest, name, seed, quota, max_tries, cache, queue = args
    tick = (lambda p, e: queue.put((p, e))) if queue is not None else None
    return synth_project(manifest, manifest.project(name), seed, quota, max_tries, cache, tick)


def synth_all(
    manifest: Manifest,
    out: Path,
    seed: int,
    quota: int,
    max_tries: int,
    projects: list[str] | None = None,
    workers: int = 2,
    cache: Path | None = None,
    show_progress: bool = True,
) -> dict:
    """Synthesise, write `out` (all splits; metadata.split says which), return the stats."""
    cache = cache or cache_dir()
    names = projects or [p.name for p in manifest.projects]
    started = time.monotonic()
    results: list[ProjectResult] = []
    with (
        mp.Manager() as manager,
        Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            disable=not show_progress,
        ) as progress,
    ):
        queue = manager.Queue()
        bar = progress.add_task("mutants tried", total=len(names) * max_tries)
        jobs = [(manifest, n, seed, quota, max_tries, cache, queue) for n in names]
        with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as pool:
            futures = [pool.submit(_worker, j) for j in jobs]
            pending = set(futures)
            while pending:
                while not queue.empty():
                    queue.get()
                    progress.advance(bar)
                done = {f for f in pending if f.done()}
                for f in done:
                    results.append(f.result())
                    pending.discard(f)
                time.sleep(0.2)
        progress.update(bar, total=progress.tasks[0].completed)
    tasks: list[Task] = sorted((t for r in results for t in r.tasks), key=lambda t: t.instance_id)
    write_jsonl(tasks, out)
    stats = _stats(manifest, results, tasks, time.monotonic() - started, seed)
    stats_path = cache / "synth" / f"stats-seed{seed}.json"
    stats_path.parent.mkdir(parents=True, exist_ok=True)
    stats_path.write_text(json.dumps(stats, indent=2, sort_keys=True))
    return stats


def _stats(
    manifest: Manifest, results: list[ProjectResult], tasks: list[Task], seconds: float, seed: int
) -> dict:
    reasons: Counter = Counter()
    for r in results:
        reasons.update(r.reasons)
    split = {p.name: p.split for p in manifest.projects}
    return {
        "seed": seed,
        "seconds": round(seconds, 1),
        "tasks": len(tasks),
        "tried": sum(reasons.values()),
        "outcomes": dict(sorted(reasons.items())),
        "no_statement": dict(
            sorted(
                Counter(why.split(":")[0] for r in results for why in r.dropped.values()).items()
            )
        ),
        "projects": {
            r.project: {
                "split": split[r.project],
                "tests": r.tests,
                "suite_seconds": r.suite_seconds,
                "tasks": len(r.tasks),
                "outcomes": dict(sorted(r.reasons.items())),
                "dropped": dict(sorted(r.dropped.items())),  # instance id -> why no statement
            }
            for r in sorted(results, key=lambda r: r.project)
        },
    }
