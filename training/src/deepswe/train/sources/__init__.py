"""Rollout sources: where the trainer's tasks come from and how one rollout of a task runs.

`spine` runs real agent episodes in Docker sandboxes through deepswe.env (training proper);
`openenv` plays the same episodes on a running OpenEnv server of our tasks (`deepswe-eval serve`,
data.openenv.url), the engine writing every reply here (see openenv.py);
`text` is the trainer's unit-test environment: one-turn chats rewarded by a plain text check,
no Docker (see text.py). Looked up lazily by name or `module:Class`.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from deepswe.env.policies import Policy
from deepswe.env.registry import resolve
from deepswe.env.trajectory import Trajectory
from deepswe.train.config import TrainConfig


@runtime_checkable
class RolloutSource(Protocol):
    @classmethod
    def from_config(cls, cfg: TrainConfig) -> Any:
        """Build the plug-in from the run's TrainConfig (it reads the sections it needs):
        how deepswe.train.plugins builds every engine, backend and source."""
        ...

    def tasks(self) -> list[Any]:
        """Every task of the source, in a fixed order; each has an `instance_id`."""
        ...

    def rollout(self, task: Any, policy: Policy) -> Trajectory:
        """One graded episode of `policy` on `task` (reward set unless it ended infra_error)."""
        ...


SOURCES: dict[str, str] = {
    "spine": "deepswe.train.sources.spine:SpineSource",
    "openenv": "deepswe.train.sources.openenv:OpenEnvSource",
    "text": "deepswe.train.sources.text:TextSource",
}


def source_class(name: str) -> type:
    return resolve(SOURCES, name, "rollout source")
