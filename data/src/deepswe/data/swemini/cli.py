"""`deepswe-data swe-mini`: fetch the pinned sources, synthesise tasks, check their statements.

make data        -> deepswe-data swe-mini fetch
make data-synth  -> deepswe-data swe-mini synth --seed 0 --out data/swe-mini/tasks.jsonl
deepswe-data swe-mini check-statements   (is every problem statement one a person can act on?)

Building the tasks' images is deepswe-env's (`deepswe-env build --tasks swe-mini`, `make images`)
and validating them is an evaluation (`deepswe-eval validate --dataset swe-mini`): deepswe.data
imports neither.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

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


@app.command("check-statements")
def check_statements(
    tasks: Path = _TASKS,
    manifest: Path = _MANIFEST,
    static_only: bool = typer.Option(
        False, "--static-only", help="Only the text checks (no sources, no runs)."
    ),
    workers: int = typer.Option(2, min=1, help="Projects checked in parallel."),
    show: int = typer.Option(20, help="Failing rows listed at most."),
    json_out: Path | None = typer.Option(None, "--json", help="Write the full report here."),
) -> None:
    """Share of rows whose title names a call of the project, whose reproduction defines what it
    uses, runs at the base commit showing the described behaviour, and no longer shows it with
    the gold patch; per check and per project. Exit 1 if any row fails a check."""
    from deepswe.data.loaders import load_jsonl
    from deepswe.data.swemini.snippet import snippet_python
    from deepswe.data.swemini.statement_audit import check_rows, report

    rows_in = load_jsonl(tasks)
    try:
        python = None if static_only else snippet_python()
    except RuntimeError as e:
        raise _die(str(e)) from None
    rows = check_rows(rows_in, load_manifest(manifest), python, workers=workers)
    rep = report(rows)
    if json_out is not None:
        json_out.write_text(json.dumps(rep, indent=2) + "\n")
    checks = list(rep["overall"])
    typer.echo(f"{'project':<12} " + " ".join(f"{c:>16}" for c in checks))
    for name, per in [("ALL", rep["overall"]), *rep["projects"].items()]:
        cells = [f"{per[c]['passed']}/{per[c]['rows']} {per[c]['share']:.1%}" for c in checks]
        typer.echo(f"{name:<12} " + " ".join(f"{x:>16}" for x in cells))
    failing = [r for r in rows if not r.ok]
    for r in failing[:show]:
        for check, why in r.failures().items():
            typer.echo(f"FAIL {r.instance_id}: {check.value}: {why}")
    if failing:
        raise _die(f"{len(failing)} of {len(rows)} statements fail a check")
