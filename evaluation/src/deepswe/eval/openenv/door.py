"""The task set at the door: which tasks a server serves, which it refuses and why, and which
task a reset gets (by id, by seed, or the next of the set in a seeded order).

Tasks come from anything our loaders read (`deepswe.data.datasets.load_tasks`: swe-mini, the
Hub's R2E-Gym and Verified rows, a task file). A health manifest (`deepswe-eval health`'s
health.json, or an audit.json) refuses the tasks it calls unhealthy unless `include_unhealthy`;
strict grading rules refuse a runner they cannot own (`deepswe.env.grading.owned`). A refused
task asked for by id is an error naming the reason.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field
from pathlib import Path

from deepswe.data.task import Task
from deepswe.env.grading.owned import strict_refusal
from deepswe.eval.health import load_manifest, unhealthy


class TaskRefused(ValueError):
    """A reset asked for a task this server does not serve; the message says why."""


@dataclass
class TaskDoor:
    """The tasks a server serves (`tasks`, by id) and those it refuses (`refused`: id -> why)."""

    tasks: dict[str, Task]
    refused: dict[str, str] = field(default_factory=dict)
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.tasks:
            why = "; ".join(f"{i}: {r}" for i, r in list(self.refused.items())[:3])
            raise TaskRefused(f"no task left to serve{' (' + why + ')' if why else ''}")
        self._order = sorted(self.tasks)
        random.Random(self.seed).shuffle(self._order)
        self._next = 0
        self._lock = threading.Lock()
        self._image_locks: dict[str, threading.Lock] = {i: threading.Lock() for i in self.tasks}

    def pick(self, task_id: str | None = None, seed: int | None = None) -> Task:
        """The task `task_id`; else the one `seed` draws from the served ids; else the next of
        the set in this door's seeded order (round robin over all sessions)."""
        if task_id is not None:
            if task_id in self.tasks:
                return self.tasks[task_id]
            if task_id in self.refused:
                raise TaskRefused(f"task {task_id} is refused: {self.refused[task_id]}")
            raise TaskRefused(f"task {task_id} is not in this server's task set")
        if seed is not None:
            return self.tasks[random.Random(seed).choice(sorted(self.tasks))]
        with self._lock:
            task_id = self._order[self._next % len(self._order)]
            self._next += 1
        return self.tasks[task_id]

    def image_lock(self, instance_id: str) -> threading.Lock:
        """Held while the task's image is built, so two sessions never build one image twice."""
        return self._image_locks[instance_id]


def open_door(
    tasks: list[Task],
    *,
    health: str | Path | None = None,
    include_unhealthy: bool = False,
    unsupported: dict[str, str] | None = None,
    seed: int = 0,
) -> TaskDoor:
    """A door over `tasks`: those strict rules cannot grade, those `unsupported` names (id -> why:
    no environment here) and, unless `include_unhealthy`, those the `health` manifest calls
    unhealthy are refused with their reasons. HealthError for a manifest that cannot be read."""
    refused = dict(unsupported or {})
    for t in tasks:
        why = strict_refusal(t.test_spec)
        if why and t.instance_id not in refused:
            refused[t.instance_id] = f"cannot be graded under strict rules: {why}"
    if health is not None and not include_unhealthy:
        bad = unhealthy(load_manifest(health))
        for t in tasks:
            if t.instance_id in bad and t.instance_id not in refused:
                refused[t.instance_id] = (
                    f"unhealthy in {health}: {bad[t.instance_id]} "
                    "(serve it anyway with include_unhealthy: true)"
                )
    served = {t.instance_id: t for t in tasks if t.instance_id not in refused}
    return TaskDoor(served, refused, seed)


__all__ = ["TaskDoor", "TaskRefused", "open_door"]
