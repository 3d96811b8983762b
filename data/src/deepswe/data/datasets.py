"""Dataset names and paths -> tasks: the one entry point every command uses (`load_tasks`).

A name is a Hub dataset ("swe-bench-verified", "r2e-gym-subset", via `deepswe.data.loaders`; the
Hub's current revision, or the one named after '@': "swe-bench-verified@<commit>") or
swe-mini ("swe-mini", "swe-mini:train", "swe-mini:test": the committed release, sources resolved
in this machine's cache, via `deepswe.data.swemini.load`); anything else is a local file or
folder whose rows are recognised from their keys.
"""

from __future__ import annotations

from pathlib import Path

from deepswe.data.errors import DataError
from deepswe.data.loaders import HUB_DATASETS, validate_source
from deepswe.data.swemini.load import load_swe_mini
from deepswe.data.swemini.manifest import TASKS
from deepswe.data.task import Task

# name -> where its rows come from (shown in errors and `deepswe-data sources`)
DATASETS: dict[str, str] = {
    **{name: f"Hugging Face Hub: {hub_id}" for name, (hub_id, _, _) in HUB_DATASETS.items()},
    "swe-mini": f"{TASKS} (all splits)",
    "swe-mini:train": f"{TASKS} (split train)",
    "swe-mini:test": f"{TASKS} (split test)",
}


def load_tasks(source: str | Path, split: str | None = None) -> list[Task]:
    """Tasks from a dataset name in DATASETS or a local path. Raises DataError listing every
    bad row (file:line: field: message)."""
    key = str(source)
    name, at, revision = key.partition("@")  # swe-bench-verified@<commit or branch>
    if at and name in HUB_DATASETS and not Path(key).exists():
        if not revision:
            raise DataError.at(key, "no revision after '@' (a commit id, branch or tag)")
        hub_id, default_split, loader = HUB_DATASETS[name]
        return loader(f"{hub_id}@{revision}", split or default_split)
    if key in DATASETS and not Path(key).exists():
        if key in HUB_DATASETS:
            hub_id, default_split, loader = HUB_DATASETS[key]
            return loader(hub_id, split or default_split)
        return load_swe_mini(split=key.partition(":")[2] or split or None)
    path = Path(source)
    if not path.exists():
        names = ", ".join(DATASETS)
        raise DataError.at(key, f"no such file or directory, and not a dataset name ({names})")
    tasks, issues = validate_source(path)
    if issues:
        raise DataError(issues)
    return tasks


__all__ = ["DATASETS", "load_tasks"]
