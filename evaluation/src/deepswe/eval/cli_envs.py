"""The deepswe-eval verbs about environments, before any run: `envs` (what this machine can
build from source, and why not) and `images` (which images a run over R2E-Gym rows will use).
Registered in cli.py."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from deepswe.eval.cli_common import DATASET_HELP, REPO_MIRROR, fail, load_dataset


def envs(
    dataset: str = typer.Option("swe-bench-verified", help=DATASET_HELP),
    repo_mirror: Path = typer.Option(
        None, help="folder of git clones (SWE-bench: compiler detection; R2E-Gym: clone checks)"
    ),
    all_specs: bool = typer.Option(False, help="also specs no task of the dataset uses"),
) -> None:
    """Which environments this machine can build from source, and why not: every SWE-bench
    (repository, version) spec with the instances it serves, or for R2E-Gym rows (a local file
    or folder of rows, or r2e-gym-subset from the Hub) one line per repository."""
    from deepswe.data.task import TaskSource

    tasks = load_dataset(dataset, None, None)
    if any(t.source is TaskSource.R2E_GYM for t in tasks):
        from deepswe.env.recipes.r2e_gym import coverage as r2e_coverage

        repos = r2e_coverage.coverage(tasks, repo_mirror)
        typer.echo(r2e_coverage.markdown(repos, repo_mirror is not None))
        typer.echo(json.dumps(r2e_coverage.summary(repos), indent=1))
        return
    from deepswe.env.recipes.swebench.coverage import markdown, spec_rows, summary

    rows = spec_rows(tasks, repo_mirror, all_specs)
    if not rows:
        fail(f"dataset {dataset}: no SWE-bench or R2E-Gym repositories in it")
    typer.echo(markdown(rows))
    typer.echo(json.dumps(summary(rows), indent=1))


def images(
    dataset: str = typer.Option(..., help=DATASET_HELP),
    repo_mirror: Path = REPO_MIRROR,
    r2e_env: str = typer.Option("auto", help="R2E-Gym environments: auto | build | image"),
) -> None:
    """Which images a run over these R2E-Gym rows will use: R2E-Gym's own when this engine has
    them, else built from source from --repo-mirror; exit 2 naming what is missing."""
    from deepswe.env.recipes.r2e_gym.plan import plan_images

    if r2e_env not in ("auto", "build", "image"):
        fail(f"--r2e-env {r2e_env!r}: want auto, build or image")
    tasks = load_dataset(dataset, None, None)
    plan = plan_images(tasks, mode=r2e_env, mirror=repo_mirror)
    for line in plan.lines(repo_mirror):
        typer.echo(line)
    if plan.missing:
        fail(
            f"{len(plan.missing)} row(s) have no image and cannot be built: "
            f"{next(iter(plan.missing.values()))}"
        )
    if not plan.usable:
        fail(f"dataset {dataset}: no row can run here")


__all__ = ["envs", "images"]
