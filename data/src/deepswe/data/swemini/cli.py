"""`deepswe-data swe-mini`: fetch the pinned sources, synthesise tasks, validate, build images.

make data        -> deepswe-data swe-mini fetch
make data-synth  -> deepswe-data swe-mini synth --seed 0 --out data/swe-mini/tasks.jsonl
make images      -> deepswe-data swe-mini images
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from deepswe.data.errors import DataError
from deepswe.data.swemini.manifest import MANIFEST, TASKS, cache_dir, load_manifest

app = typer.Typer(
    name="swe-mini",
    help="swe-mini: real bugs injected into real PyPI projects (the tiny profile's dataset).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

_MANIFEST = typer.Option(MANIFEST, "--manifest", help="The pinned sources (manifest.yaml).")
_TASKS = typer.Option(TASKS, "--tasks", help="The released tasks file.")


def _die(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(1)


def _tasks(path: Path, split: str | None = None, limit: int = 0, projects: list[str] | None = None):
    from deepswe.data.swemini.load import load_swe_mini

    try:
        tasks = load_swe_mini(path, split=split)
    except DataError as e:
        raise _die(str(e)) from None
    if projects:
        tasks = [t for t in tasks if t.repo.split("/")[-1] in projects]
    if limit:
        # round-robin over projects, so a small limit still covers several of them
        by: dict[str, list] = {}
        for t in tasks:
            by.setdefault(t.repo, []).append(t)
        picked, lists = [], list(by.values())
        while len(picked) < limit and any(lists):
            for lst in lists:
                if lst and len(picked) < limit:
                    picked.append(lst.pop(0))
        tasks = picked
    return tasks


@app.command()
def fetch(
    manifest: Path = _MANIFEST,
    tasks: Path = _TASKS,
    no_tasks: bool = typer.Option(False, "--no-tasks", help="Only the clean repositories."),
) -> None:
    """Download the sdists (sha256-checked, cached), rebuild each git repo, re-create and check
    every task's base commit."""
    from deepswe.data.loaders import load_jsonl
    from deepswe.data.swemini.sources import SourceError
    from deepswe.data.swemini.sources import fetch as do_fetch

    m = load_manifest(manifest)
    rows = [] if no_tasks or not tasks.exists() else load_jsonl(tasks)
    try:
        do_fetch(m, rows, log=typer.echo)
    except SourceError as e:
        raise _die(str(e)) from None
    typer.echo(
        f"swe-mini sources ready in {cache_dir()} ({len(m.projects)} projects, {len(rows)} task commits)"
    )


@app.command()
def synth(
    seed: int = typer.Option(0, help="Seed of site order and problem-statement templates."),
    out: Path = typer.Option(TASKS, "--out", help="Output JSONL (replaced atomically)."),
    quota: int = typer.Option(30, help="Tasks kept per project at most."),
    max_tries: int = typer.Option(90, help="Mutants run per project at most."),
    project: list[str] = typer.Option(
        [], "--project", "-p", help="Only these projects (repeatable)."
    ),
    workers: int = typer.Option(2, min=1, help="Projects synthesised in parallel."),
    manifest: Path = _MANIFEST,
) -> None:
    """Mutate, test on the host, keep real bugs, write tasks (resumable, cached)."""
    from deepswe.data.swemini.release import synth_all

    stats = synth_all(
        load_manifest(manifest), out, seed, quota, max_tries, project or None, workers
    )
    typer.echo(json.dumps(stats, indent=2))
    typer.echo(f"wrote {stats['tasks']} tasks to {out}")


@app.command()
def validate(
    tasks: Path = _TASKS,
    limit: int = typer.Option(0, help="Validate this many tasks (0 = all), spread over projects."),
    project: list[str] = typer.Option([], "--project", "-p", help="Only these projects."),
    rounds: int = typer.Option(1, min=1, help="Validate each task this many times."),
    workers: int = typer.Option(2, min=1, help="Tasks validated at once."),
    progress_file: Path = typer.Option(
        None, help="Resumable verdicts (default: <cache>/validation/<tasks file stem>.jsonl)."
    ),
) -> None:
    """Gold patch -> resolved and empty patch -> unresolved, each task in its own sandboxes."""
    from deepswe.data.swemini.sources import fetch as do_fetch
    from deepswe.data.swemini.validate import validate_tasks

    chosen = _tasks(tasks, limit=limit, projects=project)
    m = load_manifest()
    names = {t.repo.split("/")[-1] for t in chosen}
    do_fetch(m.model_copy(update={"projects": [p for p in m.projects if p.name in names]}), chosen,
             log=lambda _: None, rebuild=False)  # fmt: skip
    progress_file = progress_file or cache_dir() / "validation" / f"{tasks.stem}.jsonl"
    report = validate_tasks(chosen, progress_file, workers=workers, rounds=rounds)
    typer.echo(json.dumps(report, indent=2))
    if report["failed"]:
        raise typer.Exit(1)


@app.command()
def images(
    tasks: Path = _TASKS,
    limit: int = typer.Option(0, help="Build this many task images (0 = all)."),
) -> None:
    """Build (or find cached) every task's image."""
    from rich.progress import track

    from deepswe.data.swemini.sources import fetch as do_fetch
    from deepswe.env.images.task import ensure_task_image

    chosen = _tasks(tasks, limit=limit)
    do_fetch(load_manifest(), chosen, log=lambda _: None, rebuild=False)
    for t in track(chosen, description="task images"):
        ensure_task_image(t, log=lambda _: None)
    typer.echo(f"{len(chosen)} task images ready")
