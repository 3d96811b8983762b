"""Replays the assistant messages of a recorded trajectory: ours (Trajectory JSON, bare or as the
`trajectory` of an evaluation's episode record) or R2E-Gym's runner output (`trajectory_steps`,
each step's `thought` followed by its `action`)."""

from __future__ import annotations

import json
from pathlib import Path

from deepswe.env.policies import PolicyError, Reply


def recorded_replies(path: Path) -> list[str]:
    """The assistant messages of a trajectory file, in order."""
    doc = json.loads(Path(path).read_text())
    if "trajectory" in doc and "instance_id" in doc:  # an evaluation's episode record
        if not doc["trajectory"]:
            raise ValueError(f"{path}: the recorded episode has no trajectory to replay")
        doc = doc["trajectory"]
    if "trajectory_steps" in doc:  # R2E-Gym
        return [f"{s.get('thought', '')}\n\n{s.get('action', '')}" for s in doc["trajectory_steps"]]
    if "steps" in doc:  # ours
        return [s["assistant"] for s in doc["steps"]]
    raise ValueError(f"{path}: neither an R2E-Gym trajectory nor ours (no trajectory_steps/steps)")


class ReplayPolicy:
    """Answers turn i with the i-th recorded message; running out is an agent error."""

    name = "replay"

    def __init__(self, path: Path | str) -> None:
        self.replies = recorded_replies(Path(path))
        self.turn = 0

    def reply(self, messages: list[dict[str, str]], *, timeout: float) -> Reply:
        if self.turn >= len(self.replies):
            raise PolicyError(f"recording has only {len(self.replies)} replies")
        self.turn += 1
        return Reply(text=self.replies[self.turn - 1])

    def count_tokens(self, messages: list[dict[str, str]]) -> int | None:
        return None
