"""The deepswe-verify command line. Its verbs are not built yet; it says so and exits non-zero."""

import typer

app = typer.Typer(help="deepswe-verify (not built yet)", no_args_is_help=True)


@app.callback(invoke_without_command=True)
def main() -> None:
    """Refuse honestly until the verbs exist."""
    typer.echo("deepswe-verify: not built yet (see the open issues); nothing was run.", err=True)
    raise typer.Exit(2)
