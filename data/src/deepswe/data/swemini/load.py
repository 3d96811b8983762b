"""Loading the released swe-mini tasks with their sources resolved on this machine.

tasks.jsonl stores `environment.source` relative to the swe-mini cache (`repos/<name>-<version>`)
because the file is committed and must work anywhere; `load_swe_mini` rewrites it to the
absolute path of this machine's cache, which `deepswe-data swe-mini fetch` fills.
"""

from __future__ import annotations

from pathlib import Path

from deepswe.data.loaders import load_jsonl
from deepswe.data.swemini.manifest import TASKS, cache_dir
from deepswe.data.task import Task


def resolve_source(task: Task, cache: Path | None = None) -> Task:
    """`task` with a relative `environment.source` made absolute under the swe-mini cache."""
    env = task.environment
    if env is None or Path(env.source).is_absolute() or "://" in env.source:
        return task
    source = str((cache or cache_dir()) / env.source)
    return task.model_copy(update={"environment": env.model_copy(update={"source": source})})


def load_swe_mini(
    path: Path | str = TASKS, split: str | None = None, cache: Path | None = None
) -> list[Task]:
    """The tasks of `path` (default: the released data/swe-mini/tasks.jsonl), optionally one
    split ("train" | "test"), with sources resolved against the cache."""
    tasks = list(load_jsonl(Path(path)))
    if split is not None:
        tasks = [t for t in tasks if t.metadata.get("split") == split]
    return [resolve_source(t, cache) for t in tasks]
