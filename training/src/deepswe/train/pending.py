"""Batches sampled ahead (`rollout.max_staleness: 1`): the next step's episodes, sampled while a
step trains, kept in a checkpoint so that a resumed run trains on exactly them (trainer.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from deepswe.env.trajectory import Trajectory

PENDING = "pending.jsonl"  # in a checkpoint of a max_staleness 1 run: the next step's batch


@dataclass
class Collected:
    """A step's sampled batch: `step` (0-based) it is for, its trajectories in job order (each
    with its policy_version), their group ids, and the wall seconds the sampling took."""

    step: int
    trajectories: list[Trajectory]
    groups: list[int]
    seconds: float
    engine_busy: float | None = None  # the engine's own seconds while sampling it, if counted

    def dumps(self) -> str:
        head = {
            "step": self.step,
            "groups": self.groups,
            "seconds": self.seconds,
            "engine_busy": self.engine_busy,
        }
        return "".join(
            [json.dumps(head) + "\n", *(t.model_dump_json() + "\n" for t in self.trajectories)]
        )

    @classmethod
    def load(cls, path: Path) -> Collected | None:
        """The batch a checkpoint holds, or None when it holds none."""
        if not path.is_file():
            return None
        head, *lines = path.read_text().splitlines()
        meta = json.loads(head)
        trajs = [Trajectory.model_validate_json(x) for x in lines]
        busy = meta.get("engine_busy")
        return cls(int(meta["step"]), trajs, list(meta["groups"]), float(meta["seconds"]), busy)


__all__ = ["PENDING", "Collected"]
