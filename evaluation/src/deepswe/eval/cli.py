"""The deepswe-eval command line: `run`, `report`, `grade`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

app = typer.Typer(
    help="Batch evaluation, SWE-bench-compatible grading, metrics and reports.",
    no_args_is_help=True,
)

DATASET_HELP = "swe-bench-verified | swe-mini[:train|:test] | r2e-gym-subset | a task file (.jsonl/.json/.parquet)"


def _fail(msg: str) -> None:
    typer.echo(f"deepswe-eval: {msg}", err=True)
    raise typer.Exit(2)


def load_dataset(name: str, ids: list[str] | None, limit: int | None):
    """Tasks for --dataset, in a stable order, narrowed by --ids then --limit."""
    from deepswe.data.errors import DataError
    from deepswe.data.datasets import load_tasks

    try:
        tasks = load_tasks(name)  # names include swe-mini, swe-mini:train, swe-mini:test
    except DataError as exc:
        _fail(f"dataset {name}: {exc}")
    tasks = sorted(tasks, key=lambda t: t.instance_id)
    if ids:
        known = {t.instance_id for t in tasks}
        unknown = [i for i in ids if i not in known]
        if unknown:
            _fail(f"--ids not in {name}: {', '.join(unknown)}")
        tasks = [t for t in tasks if t.instance_id in set(ids)]
    return tasks[:limit] if limit else tasks


def prepare_tasks(tasks, mode: str, mirror: Path | None):
    """SWE-bench tasks get their environment; returns (tasks, {instance_id: unsupported reason})."""
    from deepswe.eval.swebench_env import (
        SwebenchEnvError,
        UnsupportedEnv,
        needs_swebench_env,
        prepare,
    )

    if not any(needs_swebench_env(t) for t in tasks):
        return tasks, {}
    from deepswe.env.images.task import _exists

    out, unsupported = [], {}
    for t in tasks:
        try:
            out.append(prepare(t, mode=mode, mirror=mirror, image_exists=_exists))
        except UnsupportedEnv as exc:
            out.append(t)
            unsupported[t.instance_id] = str(exc)
        except SwebenchEnvError as exc:
            _fail(str(exc))
    return out, unsupported


@app.command()
def run(
    dataset: str = typer.Option(..., help=DATASET_HELP),
    policy: str = typer.Option("gold", help="gold | empty | openai | replay (or module:Class)"),
    out: Path = typer.Option(..., help="run folder, e.g. runs/my-eval; reused to resume"),
    runs: int = typer.Option(1, min=1, help="independent runs per task (DeepSWE: 16)"),
    workers: int = typer.Option(1, min=1, help="episodes in flight at once"),
    base_url: str = typer.Option(None, help="OpenAI-compatible endpoint (openai policy)"),
    model: str = typer.Option(None, help="model name at the endpoint (openai policy)"),
    temperature: float = typer.Option(1.0, min=0.0, help="sampling temperature (DeepSWE: 1.0)"),
    max_tokens: int = typer.Option(None, help="max tokens per reply (openai policy)"),
    replay_dir: Path = typer.Option(None, help="recorded trajectories (replay policy)"),
    policy_arg: list[str] = typer.Option(
        None, help="key=value passed to a plugged-in policy's constructor (repeat the option)"
    ),
    max_steps: int = typer.Option(100, min=1, help="steps per episode (DeepSWE eval: 100)"),
    max_context: int = typer.Option(65536, min=1, help="context tokens (DeepSWE eval: 65536)"),
    action_timeout: float = typer.Option(90.0, help="seconds per tool call"),
    wall_timeout: float = typer.Option(5400.0, help="seconds per episode"),
    prompt_variant: str = typer.Option("eval", help="eval (R2E-Gym's prompts) | train (rLLM's)"),
    infra_retries: int = typer.Option(
        2, min=0, help="retries of an infra error before it is recorded"
    ),
    max_infra_errors: int = typer.Option(
        0,
        min=0,
        help="episodes that may stay infra_error after their retries before the run exits 3 "
        "(the report is written either way; rerunning the command retries them)",
    ),
    limit: int = typer.Option(None, help="first N tasks (by instance_id) only"),
    ids: list[str] = typer.Option(None, help="only these instance ids (repeat the option)"),
    repo_mirror: Path = typer.Option(
        None, help="folder of git clones DIR/<owner>__<name> (SWE-bench)"
    ),
    swebench_env: str = typer.Option("auto", help="SWE-bench environments: auto | build | image"),
    memory: str = typer.Option("4g", help="sandbox memory limit"),
    cpus: float = typer.Option(1.0, help="sandbox CPU limit"),
) -> None:
    """Run (task x run) episodes; resumable: the same --out continues where it stopped."""
    from deepswe.env.agent.loop import EpisodeLimits
    from deepswe.env.sandbox import SandboxLimits
    from deepswe.eval import protocol as P
    from deepswe.eval.report import build_report, summary_table
    from deepswe.eval.runner import RunnerConfig, run_all
    from deepswe.eval.store import RunStore, atomic_write_json
    from deepswe.eval.swebench_io import write_swebench_files

    policy_args = dict(_key_value(a) for a in policy_arg or [])
    tasks = load_dataset(dataset, ids, limit)
    if not tasks:
        _fail(f"dataset {dataset}: no tasks selected")
    tasks, unsupported = prepare_tasks(tasks, swebench_env, repo_mirror)
    limits = EpisodeLimits(
        max_steps=max_steps,
        max_context_tokens=max_context,
        action_timeout_s=action_timeout,
        wall_timeout_s=wall_timeout,
        prompt_variant=prompt_variant,
    )
    is_model = policy == "openai"
    card = P.ProtocolCard(
        dataset=dataset,
        dataset_sha256=P.tasks_sha256(tasks),
        instance_ids=[t.instance_id for t in tasks],
        policy=policy,
        policy_args=policy_args,
        model=model if is_model else None,
        temperature=temperature if is_model else None,
        max_tokens=max_tokens if is_model else None,
        runs=runs,
        limits=limits,
        prompt_sha256=P.prompt_sha256(prompt_variant),
        infra_retries=infra_retries,
        swebench_build=swebench_env
        if any(t.source.value == "swe-bench-verified" for t in tasks)
        else "",
        workers=workers,
        base_url=base_url,
        code_version=P.code_version(),
        started_at=P.utc_now(),
    )
    store = RunStore(out)
    if store.config_path.exists():
        old = P.ProtocolCard.model_validate_json(store.config_path.read_text())
        try:
            P.check_resume(old, card)
        except P.ProtocolMismatch as exc:
            _fail(f"{out}: {exc}")
        card = card.model_copy(update={"started_at": old.started_at})
        infra = len(store.records()) - len(store.done())
        typer.echo(
            f"resuming {out}: {len(store.done())} of {len(tasks) * runs} episodes on disk"
            + (f"; retrying {infra} infra_error episodes" if infra else ""),
            err=True,
        )
    store.root.mkdir(parents=True, exist_ok=True)
    atomic_write_json(store.config_path, card.model_dump(mode="json"))
    _clean_leftover_sandboxes()
    cfg = RunnerConfig(
        policy=policy,
        model=model,
        base_url=base_url,
        temperature=temperature,
        max_tokens=max_tokens,
        replay_dir=replay_dir,
        policy_args=policy_args,
        runs=runs,
        workers=workers,
        infra_retries=infra_retries,
        limits=limits,
        sandbox_limits=SandboxLimits(memory=memory, cpus=cpus),
    )
    try:
        run_all(tasks, cfg, store, unsupported=unsupported)
    except ValueError as exc:
        _fail(str(exc))
    write_swebench_files(store, tasks, runs, model or policy)
    metrics = build_report(out)
    typer.echo(summary_table(metrics))
    typer.echo(f"report: {out}/report.md")
    _check_infra_errors(store, max_infra_errors, infra_retries)


def _check_infra_errors(store, allowed: int, retries: int) -> None:
    """Exit 3 when more episodes than `allowed` are still infra_error: their numbers are not
    results, and a script that reads only the exit status must not take them for a run."""
    from deepswe.eval.store import EpisodeStatus

    left = [r for r in store.records() if r.status is EpisodeStatus.INFRA_ERROR]
    if len(left) <= allowed:
        return
    first = left[0]
    typer.echo(
        f"deepswe-eval: {len(left)} episode(s) are still infra_error after {retries} retries "
        f"(allowed: {allowed}); e.g. {first.instance_id} run {first.run}: "
        f"{first.reason.strip().splitlines()[0] if first.reason.strip() else 'no reason recorded'}"
        "\nthe report counts them apart; run the same command again to retry them, or pass "
        "--max-infra-errors N to accept N",
        err=True,
    )
    raise typer.Exit(3)


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        _fail(f"--policy-arg {text!r}: expected key=value")
    return key, value


def _clean_leftover_sandboxes() -> None:
    # A run killed with SIGKILL cannot remove its containers; the next start does.
    try:
        from deepswe.env.sandbox.docker import gc

        gc()
    except Exception as exc:  # no engine: the episodes will say so as infra errors
        typer.echo(f"note: could not clean leftover sandboxes: {exc}", err=True)


@app.command()
def report(run_dir: Path = typer.Argument(..., help="a run folder written by `run`")) -> None:
    """Rebuild metrics.json, report.md, plots and SWE-bench files from the stored episodes."""
    from deepswe.eval.protocol import ProtocolCard
    from deepswe.eval.report import build_report, summary_table
    from deepswe.eval.store import RunStore
    from deepswe.eval.swebench_io import write_swebench_files

    store = RunStore(run_dir)
    if not store.config_path.exists():
        _fail(f"{run_dir}: no config.json; not a run folder")
    card = ProtocolCard.model_validate_json(store.config_path.read_text())
    try:
        tasks = load_dataset(card.dataset, card.instance_ids, None)
        write_swebench_files(store, tasks, card.runs, card.model or card.policy)
    except typer.Exit:
        typer.echo("note: dataset not loadable here; SWE-bench files not rewritten", err=True)
    metrics = build_report(run_dir)
    typer.echo(summary_table(metrics))


@app.command()
def grade(
    predictions: Path = typer.Option(..., help="predictions.jsonl (SWE-bench format)"),
    dataset: str = typer.Option(..., help=DATASET_HELP),
    out: Path = typer.Option(..., help="folder for report.json files and summary.json"),
    workers: int = typer.Option(1, min=1, help="gradings at once"),
    repo_mirror: Path = typer.Option(None, help="folder of git clones (SWE-bench)"),
    swebench_env: str = typer.Option("auto", help="auto | build | image"),
    max_infra_errors: int = typer.Option(
        0, min=0, help="gradings that may end infra_error before the command exits 3"
    ),
) -> None:
    """Grade patches made elsewhere, with the same grader as `run`."""
    from deepswe.eval.grade_predictions import grade_all
    from deepswe.eval.swebench_io import read_predictions

    try:
        preds = read_predictions(predictions)
    except (ValueError, json.JSONDecodeError) as exc:
        _fail(str(exc))
    tasks = load_dataset(dataset, sorted({p["instance_id"] for p in preds}), None)
    tasks, unsupported = prepare_tasks(tasks, swebench_env, repo_mirror)
    summary = grade_all(preds, tasks, unsupported, out, workers)
    json.dump(summary, sys.stdout, indent=1)
    typer.echo("")
    infra = summary["counts"].get("infra_error", 0)
    if infra > max_infra_errors:
        typer.echo(
            f"deepswe-eval: {infra} grading(s) ended infra_error (allowed: {max_infra_errors}); "
            f"their test logs are under {out}",
            err=True,
        )
        raise typer.Exit(3)


if __name__ == "__main__":
    app()
