"""The `deepswe-reproduce tts` verb (registered in cli.py): the whole test-time-scaling pipeline of a
profile, resumable (deepswe.reproduce.tts)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from deepswe.eval.config import ConfigError


def tts(
    config: Annotated[
        Path,
        typer.Option(
            "--config",
            help="A profile YAML: its tts: and eval: sections are read, e.g. configs/tiny.yaml.",
        ),
    ],
    out: Annotated[Path, typer.Option(help="Run folder, e.g. runs/tts-tiny; reused to resume.")],
    overrides: Annotated[
        list[str] | None,
        typer.Argument(
            help="tts.a.b=value / eval.a.b=value overrides, in order (eval.* also reach every "
            "deepswe-eval run), e.g. tts.test.per_repo=1 eval.workers=1."
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option(help="Print the resolved tts and eval sections and exit.")
    ] = False,
) -> None:
    """Candidates (scripted right/wrong fixes and the model's episodes, graded), the EF judge
    trained on train-split episodes, EB verdicts, selection and the Best@k report."""
    from deepswe.reproduce.tts.pipeline import TTSError, run_tts
    from deepswe.verify.tts_config import load_tts_config

    overrides = overrides or []
    try:
        cfg, eval_cfg = load_tts_config(config, overrides)
        eval_overrides = [o for o in overrides if o.startswith("eval.")]
        if dry_run:
            resolved = {
                "tts": cfg.model_dump(mode="json"),
                "eval": eval_cfg.model_dump(mode="json"),
            }
            typer.echo(json.dumps(resolved, indent=1))
            return
        report = run_tts(
            config, out, cfg, eval_cfg, eval_overrides, log=lambda m: typer.echo(m, err=True)
        )
    except (ConfigError, TTSError) as exc:
        typer.echo(f"deepswe-reproduce tts: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo((out / "report.md").read_text(encoding="utf-8"))
    typer.echo(
        f"wrote {out}/report.json, report.md, best_at_k.png, predictions/ ({report['tasks']} tasks)"
    )
