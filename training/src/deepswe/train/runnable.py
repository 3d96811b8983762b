"""Whether the code and this machine can run a training config at all: the engine, backend and
source it names exist, its cluster section can be placed, the GPUs it needs are here."""

from __future__ import annotations

import importlib.util

import torch

from deepswe.train.backends import backend_class
from deepswe.train.config import TrainConfig
from deepswe.train.engines import engine_class
from deepswe.train.sources import source_class


def check_runnable(cfg: TrainConfig) -> tuple[type, type, type]:
    """Engine, backend and source classes, or a clear error when the machine or the code
    cannot run `cfg` (an implementation not built yet, GPUs missing)."""
    if cfg.rollout.max_staleness and (cfg.cluster.cpu_colocate or cfg.cluster.gpus):
        why = "cluster.cpu_colocate" if cfg.cluster.cpu_colocate else "a GPU plan (cluster.gpus)"
        raise ValueError(
            f"rollout.max_staleness {cfg.rollout.max_staleness}: {why} colocates the engines "
            "with the trainer (they sleep while it updates), so nothing can sample during an "
            "update; set rollout.max_staleness 0"
        )
    engine, backend, source = (
        engine_class(cfg.engine.name),
        backend_class(cfg.backend.name),
        source_class(cfg.data.source),
    )
    if cfg.cluster.scheduler == "local" and cfg.cluster.cpu_data_parallel > 1:
        raise ValueError(
            f"cluster.cpu_data_parallel {cfg.cluster.cpu_data_parallel}: data-parallel trainer "
            "ranks are Ray actors; set cluster.scheduler ray"
        )
    if cfg.cluster.scheduler == "local" and cfg.cluster.cpu_colocate:
        raise ValueError(
            "cluster.cpu_colocate: the engines live in trainer-rank actors; set cluster.scheduler ray"
        )
    if cfg.cluster.scheduler == "ray":
        from deepswe.train.cluster import placement_plan

        plan = placement_plan(cfg)  # a ValueError naming the field when it cannot be placed
        if plan.trainer_world > 1 and cfg.backend.name == "hf":
            raise ValueError(
                f"trainer world {plan.trainer_world}: the hf backend trains in one process; "
                "ranks that split the work need backend.name megatron"
            )
        from deepswe.train.cluster.ray_runtime import check_gpu_ranks

        check_gpu_ranks(cfg, plan)
        if importlib.util.find_spec("ray") is None:
            raise RuntimeError(
                "cluster.scheduler 'ray': Ray is not installed (pip install 'deepswe-train[cluster]')"
            )
    if cfg.cluster.address is not None:  # a Ray cluster's GPUs: counted when its placement
        return engine, backend, source  # group is reserved (RayScheduler.start), not here
    have = torch.cuda.device_count()
    if cfg.cluster.gpus > have:
        raise RuntimeError(
            f"cluster.gpus: this profile needs {cfg.cluster.gpus} GPUs; found {have}"
        )
    if cfg.model.device.startswith("cuda") and have == 0:
        raise RuntimeError(f"model.device {cfg.model.device!r}: no CUDA device here")
    return engine, backend, source


__all__ = ["check_runnable"]
