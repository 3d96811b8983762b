"""`deepswe-eval serve`: the task set as an OpenEnv environment (deepswe.eval.openenv), read
from a profile's `openenv:` section and `openenv.a.b=value` overrides; needs the `openenv`
extra (`pip install -e 'evaluation[openenv]'`). `deepswe-eval serve-image`: the same server as
a container image built from our registry-free base (deepswe.eval.openenv.image)."""

from __future__ import annotations

from pathlib import Path

import typer

from deepswe.eval.cli_common import (
    IDS,
    LIMIT,
    REPO_MIRROR,
    fail,
    load_dataset,
    preflight_backend,
    prepare_tasks,
)


def serve(
    config: Path = typer.Option(
        None, "--config", help="a profile YAML; its `openenv:` section is read"
    ),
    overrides: list[str] = typer.Argument(
        None,
        help="openenv.a.b=value overrides, in order (openenv.max_sessions=32, "
        "openenv.session_ttl_s=300, openenv.episode.max_steps=50, openenv.port=8000)",
    ),
    tasks: str = typer.Option(None, help="the task set: a dataset name or a task file"),
    health: Path = typer.Option(
        None, help="a health manifest (deepswe-eval health): its unhealthy tasks are refused"
    ),
    repo_mirror: Path = REPO_MIRROR,
    limit: int = LIMIT,
    ids: list[str] = IDS,
) -> None:
    """Serve the task set as an OpenEnv environment until interrupted."""
    from deepswe.data.profile import ConfigError
    from deepswe.eval.config import with_grading_rules
    from deepswe.eval.health import HealthError

    try:
        from deepswe.eval.openenv.config import load_openenv_config
        from deepswe.eval.openenv.door import TaskRefused, open_door
        from deepswe.eval.openenv.server import serve as run_server
    except ImportError as exc:  # the extra is not installed
        fail(f"{exc}: install the openenv extra (pip install -e 'evaluation[openenv]')")
    edits = {"tasks": tasks, "health": str(health) if health else None}
    edits["repo_mirror"] = str(repo_mirror) if repo_mirror else None
    try:
        cfg = load_openenv_config(config, overrides or [], {k: v for k, v in edits.items() if v})
    except ConfigError as exc:
        fail(str(exc))
    preflight_backend(cfg.sandbox_backend)
    chosen = load_dataset(cfg.tasks, ids, limit)
    chosen, unsupported = prepare_tasks(chosen, cfg)
    chosen = [with_grading_rules(t, cfg) for t in chosen]
    try:
        door = open_door(
            chosen,
            health=cfg.health,
            include_unhealthy=cfg.include_unhealthy,
            unsupported=unsupported,
            seed=cfg.seed,
        )
    except (HealthError, TaskRefused) as exc:
        fail(f"openenv.tasks {cfg.tasks}: {exc}")
    typer.echo(
        f"serving {len(door.tasks)} task(s) of {cfg.tasks} ({len(door.refused)} refused) on "
        f"http://{cfg.host}:{cfg.port} (WebSocket sessions at /ws)",
        err=True,
    )
    for i, why in door.refused.items():
        typer.echo(f"  refused {i}: {why[:200]}", err=True)
    run_server(cfg, door)


def serve_image(
    suite: str = typer.Option("bookworm", help="the Debian base the image is built on"),
) -> None:
    """Build the OpenEnv server's container image (deepswe/openenv-server) from our
    registry-free base and this checkout's packages; prints its tag."""
    from deepswe.eval.openenv.image import ServerImageError, build_server_image

    checkout = Path(__file__).resolve().parents[4]  # evaluation/src/deepswe/eval/cli_serve.py
    try:
        tag = build_server_image(checkout, suite, log=lambda m: typer.echo(m, err=True))
    except ServerImageError as exc:
        fail(str(exc))
    typer.echo(tag)
