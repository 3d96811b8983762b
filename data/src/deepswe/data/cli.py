"""`deepswe-data`: look at, check, convert and decontaminate task sources.

SOURCE is a dataset name ("swe-bench-verified", "r2e-gym-subset": loaded from the Hugging Face
Hub) or a local file/directory (our JSONL, swe-mini rows, SWE-bench .jsonl/.parquet, R2E-Gym
rows or trajectory files).
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from deepswe.data.datasets import DATASETS, load_tasks
from deepswe.data.decontaminate import SWE_BENCH_VERIFIED_REPOS, decontaminate, eval_repos_of
from deepswe.data.errors import DataError
from deepswe.data.loaders import validate_source
from deepswe.data.store import write_jsonl
from deepswe.data.task import Task

app = typer.Typer(
    name="deepswe-data",
    help="Task sources for DeepSWE: show, validate, convert, decontaminate.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

from deepswe.data.swemini.cli import app as swe_mini_app  # noqa: E402 (mounted after app exists)

app.add_typer(swe_mini_app, name="swe-mini")

_SOURCE_HELP = f"Dataset name ({', '.join(DATASETS)}) or a local file/directory."
_SPLIT_HELP = "Hub split (default: the dataset's own: test for SWE-bench, train for R2E-Gym)."


def _fail(message: str) -> typer.Exit:
    typer.echo(message, err=True)
    return typer.Exit(1)


def _load(source: str, split: str | None) -> list[Task]:
    """Load or exit 1 with every problem on its own line (no traceback)."""
    try:
        return load_tasks(source, split=split)
    except DataError as e:
        for issue in e.issues:
            typer.echo(f"error: {issue}", err=True)
        raise typer.Exit(1) from None


def _write(tasks: list[Task], to: Path) -> int:
    try:
        return write_jsonl(tasks, to)
    except OSError as e:
        raise _fail(f"error: cannot write {to}: {e.strerror or e}") from None


@app.command()
def show(
    source: str = typer.Argument(..., help=_SOURCE_HELP),
    limit: int = typer.Option(20, "--limit", "-n", min=0, help="Rows to show (0 = all)."),
    split: str | None = typer.Option(None, help=_SPLIT_HELP),
) -> None:
    """Print a table of the tasks in SOURCE."""
    tasks = _load(source, split)
    shown = tasks if limit == 0 else tasks[:limit]
    table = Table(title=f"{source}: {len(tasks)} tasks (showing {len(shown)})")
    for name in ("id", "repo", "source"):
        table.add_column(name, overflow="fold")
    for name in ("#F2P", "#P2P", "has gold"):
        table.add_column(name, justify="right")
    for t in shown:
        # Text() cells: ids and repos are data, never rich markup
        table.add_row(
            Text(t.instance_id),
            Text(t.repo),
            Text(t.source.value),
            str(len(t.hidden.fail_to_pass)),
            str(len(t.hidden.pass_to_pass)),
            "yes" if t.gold_patch else "no",
        )
    Console().print(table)


@app.command()
def validate(
    file: Path = typer.Argument(..., help="Local task file or directory to check."),
) -> None:
    """Check every row of FILE; report each bad row as FILE:LINE: FIELD: problem. Writes nothing."""
    try:
        tasks, issues = validate_source(file)
    except DataError as e:
        issues, tasks = e.issues, []
    for issue in issues:
        typer.echo(str(issue), err=True)
    if issues:
        bad_rows = len({i.where for i in issues})
        raise _fail(f"{file}: {bad_rows} bad row(s), {len(tasks)} good")
    typer.echo(f"{file}: {len(tasks)} tasks OK")


@app.command()
def convert(
    source: str = typer.Argument(..., help=_SOURCE_HELP),
    to: Path = typer.Option(..., "--to", help="Output JSONL (replaced atomically)."),
    split: str | None = typer.Option(None, help=_SPLIT_HELP),
) -> None:
    """Convert SOURCE to our task JSONL. Nothing is written unless every row converts."""
    tasks = _load(source, split)
    n = _write(tasks, to)
    typer.echo(f"wrote {n} tasks to {to}")


@app.command(name="decontaminate")
def decontaminate_cmd(
    source: str = typer.Argument(..., help=f"Training tasks. {_SOURCE_HELP}"),
    to: Path = typer.Option(..., "--to", help="Output JSONL of the kept tasks."),
    eval_source: str | None = typer.Option(
        None,
        "--eval",
        help="Evaluation tasks whose repositories to exclude (default: the 12 "
        "SWE-Bench-Verified repositories, built in).",
    ),
    split: str | None = typer.Option(None, help=_SPLIT_HELP),
) -> None:
    """Drop training tasks from SWE-Bench-Verified's (or --eval's) repositories."""
    train = _load(source, split)
    eval_repos = (
        eval_repos_of(_load(eval_source, None)) if eval_source else SWE_BENCH_VERIFIED_REPOS
    )
    kept, report = decontaminate(train, eval_repos)
    n = _write(kept, to)
    typer.echo(f"dropped {report.n_dropped} of {report.total} tasks")
    if report.dropped:
        table = Table()
        table.add_column("repo")
        table.add_column("dropped", justify="right")
        for repo, count in report.dropped.items():
            table.add_row(Text(repo), str(count))
        Console().print(table)
    typer.echo(f"wrote {n} tasks to {to}")


@app.command(name="swe-toy")
def swe_toy_cmd(
    out: Path = typer.Option(Path("runs/data/swe-toy"), "--out", help="Folder for the dataset."),
    train: int = typer.Option(8, min=1, help="Train-split tasks (repositories)."),
    test: int = typer.Option(8, min=1, help="Test-split tasks (repositories)."),
    seed: int = typer.Option(0, help="Seeds the repositories' contents and statements."),
) -> None:
    """Make swe-toy (the tiny profile's RL curriculum): OUT/train.jsonl, OUT/test.jsonl and a
    git repository per task beside them. Idempotent for the same sizes and seed."""
    from deepswe.data.swetoy import write_dataset

    paths = write_dataset(out, train, test, seed)
    typer.echo(f"swe-toy: {train} train and {test} test tasks in {paths['train'].parent}")


if __name__ == "__main__":
    app()
