"""The deepswe-eval verbs that read a finished run folder: `report` (metrics, report, plots and
SWE-bench files rebuilt from the stored episodes) and `view` (one self-contained HTML page of its
episodes). Registered in cli.py."""

from __future__ import annotations

from pathlib import Path

import typer

from deepswe.eval.cli_common import HEALTH, fail, keep_health, load_dataset


def report(
    run_dir: Path = typer.Argument(..., help="a run folder written by `run`"),
    health: Path = HEALTH,
) -> None:
    """Rebuild metrics.json, report.md, plots and SWE-bench files from the stored episodes."""
    from deepswe.eval.card import ProtocolMismatch, read_card
    from deepswe.eval.report import build_report, summary_table
    from deepswe.eval.store import RunStore
    from deepswe.eval.swebench_io import write_swebench_files

    store = RunStore(run_dir)
    if not store.config_path.exists():
        fail(f"{run_dir}: no config.json; not a run folder")
    try:
        card = read_card(store)
    except ProtocolMismatch as exc:
        fail(str(exc))
    try:
        tasks = load_dataset(card.dataset, card.instance_ids, None)
        write_swebench_files(
            store, tasks, card.runs, card.eval.policy.model or card.eval.policy.name
        )
    except typer.Exit:
        typer.echo("note: dataset not loadable here; SWE-bench files not rewritten", err=True)
    keep_health(health, store.root)
    metrics = build_report(run_dir)
    typer.echo(summary_table(metrics))


def view(
    run_dir: Path = typer.Argument(..., help="a run folder written by `run`"),
    out: Path = typer.Option(None, help="the HTML file to write (default: RUN_DIR/view.html)"),
    serve: int = typer.Option(None, help="then serve it at http://127.0.0.1:PORT/ until Ctrl-C"),
) -> None:
    """Write one self-contained HTML page to browse the run's episodes: open it from disk, no
    server or network needed."""
    from deepswe.eval.viewer import serve as serve_page
    from deepswe.eval.viewer import write_view

    if not (run_dir / "episodes").is_dir() and not (run_dir / "config.json").exists():
        fail(f"{run_dir}: no episodes/ and no config.json; not a run folder")
    page = write_view(run_dir, out)
    typer.echo(f"viewer: {page}")
    if serve is not None:
        serve_page(page, serve)


__all__ = ["report", "view"]
