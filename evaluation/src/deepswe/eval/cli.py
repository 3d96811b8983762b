"""The deepswe-eval command line: `run` and `grade` here; `report` and `view` in cli_runs.py;
`validate`, `audit` and `health` in cli_checks.py; `envs` and `images` in cli_envs.py; `serve`
(the OpenEnv server) in cli_serve.py; what they share in cli_common.py.

Every verb that runs episodes reads one `EvalConfig`: a profile's `eval:` section (`--config`),
edited by `eval.a.b=value` overrides (the one way to set a value: `eval.runs=16`,
`eval.policy.name=gold`, `eval.workers=4`). Flags are only for what a profile does not hold
(the run folder, the task selection) and for where things are on this machine (the dataset,
the mirror, recorded trajectories).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from deepswe.eval import cli_checks, cli_envs, cli_runs, cli_serve
from deepswe.eval.cli_common import (
    CONFIG,
    DATASET,
    HEALTH,
    IDS,
    LIMIT,
    OVERRIDES,
    REPO_MIRROR,
    check_infra_errors,
    clean_leftover_sandboxes,
    fail,
    keep_health,
    load_dataset,
    preflight_backend,
    prepare_tasks,
    read_config,
    refuse_retired,
    say_unsupported,
    task_set_flags,
)

app = typer.Typer(
    help="Batch evaluation, SWE-bench-compatible grading, metrics and reports.",
    no_args_is_help=True,
)


def _check_endpoint(cfg):
    """What the openai policy's endpoint serves, asked before anything is written; a wrong URL,
    key or model name exits 2 with one line. None for policies without an endpoint."""
    from deepswe.env.policies.endpoint import EndpointError, check_policy_endpoint
    from deepswe.eval.card import served_weights

    try:
        served = check_policy_endpoint(cfg.policy)
    except (EndpointError, ValueError) as exc:
        fail(str(exc))
    if served is None:
        return None
    record = served_weights(served.id, served.root)  # digests a local folder's weight files
    typer.echo(
        f"endpoint {cfg.policy.base_url}: {served.id} from {served.root or '(root not said)'}"
        + (f", weights digest {record.digest[:12]}" if record.digest else ""),
        err=True,
    )
    return record


def _open(out: Path, cfg, tasks, served=None):
    """The run folder for (cfg, tasks): created, or resumed after checking its card."""
    from deepswe.eval.card import ProtocolMismatch, make_card, open_run

    resuming = (out / "config.json").exists()
    try:
        store, _ = open_run(out, make_card(cfg, tasks, served))
    except ProtocolMismatch as exc:
        fail(f"{out}: {exc}")
    if resuming:
        stored = store.records()
        done = len(store.done())
        infra = len(stored) - done  # stored infra_error records are not results: retried
        typer.echo(
            f"resuming {out}: {done} of {len(tasks) * cfg.runs} episodes on disk"
            + (f"; retrying {infra} infra_error episodes" if infra else ""),
            err=True,
        )
    return store


@app.command()
def run(
    out: Path = typer.Option(..., help="run folder, e.g. runs/my-eval; reused to resume"),
    config: Path = CONFIG,
    overrides: list[str] = OVERRIDES,
    dataset: str = DATASET,
    replay_dir: Path = typer.Option(None, help="recorded trajectories (replay policy)"),
    repo_mirror: Path = REPO_MIRROR,
    limit: int = LIMIT,
    ids: list[str] = IDS,
    dry_run: bool = typer.Option(False, help="print the resolved config and exit"),
    health: Path = HEALTH,
) -> None:
    """Run (task x run) episodes; resumable: the same --out continues where it stopped."""
    from deepswe.eval.report import build_report, summary_table
    from deepswe.eval.runner import run_all
    from deepswe.eval.swebench_io import write_swebench_files

    cfg = read_config(
        config,
        overrides,
        {
            **task_set_flags(dataset, repo_mirror),
            "policy.replay_dir": str(replay_dir) if replay_dir else None,
        },
    )
    if dry_run:
        typer.echo(cfg.model_dump_json(indent=1))
        return
    preflight_backend(cfg.sandbox_backend)
    served = _check_endpoint(cfg)
    tasks = load_dataset(cfg.dataset, ids, limit)
    if not tasks:
        fail(f"dataset {cfg.dataset}: no tasks selected")
    tasks, unsupported = prepare_tasks(tasks, cfg)
    store = _open(out, cfg, tasks, served)
    keep_health(health, store.root)
    clean_leftover_sandboxes(cfg.sandbox_backend)
    try:
        run_all(tasks, cfg, store, unsupported=unsupported)
    except ValueError as exc:  # bad input found while running (e.g. a task without gold patch)
        fail(str(exc))
    write_swebench_files(store, tasks, cfg.runs, cfg.policy.model or cfg.policy.name)
    metrics = build_report(out)
    typer.echo(summary_table(metrics))
    typer.echo(f"report: {out}/report.md")
    say_unsupported(unsupported, cfg.dataset)
    check_infra_errors(store, cfg.max_infra_errors, cfg.infra_retries)


@app.command()
def grade(
    predictions: Path = typer.Option(..., help="predictions.jsonl (SWE-bench format)"),
    out: Path = typer.Option(..., help="folder for report.json files and summary.json"),
    config: Path = CONFIG,
    overrides: list[str] = OVERRIDES,
    dataset: str = DATASET,
    repo_mirror: Path = REPO_MIRROR,
) -> None:
    """Grade patches made elsewhere, with the same grader and sandbox limits as `run`."""
    from deepswe.eval.grade_predictions import grade_all
    from deepswe.eval.swebench_io import read_predictions

    cfg = read_config(
        config,
        overrides,
        task_set_flags(dataset, repo_mirror),
    )
    try:
        preds = read_predictions(predictions)
    except (ValueError, json.JSONDecodeError) as exc:
        fail(str(exc))
    tasks = load_dataset(cfg.dataset, sorted({p["instance_id"] for p in preds}), None)
    tasks, unsupported = prepare_tasks(tasks, cfg)
    summary = grade_all(preds, tasks, unsupported, out, cfg)
    json.dump(summary, sys.stdout, indent=1)
    typer.echo("")
    infra = summary["counts"].get("infra_error", 0)
    if infra > cfg.max_infra_errors:
        fail(
            f"{infra} grading(s) ended infra_error (allowed: {cfg.max_infra_errors}); "
            f"their test logs are under {out}",
            code=3,
        )


for _verb in (
    cli_runs.report,
    cli_runs.view,
    cli_checks.validate,
    cli_checks.audit,
    cli_checks.health,
    cli_envs.envs,
    cli_envs.images,
    cli_serve.serve,
):
    app.command()(_verb)
app.command("serve-image")(cli_serve.serve_image)


def main() -> None:
    """The console script: an old flag is answered with its override, then the app runs."""
    try:
        refuse_retired(sys.argv[1:])
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    app()


if __name__ == "__main__":
    main()
