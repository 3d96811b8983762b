"""`deepswe-reproduce`: the whole pipeline of a profile (`make reproduce`), its state, its report.

    deepswe-reproduce run --config configs/tiny.yaml [--fresh]     every stage, resumable
    deepswe-reproduce status [--out runs/reproduce-tiny]           which stages are done
    deepswe-reproduce report [--out runs/reproduce-tiny]           rewrite REPORT.md, report.html
    deepswe-reproduce tts --config configs/tiny.yaml --out runs/tts-tiny   test-time scaling alone

Exit codes: 0 every stage done; 1 a stage failed (the reason is printed, the report is written
with what finished); 2 bad input (profile, overrides).
"""

from __future__ import annotations

from pathlib import Path

import typer

from deepswe.eval.config import ConfigError

app = typer.Typer(
    name="deepswe-reproduce",
    help="make reproduce: every stage of a profile in order, resumable, with one report.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

_OUT = typer.Option(None, "--out", help="run folder (default runs/reproduce-<profile>)")


def _out(out: Path | None, profile: str) -> Path:
    return out or Path("runs") / f"reproduce-{profile}"


@app.command()
def run(
    config: Path = typer.Option(Path("configs/tiny.yaml"), help="the profile YAML"),
    out: Path = _OUT,
    fresh: bool = typer.Option(False, help="remove the run folder first and start over"),
    setup_seconds: float = typer.Option(
        None, help="wall time of `make setup` before this, for the report's stage table"
    ),
    overrides: list[str] = typer.Argument(None, help="reproduce.a.b=value edits of the profile"),
) -> None:
    """Run every stage not yet done, then write REPORT.md and report.html."""
    from deepswe.reproduce.config import load_reproduce_config
    from deepswe.reproduce.pipeline import Context, StageFailed, run_pipeline
    from deepswe.reproduce.report import write_report
    from deepswe.reproduce.stages import stages_for

    try:
        cfg = load_reproduce_config(config, overrides or [])
    except ConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    ctx = Context(profile=config, out=_out(out, cfg.profile), cfg=cfg, echo=lambda m: typer.echo(m))
    try:
        run_pipeline(
            ctx,
            stages_for(ctx),
            fresh=fresh,
            setup_seconds=setup_seconds,
            after=lambda c: write_report(c.out, c.cfg),
        )
    except StageFailed as exc:
        typer.echo(f"\nmake reproduce stopped: {exc}", err=True)
        typer.echo(
            f"the report of what finished: {ctx.out / 'REPORT.md'}; rerun to continue "
            "from this stage, FRESH=1 to start over",
            err=True,
        )
        raise typer.Exit(1) from None
    typer.echo(f"\nmake reproduce: done. {ctx.out / 'REPORT.md'} and {ctx.out / 'report.html'}")


@app.command()
def status(
    out: Path = _OUT, profile: str = typer.Option("tiny", help="tiny | deepswe-32b")
) -> None:
    """Each stage's state, seconds and attempts."""
    from deepswe.reproduce.pipeline import read_state

    state = read_state(_out(out, profile))
    if not state["stages"]:
        typer.echo(f"{_out(out, profile)}: nothing run yet")
        return
    for name in state.get("order", state["stages"]):
        rec = state["stages"].get(name, {})
        secs = f"{rec['seconds']:.0f} s" if "seconds" in rec else ""
        typer.echo(
            f"{name:14} {rec.get('status', 'pending'):8} {secs:>8}  "
            f"{(rec.get('error') or '').splitlines()[0] if rec.get('error') else ''}"
        )


@app.command()
def report(
    out: Path = _OUT,
    config: Path = typer.Option(Path("configs/tiny.yaml"), help="the profile YAML"),
) -> None:
    """Rewrite REPORT.md, report.html and plots/ from the run folder."""
    from deepswe.reproduce.config import load_reproduce_config
    from deepswe.reproduce.report import write_report

    cfg = load_reproduce_config(config)
    paths = write_report(_out(out, cfg.profile), cfg)
    typer.echo("\n".join(str(p) for p in paths))


if __name__ == "__main__":
    app()


# --- `deepswe-reproduce tts` (deepswe.reproduce.tts.cli): registered here, written there --------
from deepswe.reproduce.tts.cli import tts  # noqa: E402

app.command("tts")(tts)
