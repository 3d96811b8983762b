"""The deepswe-eval command line: `run`, `validate`, `audit`, `report`, `view`, `grade`, `envs`.

Every verb that runs episodes reads one `EvalConfig`: a profile's `eval:` section (`--config`),
edited by `eval.a.b=value` overrides and by the flags below, in that order.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import typer

app = typer.Typer(
    help="Batch evaluation, SWE-bench-compatible grading, metrics and reports.",
    no_args_is_help=True,
)

DATASET_HELP = "swe-bench-verified | swe-mini[:train|:test] | r2e-gym-subset | a task file"
_CONFIG = typer.Option(None, "--config", help="a profile YAML; its `eval:` section is read")
_OVERRIDES = typer.Argument(None, help="eval.a.b=value overrides of the config, in order")
_SANDBOX = typer.Option(
    None, "--sandbox", help="sandbox backend: docker | kubernetes | local | module:Class"
)


_HEALTH = typer.Option(
    None, help="a health manifest (deepswe-eval health): Pass@1 on its healthy tasks beside all"
)


def _keep_health(path: Path | None, run_dir: Path) -> None:
    """The manifest copied into the run folder (report.HEALTH_FILE), checked readable first."""
    if path is None:
        return
    from deepswe.eval.health import HealthError, load_manifest
    from deepswe.eval.report import HEALTH_FILE

    try:
        manifest = load_manifest(path)
    except HealthError as exc:
        _fail(f"--health {exc}")
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / HEALTH_FILE).write_text(manifest.model_dump_json(indent=1), encoding="utf-8")


def _fail(msg: str, code: int = 2) -> None:
    typer.echo(f"deepswe-eval: {msg}", err=True)
    raise typer.Exit(code)


def _config(config: Path | None, overrides: list[str] | None, edits: dict[str, Any]):
    """The EvalConfig of --config + overrides + the flags that were given."""
    from deepswe.eval.config import ConfigError, load_eval_config

    given = {k: v for k, v in edits.items() if v is not None}
    try:
        return load_eval_config(config, overrides or [], given)
    except ConfigError as exc:
        _fail(str(exc))


def load_dataset(name: str, ids: list[str] | None, limit: int | None):
    """Tasks of `name`, in a stable order, narrowed by --ids then --limit."""
    from deepswe.data.datasets import load_tasks
    from deepswe.data.errors import DataError

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


def prepare_tasks(tasks, cfg):
    """SWE-bench and R2E-Gym tasks get their environment (an image, or a spec to build one
    from --repo-mirror); returns (tasks, {instance_id: unsupported reason}). A task that can
    be neither (no image here, no mirror) exits 2 with one line, before any run folder."""
    from deepswe.env.grading.owned import strict_refusal
    from deepswe.eval import r2e_env, swebench_env
    from deepswe.eval.config import with_grading_rules

    mirror = Path(cfg.repo_mirror) if cfg.repo_mirror else None
    unsupported: dict[str, str] = {}
    steps = [
        (swebench_env.needs_swebench_env, lambda c: swebench_env.prepare_all(
            c, mode=cfg.swebench_env, mirror=mirror)),
        (r2e_env.needs_r2e_env, lambda c: r2e_env.prepare_all(c, mode=cfg.r2e_env, mirror=mirror)),
    ]  # fmt: skip
    try:
        for needs, prepare_all in steps:
            if not any(map(needs, tasks)):
                continue
            done: list = []
            for k in range(0, len(tasks), 25):  # a line per 25 tasks: specs, mirrors, images
                more_tasks, more = prepare_all(tasks[k : k + 25])
                done += more_tasks
                unsupported.update(more)
                typer.echo(f"environments: {len(done)}/{len(tasks)} task(s) prepared, "
                           f"{len(unsupported)} unsupported", err=True)  # fmt: skip
            tasks = done
    except (swebench_env.SwebenchEnvError, r2e_env.R2EEnvError) as exc:
        _fail(str(exc))
    for t in tasks:  # strict rules refuse a runner they cannot own: said before any episode
        why = strict_refusal(with_grading_rules(t, cfg).test_spec)
        if why and t.instance_id not in unsupported:
            unsupported[t.instance_id] = why
    return tasks, unsupported


def _check_endpoint(cfg):
    """What the openai policy's endpoint serves, asked before anything is written; a wrong URL,
    key or model name exits 2 with one line. None for policies without an endpoint."""
    from deepswe.env.policies.endpoint import EndpointError, check_policy_endpoint
    from deepswe.eval.card import served_weights

    try:
        served = check_policy_endpoint(cfg.policy)
    except (EndpointError, ValueError) as exc:
        _fail(str(exc))
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
        _fail(f"{out}: {exc}")
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
    config: Path = _CONFIG,
    overrides: list[str] = _OVERRIDES,
    dataset: str = typer.Option(None, help=DATASET_HELP),
    policy: str = typer.Option(None, help="gold | empty | openai | replay | module:Class"),
    runs: int = typer.Option(None, min=1, help="independent runs per task (DeepSWE: 16)"),
    workers: int = typer.Option(None, min=1, help="episodes in flight at once"),
    base_url: str = typer.Option(None, help="OpenAI-compatible endpoint (openai policy)"),
    model: str = typer.Option(None, help="model name at the endpoint (openai policy)"),
    temperature: float = typer.Option(None, min=0.0, help="sampling temperature (DeepSWE: 1.0)"),
    max_tokens: int = typer.Option(None, help="max tokens per reply (openai policy)"),
    seed: int = typer.Option(
        None, help="seed the openai policy's sampling per (task, run, reply): paired draws"
    ),
    replay_dir: Path = typer.Option(None, help="recorded trajectories (replay policy)"),
    policy_arg: list[str] = typer.Option(
        None, help="key=value passed to a plugged-in policy's constructor (repeat the option)"
    ),
    max_steps: int = typer.Option(None, min=1, help="steps per episode (DeepSWE eval: 100)"),
    max_context: int = typer.Option(None, min=1, help="context tokens (DeepSWE eval: 65536)"),
    prompt_variant: str = typer.Option(None, help="eval (R2E-Gym's prompts) | train (rLLM's)"),
    infra_retries: int = typer.Option(None, min=0, help="retries of an infra error"),
    max_infra_errors: int = typer.Option(
        None, min=0, help="infra_error episodes accepted after retries before the exit is 3"
    ),
    repo_mirror: Path = typer.Option(None, help="folder of git clones <owner>__<name>"),
    swebench_env: str = typer.Option(None, help="SWE-bench environments: auto | build | image"),
    r2e_env: str = typer.Option(None, help="R2E-Gym environments: auto | build | image"),
    memory: str = typer.Option(None, help="sandbox memory limit, e.g. 4g"),
    cpus: float = typer.Option(None, help="sandbox CPU limit"),
    sandbox: str = _SANDBOX,
    limit: int = typer.Option(None, help="first N tasks (by instance_id) only"),
    ids: list[str] = typer.Option(None, help="only these instance ids (repeat the option)"),
    dry_run: bool = typer.Option(False, help="print the resolved config and exit"),
    health: Path = _HEALTH,
) -> None:
    """Run (task x run) episodes; resumable: the same --out continues where it stopped."""
    from deepswe.eval.report import build_report, summary_table
    from deepswe.eval.runner import run_all
    from deepswe.eval.swebench_io import write_swebench_files

    args = dict(_key_value(a) for a in policy_arg) if policy_arg else None
    cfg = _config(config, overrides, {
        "dataset": dataset, "policy.name": policy, "policy.args": args, "runs": runs,
        "workers": workers, "policy.base_url": base_url, "policy.model": model,
        "policy.temperature": temperature, "policy.max_tokens": max_tokens, "policy.seed": seed,
        "policy.replay_dir": str(replay_dir) if replay_dir else None,
        "episode.max_steps": max_steps, "episode.max_context_tokens": max_context,
        "episode.prompt_variant": prompt_variant, "infra_retries": infra_retries,
        "max_infra_errors": max_infra_errors, "repo_mirror": str(repo_mirror) if repo_mirror else None,
        "swebench_env": swebench_env, "r2e_env": r2e_env, "sandbox.memory": memory,
        "sandbox.cpus": cpus,
        "sandbox_backend": sandbox,
    })  # fmt: skip
    if dry_run:
        typer.echo(cfg.model_dump_json(indent=1))
        return
    _preflight(cfg.sandbox_backend)
    served = _check_endpoint(cfg)
    tasks = load_dataset(cfg.dataset, ids, limit)
    if not tasks:
        _fail(f"dataset {cfg.dataset}: no tasks selected")
    tasks, unsupported = prepare_tasks(tasks, cfg)
    store = _open(out, cfg, tasks, served)
    _keep_health(health, store.root)
    _clean_leftover_sandboxes(cfg.sandbox_backend)
    try:
        run_all(tasks, cfg, store, unsupported=unsupported)
    except ValueError as exc:  # bad input found while running (e.g. a task without gold patch)
        _fail(str(exc))
    write_swebench_files(store, tasks, cfg.runs, cfg.policy.model or cfg.policy.name)
    metrics = build_report(out)
    typer.echo(summary_table(metrics))
    typer.echo(f"report: {out}/report.md")
    _say_unsupported(unsupported, cfg.dataset)
    _check_infra_errors(store, cfg.max_infra_errors, cfg.infra_retries)


def _tasks_to_check(cfg, ids: list[str] | None, limit: int | None):
    """validate's, audit's and health's tasks and {id: why} for those that cannot be graded
    here (they are recorded unsupported_env; the others are graded): the engine answers, and
    sandboxes a killed run left are gone."""
    _preflight(cfg.sandbox_backend)
    tasks, unsupported = prepare_tasks(load_dataset(cfg.dataset, ids, limit), cfg)
    _clean_leftover_sandboxes(cfg.sandbox_backend)
    return tasks, unsupported


def _say_unsupported(unsupported: dict[str, str], dataset: str) -> None:
    """The tasks not graded here, each with its reason, and where to look next."""
    if not unsupported:
        return
    typer.echo(f"{len(unsupported)} task(s) not graded here (unsupported_env):", err=True)
    for i, why in unsupported.items():
        typer.echo(f"  {i}: {why[:300]}", err=True)
    typer.echo(f"  what builds here: deepswe-eval envs --dataset {dataset}", err=True)


@app.command()
def validate(
    out: Path = typer.Option(
        ..., help="folder for the gold/, empty/ and tools/ run folders; resumable"
    ),
    config: Path = _CONFIG,
    overrides: list[str] = _OVERRIDES,
    dataset: str = typer.Option(None, help=DATASET_HELP),
    rounds: int = typer.Option(None, min=1, help="runs of each baseline per task"),
    workers: int = typer.Option(None, min=1, help="episodes in flight at once"),
    limit: int = typer.Option(None, help="first N tasks (by instance_id) only"),
    ids: list[str] = typer.Option(None, help="only these instance ids (repeat the option)"),
    sandbox: str = _SANDBOX,
    repo_mirror: Path = typer.Option(None, help="folder of git clones <owner>__<name>"),
    swebench_env: str = typer.Option(None, help="SWE-bench environments: auto | build | image"),
    r2e_env: str = typer.Option(None, help="R2E-Gym environments: auto | build | image"),
    tools: bool = typer.Option(
        True, help="also replay the gold patch through the agent's tools (reported apart)"
    ),
) -> None:
    """Gold resolves every task and the empty patch none: the check a task set must pass."""
    from deepswe.eval.card import ProtocolMismatch
    from deepswe.eval.validate import validate_tasks

    cfg = _config(config, overrides, {
        "dataset": dataset, "baseline_runs": rounds, "workers": workers,
        "sandbox_backend": sandbox, "repo_mirror": str(repo_mirror) if repo_mirror else None,
        "swebench_env": swebench_env, "r2e_env": r2e_env,
    })  # fmt: skip
    tasks, unsupported = _tasks_to_check(cfg, ids, limit)
    try:
        result = validate_tasks(tasks, out, cfg, tools=tools, unsupported=unsupported)
    except (ProtocolMismatch, ValueError) as exc:
        _fail(str(exc))
    typer.echo(json.dumps(result.summary(), indent=1))
    _say_unsupported(result.unsupported, cfg.dataset)
    if not result.ok:
        _fail(f"{len(result.failed)} failed, {len(result.undecided)} undecided, "
              f"{len(result.unsupported)} not graded here", code=1)  # fmt: skip


@app.command()
def audit(
    out: Path = typer.Option(
        None, help="folder for the gold/, empty/ and attack-<name>/ run folders; resumable"
    ),
    config: Path = _CONFIG,
    overrides: list[str] = _OVERRIDES,
    dataset: str = typer.Option(None, help=DATASET_HELP),
    workers: int = typer.Option(None, min=1, help="episodes in flight at once"),
    limit: int = typer.Option(None, help="first N tasks (by instance_id) only"),
    ids: list[str] = typer.Option(None, help="only these instance ids (repeat the option)"),
    sandbox: str = _SANDBOX,
    repo_mirror: Path = typer.Option(None, help="folder of git clones <owner>__<name>"),
    swebench_env: str = typer.Option(None, help="SWE-bench environments: auto | build | image"),
    r2e_env: str = typer.Option(None, help="R2E-Gym environments: auto | build | image"),
    attacks: list[str] = typer.Option(
        None, "--attacks", help="only this attack (repeat the option); default: every attack"
    ),
    list_attacks: bool = typer.Option(False, "--list", help="print the attacks and exit"),
) -> None:
    """Gold and empty baselines plus every attack patch over a task set: exit 0 only when no
    attack resolved a task and every task is healthy. Writes OUT/audit.json and OUT/audit.md."""
    from deepswe.eval.attacks import ATTACKS

    if list_attacks:
        for a in ATTACKS.values():
            typer.echo(f"{a.name}\t{a.family}\t{a.why}")
        return
    if out is None:
        _fail("--out is required (or --list)")
    unknown = [a for a in attacks or [] if a not in ATTACKS]
    if unknown:
        _fail(f"--attacks: unknown {', '.join(unknown)}; see --list")
    cfg = _config(config, overrides, {
        "dataset": dataset, "workers": workers, "sandbox_backend": sandbox,
        "repo_mirror": str(repo_mirror) if repo_mirror else None,
        "swebench_env": swebench_env, "r2e_env": r2e_env,
    })  # fmt: skip
    result = _manifest(cfg, out, ids, limit, attacks or None)
    s = result.summary
    problems = [f"HOLE: {n} resolved {', '.join(i)}" for n, i in s.holes.items()]
    problems += [f"unhealthy: {i}: {'; '.join(result.tasks[i].reasons)}" for i in s.unhealthy]
    problems += [f"infra_error in {f}: {', '.join(i)} (run again to retry)"
                 for f, i in s.undecided.items()]  # fmt: skip
    if problems:
        _fail(f"audit of {cfg.dataset} failed:\n  " + "\n  ".join(problems), code=1)


def _manifest(cfg, out: Path, ids, limit, attacks: list[str] | None):
    """Run an audit (attacks None: all of them; []: none, a health check) and print its table."""
    from deepswe.eval.audit import audit_tasks
    from deepswe.eval.card import ProtocolMismatch

    tasks, unsupported = _tasks_to_check(cfg, ids, limit)
    if not tasks:
        _fail(f"dataset {cfg.dataset}: no tasks selected")
    try:
        result = audit_tasks(tasks, out, cfg, attacks=attacks, unsupported=unsupported)
    except (ProtocolMismatch, ValueError) as exc:
        _fail(str(exc))
    typer.echo((out / f"{result.kind}.md").read_text())
    _say_unsupported(unsupported, cfg.dataset)
    return result


@app.command()
def health(
    out: Path = typer.Option(..., help="folder for the gold/ and empty/ run folders; resumable"),
    config: Path = _CONFIG,
    overrides: list[str] = _OVERRIDES,
    dataset: str = typer.Option(None, help=DATASET_HELP),
    rounds: int = typer.Option(None, min=1, help="runs of gold and empty per task (default 3)"),
    workers: int = typer.Option(None, min=1, help="episodes in flight at once"),
    limit: int = typer.Option(None, help="first N tasks (by instance_id) only"),
    ids: list[str] = typer.Option(None, help="only these instance ids (repeat the option)"),
    sandbox: str = _SANDBOX,
    repo_mirror: Path = typer.Option(None, help="folder of git clones <owner>__<name>"),
    swebench_env: str = typer.Option(None, help="SWE-bench environments: auto | build | image"),
    r2e_env: str = typer.Option(None, help="R2E-Gym environments: auto | build | image"),
) -> None:
    """Each task's health: gold run N times (flaky when the runs disagree), the empty patch, a
    need for the network read from gold's log. Writes OUT/health.json, which training reads to
    leave unhealthy tasks out (data.health), and OUT/health.md. Exit 0 once every run is
    decided (3 while infra errors remain: run again)."""
    cfg = _config(config, overrides, {
        "dataset": dataset, "workers": workers, "sandbox_backend": sandbox,
        "repo_mirror": str(repo_mirror) if repo_mirror else None,
        "swebench_env": swebench_env, "r2e_env": r2e_env, "baseline_runs": rounds or 3,
    })  # fmt: skip
    result = _manifest(cfg, out, ids, limit, [])
    s = result.summary
    typer.echo(f"health: {s.healthy} of {s.tasks} task(s) healthy; manifest {out}/health.json")
    if s.undecided:
        left = [f"{f}: {', '.join(i)}" for f, i in s.undecided.items()]
        _fail("still infra_error (run the same command again):\n  " + "\n  ".join(left), 3)


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        _fail(f"--policy-arg {text!r}: expected key=value")
    return key, value


def _check_infra_errors(store, allowed: int, retries: int) -> None:
    """Exit 3 when more episodes than `allowed` are still infra_error: their numbers are not
    results, and a script that reads only the exit status must not take them for a run."""
    from deepswe.eval.store import EpisodeStatus

    left = [r for r in store.records() if r.status is EpisodeStatus.INFRA_ERROR]
    if len(left) <= allowed:
        return
    first = left[0]
    why = first.reason.strip().splitlines()[0] if first.reason.strip() else "no reason recorded"
    _fail(
        f"{len(left)} episode(s) are still infra_error after {retries} retries (allowed: "
        f"{allowed}); e.g. {first.instance_id} run {first.run}: {why}\nthe report counts them "
        "apart; run the same command again to retry them, or accept N with "
        "--max-infra-errors N",
        code=3,
    )


def _preflight(backend: str) -> None:
    """Fail fast, before any episode, when the sandbox backend cannot start sandboxes at all
    (Kubernetes: no in-cluster config and no KUBECONFIG)."""
    from deepswe.env.sandbox import SandboxError, preflight

    try:
        preflight(backend)
    except (SandboxError, ValueError) as exc:
        _fail(f"sandbox backend {backend}: {exc}")


def _clean_leftover_sandboxes(backend: str = "docker") -> None:
    # A run killed with SIGKILL cannot remove its sandboxes; the next start does.
    try:
        from deepswe.env.sandbox import clean_leftovers

        clean_leftovers(backend)
    except Exception as exc:  # no engine: the episodes will say so as infra errors
        typer.echo(f"note: could not clean leftover sandboxes: {exc}", err=True)


@app.command()
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
        from deepswe.eval import r2e_coverage

        repos = r2e_coverage.coverage(tasks, repo_mirror)
        typer.echo(r2e_coverage.markdown(repos, repo_mirror is not None))
        typer.echo(json.dumps(r2e_coverage.summary(repos), indent=1))
        return
    from deepswe.eval.swebench_coverage import markdown, spec_rows, summary

    rows = spec_rows(tasks, repo_mirror, all_specs)
    if not rows:
        _fail(f"dataset {dataset}: no SWE-bench or R2E-Gym repositories in it")
    typer.echo(markdown(rows))
    typer.echo(json.dumps(summary(rows), indent=1))


@app.command()
def images(
    dataset: str = typer.Option(..., help=DATASET_HELP),
    repo_mirror: Path = typer.Option(None, help="folder of git clones <owner>__<name>"),
    r2e_env: str = typer.Option("auto", help="R2E-Gym environments: auto | build | image"),
) -> None:
    """Which images a run over these R2E-Gym rows will use: R2E-Gym's own when this engine has
    them, else built from source from --repo-mirror; exit 2 naming what is missing."""
    from deepswe.eval.r2e_plan import plan_images

    if r2e_env not in ("auto", "build", "image"):
        _fail(f"--r2e-env {r2e_env!r}: want auto, build or image")
    tasks = load_dataset(dataset, None, None)
    plan = plan_images(tasks, mode=r2e_env, mirror=repo_mirror)
    for line in plan.lines(repo_mirror):
        typer.echo(line)
    if plan.missing:
        _fail(f"{len(plan.missing)} row(s) have no image and cannot be built: "
              f"{next(iter(plan.missing.values()))}")  # fmt: skip
    if not plan.usable:
        _fail(f"dataset {dataset}: no row can run here")


@app.command()
def report(
    run_dir: Path = typer.Argument(..., help="a run folder written by `run`"),
    health: Path = _HEALTH,
) -> None:
    """Rebuild metrics.json, report.md, plots and SWE-bench files from the stored episodes."""
    from deepswe.eval.card import ProtocolMismatch, read_card
    from deepswe.eval.report import build_report, summary_table
    from deepswe.eval.store import RunStore
    from deepswe.eval.swebench_io import write_swebench_files

    store = RunStore(run_dir)
    if not store.config_path.exists():
        _fail(f"{run_dir}: no config.json; not a run folder")
    try:
        card = read_card(store)
    except ProtocolMismatch as exc:
        _fail(str(exc))
    try:
        tasks = load_dataset(card.dataset, card.instance_ids, None)
        write_swebench_files(
            store, tasks, card.runs, card.eval.policy.model or card.eval.policy.name
        )
    except typer.Exit:
        typer.echo("note: dataset not loadable here; SWE-bench files not rewritten", err=True)
    _keep_health(health, store.root)
    metrics = build_report(run_dir)
    typer.echo(summary_table(metrics))


@app.command()
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
        _fail(f"{run_dir}: no episodes/ and no config.json; not a run folder")
    page = write_view(run_dir, out)
    typer.echo(f"viewer: {page}")
    if serve is not None:
        serve_page(page, serve)


@app.command()
def grade(
    predictions: Path = typer.Option(..., help="predictions.jsonl (SWE-bench format)"),
    out: Path = typer.Option(..., help="folder for report.json files and summary.json"),
    config: Path = _CONFIG,
    overrides: list[str] = _OVERRIDES,
    dataset: str = typer.Option(None, help=DATASET_HELP),
    workers: int = typer.Option(None, min=1, help="gradings at once"),
    repo_mirror: Path = typer.Option(None, help="folder of git clones (SWE-bench)"),
    swebench_env: str = typer.Option(None, help="auto | build | image"),
    r2e_env: str = typer.Option(None, help="R2E-Gym environments: auto | build | image"),
    max_infra_errors: int = typer.Option(
        None, min=0, help="gradings that may end infra_error before the command exits 3"
    ),
) -> None:
    """Grade patches made elsewhere, with the same grader and sandbox limits as `run`."""
    from deepswe.eval.grade_predictions import grade_all
    from deepswe.eval.swebench_io import read_predictions

    cfg = _config(config, overrides, {
        "dataset": dataset, "workers": workers, "max_infra_errors": max_infra_errors,
        "repo_mirror": str(repo_mirror) if repo_mirror else None, "swebench_env": swebench_env,
        "r2e_env": r2e_env,
    })  # fmt: skip
    try:
        preds = read_predictions(predictions)
    except (ValueError, json.JSONDecodeError) as exc:
        _fail(str(exc))
    tasks = load_dataset(cfg.dataset, sorted({p["instance_id"] for p in preds}), None)
    tasks, unsupported = prepare_tasks(tasks, cfg)
    summary = grade_all(preds, tasks, unsupported, out, cfg)
    json.dump(summary, sys.stdout, indent=1)
    typer.echo("")
    infra = summary["counts"].get("infra_error", 0)
    if infra > cfg.max_infra_errors:
        _fail(
            f"{infra} grading(s) ended infra_error (allowed: {cfg.max_infra_errors}); "
            f"their test logs are under {out}",
            code=3,
        )


if __name__ == "__main__":
    app()
