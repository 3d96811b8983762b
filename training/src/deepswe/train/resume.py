"""A resumed run must use the config it started with: which changes a resume refuses (all but
`run.steps`, where things run, and fields added since at their defaults) and which it ignores."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from deepswe.train.config import ConfigError, TrainConfig, resolved

# Sections that do not shape GRPO++: the SFT warm start made model.path before the run, and the
# evaluation protocol is deepswe-eval's (a run folder written before they existed has neither).
_IGNORED_ON_RESUME = ("sft", "eval")
# Where rollouts run, not what they compute (the two schedulers sample the same: tested), so a
# run started on threads may resume on Ray and back.
_RESUMABLE_CHANGES = {
    "run": ("steps",),
    # Not cluster.cpu_data_parallel: a checkpoint holds one RNG state per rank.
    "cluster": (
        "scheduler",
        "address",
        "rollout_workers",
        "cpus_per_rollout_worker",
        "cpus_per_trainer_rank",
    ),
}


def _default_of(cfg: TrainConfig, section: str, key: str) -> Any:
    """The default of `section.key` as the saved config would hold it (plain data)."""
    model = getattr(cfg, section, None)
    field = type(model).model_fields.get(key) if isinstance(model, BaseModel) else None
    if field is None or field.is_required():
        return _NO_DEFAULT
    value = field.get_default(call_default_factory=True)
    value = value.model_dump(mode="json") if isinstance(value, BaseModel) else value
    return yaml.safe_load(yaml.safe_dump(value))


_NO_DEFAULT = object()


def check_resume_config(cfg: TrainConfig, run_dir: Path, resume: bool) -> None:
    """A resumed run must use the config it started with (run.steps may grow; the scheduler
    may change)."""
    saved = run_dir / "config.yaml"
    if not resume or not saved.exists():
        return
    old = yaml.safe_load(saved.read_text())
    new = yaml.safe_load(yaml.safe_dump(resolved(cfg)))
    for section in _IGNORED_ON_RESUME:
        old.pop(section, None)
        new.pop(section, None)
    for section, keys in _RESUMABLE_CHANGES.items():
        for key in keys:
            old.get(section, {}).pop(key, None)
            new[section].pop(key, None)
    diff = sorted(
        f"{s}.{k}"
        for s in new
        for k in set(new[s]) | set(old.get(s, {}))
        if new[s].get(k) != old.get(s, {}).get(k)
        # a field added since the run started, at its default: the behaviour it started with
        and not (k not in old.get(s, {}) and new[s].get(k) == _default_of(cfg, s, k))
    )
    if diff:
        raise ConfigError(f"--resume: the config differs from {saved} in: {', '.join(diff)}")


__all__ = ["check_resume_config"]
