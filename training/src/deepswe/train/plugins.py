"""A run's plug-ins built from its config: the inference engine, the training backend and the
rollout source, each named by registry name or `module:Class` (engines/, backends/, sources/).

`Trainer.setup` builds them in its own process and the Ray actors (deepswe.train.cluster) in
theirs, with these same functions: a part built in an actor is the part the trainer would build.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from deepswe.train.backends import backend_class
from deepswe.train.engines import engine_class
from deepswe.train.sources import source_class

if TYPE_CHECKING:
    from deepswe.train.config import TrainConfig


def build(cls: type, cfg: TrainConfig) -> Any:
    """`cls.from_config(cfg)`: every plug-in's Protocol declares it (engines, backends,
    sources). A class without it is refused by name rather than guessed at."""
    make = getattr(cls, "from_config", None)
    if not callable(make):
        raise TypeError(
            f"{cls.__module__}:{cls.__qualname__} has no from_config(cfg) classmethod: a plug-in "
            "is built from the run's config by it (the Protocols in deepswe.train.engines, "
            ".backends and .sources)"
        )
    return make(cfg)


def build_engine(cfg: TrainConfig) -> Any:  # -> InferenceEngine
    return build(engine_class(cfg.engine.name), cfg)


def build_backend(cfg: TrainConfig) -> Any:  # -> TrainingBackend
    return build(backend_class(cfg.backend.name), cfg)


def build_source(cfg: TrainConfig) -> Any:  # -> RolloutSource
    return build(source_class(cfg.data.source), cfg)
