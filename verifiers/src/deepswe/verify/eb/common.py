"""What both execution-based verifiers share: fresh sandboxes, the patch applied as grading
applies it, a result cache keyed by (task, patch hash), and a bounded worker pool.

Every run is in a fresh sandbox of the task's image: nothing one candidate did can leak into the
next one's run. The patch goes in exactly as the reward run puts it in
(`deepswe.env.apply.apply_patch`: the patch's paths checked, SWE-bench's apply chain from the
snapshot, exit statuses deciding). Infrastructure failures are raised as the env's `INFRA_EXCEPTIONS` and become
UNREACHABLE verdicts upstream, never a score.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from deepswe.data.task import Task
from deepswe.env.apply import apply_patch as reward_apply
from deepswe.env.episode import INFRA_EXCEPTIONS
from deepswe.env.images.task import ensure_task_image
from deepswe.env.sandbox import Sandbox, SandboxLimits, backend_class
from deepswe.env.workspace import take_snapshot
from deepswe.eval.store import atomic_write_json

Log = Callable[[str], None]
PATCH_PATH = "/tmp/deepswe/eb/candidate.patch"
WORKDIR = "/testbed"
T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True)
class SandboxPlan:
    """Where the runs happen: backend, limits, and how many sandboxes at once."""

    backend: str = "docker"
    limits: SandboxLimits | None = None
    workers: int = 2


def patch_sha(patch: str) -> str:
    """The cache key of a patch: sha256 of its text (an empty patch is a patch like any other)."""
    return hashlib.sha256(patch.encode("utf-8")).hexdigest()


def task_fingerprint(task: Task) -> str:
    """What a cached run depends on besides the patch: the repository state and how its tests
    run. A cache entry with another fingerprint is stale and run again."""
    parts = [task.instance_id, task.base_commit, task.test_spec.model_dump_json()]
    parts.append(task.environment.model_dump_json() if task.environment else str(task.image))
    parts.append(json.dumps(sorted(task.hidden.graded_files)))
    parts.append(hashlib.sha256(task.hidden.test_patch.encode()).hexdigest())
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def ensure_images(tasks: list[Task], log: Log) -> dict[str, str | Exception]:
    """Each task's image, built once in this thread before any worker starts; an infra failure
    is kept as the exception so that task's candidates become UNREACHABLE."""
    out: dict[str, str | Exception] = {}
    for task in tasks:
        try:
            out[task.instance_id] = ensure_task_image(task, log=lambda _: None)
        except INFRA_EXCEPTIONS as exc:
            log(f"{task.instance_id}: no image ({type(exc).__name__}: {exc})")
            out[task.instance_id] = exc
    return out


@contextlib.contextmanager
def fresh_sandbox(image: str, plan: SandboxPlan) -> Iterator[Sandbox]:
    """A new sandbox of `image` with its start snapshot taken; closed on leaving."""
    sandbox = backend_class(plan.backend)(image, plan.limits)
    try:
        take_snapshot(sandbox, WORKDIR)
        yield sandbox
    finally:
        sandbox.close()


def apply_patch(sandbox: Sandbox, patch: str) -> tuple[bool, str]:
    """Apply `patch` exactly as the reward run does (`deepswe.env.apply.apply_patch`: the same
    checks, the same chain, exit statuses deciding); (applied, what the apply printed and why
    not). A sandbox that cannot be reset or does not answer is the harness's (SandboxError)."""
    applied = reward_apply(sandbox, patch, WORKDIR, PATCH_PATH)
    return applied.ok, "\n".join(filter(None, [applied.output, applied.why]))


class JsonCache:
    """One JSON file per key under `root`, written atomically; entries carry the task's
    fingerprint and are ignored when it changed."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, task: Task, key: str) -> Path:
        return self.root / task.instance_id / f"{key}.json"

    def get(self, task: Task, key: str) -> dict[str, Any] | None:
        p = self.path(task, key)
        if not p.is_file():
            return None
        data = json.loads(p.read_text(encoding="utf-8"))
        return data if data.get("fingerprint") == task_fingerprint(task) else None

    def put(self, task: Task, key: str, data: dict[str, Any]) -> None:
        atomic_write_json(self.path(task, key), {**data, "fingerprint": task_fingerprint(task)})


def run_pool(
    jobs: list[T], fn: Callable[[T], R], workers: int, log: Log, what: str
) -> list[tuple[T, R]]:
    """`fn` over `jobs` on at most `workers` threads, a progress line per finished job.
    Exceptions other than the ones `fn` handles propagate: a bug stops the run."""
    out: list[tuple[T, R]] = []
    if not jobs:
        return out
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = {pool.submit(fn, job): job for job in jobs}
        for i, fut in enumerate(as_completed(futures), 1):
            out.append((futures[fut], fut.result()))
            log(f"{what}: {i}/{len(jobs)} done ({time.monotonic() - started:.0f}s)")
    return out
