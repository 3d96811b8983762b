"""The manifest's entry point (openenv.yaml): `uvicorn deepswe.eval.openenv.app:app`, the profile
named by $DEEPSWE_OPENENV_CONFIG (its `openenv:` section; `deepswe-eval serve` is the same app
with overrides and flags, and prepares SWE-bench and R2E-Gym rows' environments first)."""

from __future__ import annotations

import os

from deepswe.data.datasets import load_tasks
from deepswe.eval.config import with_grading_rules
from deepswe.eval.openenv.config import load_openenv_config
from deepswe.eval.openenv.door import open_door
from deepswe.eval.openenv.server import create_swe_app

CONFIG_VAR = "DEEPSWE_OPENENV_CONFIG"


def _app():
    if not os.environ.get(CONFIG_VAR):
        raise RuntimeError(f"set {CONFIG_VAR} to a profile YAML with an `openenv:` section")
    cfg = load_openenv_config(os.environ[CONFIG_VAR])
    tasks = [with_grading_rules(t, cfg) for t in load_tasks(cfg.tasks)]
    door = open_door(
        tasks, health=cfg.health, include_unhealthy=cfg.include_unhealthy, seed=cfg.seed
    )
    return create_swe_app(cfg, door)


app = _app()
