"""The deepswe-train command line. Its verbs are not built yet; it says so and exits non-zero."""

import typer

app = typer.Typer(help="deepswe-train (not built yet)", no_args_is_help=True)


@app.callback(invoke_without_command=True)
def main() -> None:
    """Refuse honestly until the verbs exist."""
    typer.echo("deepswe-train: not built yet (see the open issues); nothing was run.", err=True)
    raise typer.Exit(2)
