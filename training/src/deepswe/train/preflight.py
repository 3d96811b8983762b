"""Whether this machine, this build and the data can run a training config: what
`deepswe-train train` and `plan` check before starting (exit 3 with these lines when not)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from deepswe.train.config import TrainConfig


def model_found(path: str) -> bool:
    """A local HF folder, or a hub id already in the local cache (models are never fetched)."""
    if Path(path).is_dir():
        return True
    from huggingface_hub import try_to_load_from_cache
    from huggingface_hub.errors import HFValidationError

    try:
        return isinstance(try_to_load_from_cache(path, "config.json"), str)
    except HFValidationError:  # not shaped like a hub id either
        return False


def machine_problems(cfg: TrainConfig) -> list[str]:
    """Why this machine or build cannot run `cfg` (empty: it can). The hardware is looked at
    first, so a GPU profile on a CPU box says so even while its engine is not built."""
    import torch

    from deepswe.train.runnable import check_runnable

    problems = []
    have = torch.cuda.device_count()
    if cfg.cluster.gpus > have and cfg.cluster.address is None:  # else: the Ray cluster's GPUs
        problems.append(f"cluster.gpus: this profile needs {cfg.cluster.gpus} GPUs; found {have}")
    if not model_found(cfg.model.path):
        path = cfg.model.path
        hub_id = path.count("/") == 1 and not path.startswith((".", "/", "~", "runs/"))
        fix = (
            f"download it beforehand: huggingface-cli download {path}"
            if hub_id
            else f"build a tiny one: deepswe-train init-model --out {path}"
        )
        problems.append(
            f"model.path {path!r}: not a local folder, nor a model in the local Hugging "
            f"Face cache ({fix})"
        )
    try:
        check_runnable(cfg)
    except (RuntimeError, ValueError) as e:  # unknown or unimportable plugin, missing device
        if str(e) not in problems:
            problems.append(str(e))
    return problems


def data_problems(cfg: TrainConfig) -> list[str]:
    """Why the spine source's tasks cannot run here: no task file, or R2E-Gym rows with no
    image on this engine and no mirror to build them from. Prints the image plan."""
    if cfg.data.source != "spine" or not cfg.data.path:
        return []
    from deepswe.data.errors import DataError
    from deepswe.train.sources.task_list import training_tasks

    path = cfg.data.path
    if path.endswith((".jsonl", ".json", ".parquet")) and not Path(path).exists():
        return [f"data.path {path!r}: no such file (make data PROFILE=... writes it)"]
    try:
        training_tasks(cfg.data)  # prints the image plan and what it leaves out
    except (DataError, ValueError) as e:
        return [str(e)]
    return []


__all__ = ["data_problems", "machine_problems", "model_found"]
