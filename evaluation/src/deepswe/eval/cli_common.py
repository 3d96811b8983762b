"""What every deepswe-eval verb shares: the option declarations, the config read once, the
dataset loaded and prepared, the exit with one line, and the batch's preflight and clean-up."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import typer

DATASET_HELP = "swe-bench-verified | swe-mini[:train|:test] | r2e-gym-subset | a task file"
CONFIG = typer.Option(None, "--config", help="a profile YAML; its `eval:` section is read")
OVERRIDES = typer.Argument(
    None,
    help="eval.a.b=value overrides of the config, in order (eval.runs=16, eval.workers=4, "
    "eval.policy.name=gold, eval.sandbox_backend=kubernetes, eval.swebench_env=build)",
)
DATASET = typer.Option(None, help=DATASET_HELP)
LIMIT = typer.Option(None, help="first N tasks (by instance_id) only")
IDS = typer.Option(None, help="only these instance ids (repeat the option)")
REPO_MIRROR = typer.Option(None, help="folder of git clones <owner>__<name>")
HEALTH = typer.Option(
    None, help="a health manifest (deepswe-eval health): Pass@1 on its healthy tasks beside all"
)


# Flags that once restated config fields, and the override that sets each now: an old command
# gets one line naming it instead of click's "No such option".
RETIRED_FLAGS = {
    "--policy": "eval.policy.name",
    "--runs": "eval.runs",
    "--workers": "eval.workers",
    "--base-url": "eval.policy.base_url",
    "--model": "eval.policy.model",
    "--temperature": "eval.policy.temperature",
    "--max-tokens": "eval.policy.max_tokens",
    "--seed": "eval.policy.seed",
    "--policy-arg": "eval.policy.args.KEY",
    "--max-steps": "eval.episode.max_steps",
    "--max-context": "eval.episode.max_context_tokens",
    "--prompt-variant": "eval.episode.prompt_variant",
    "--infra-retries": "eval.infra_retries",
    "--max-infra-errors": "eval.max_infra_errors",
    "--memory": "eval.sandbox.memory",
    "--cpus": "eval.sandbox.cpus",
    "--sandbox": "eval.sandbox_backend",
    "--swebench-env": "eval.swebench_env",
    "--r2e-env": "eval.r2e_env",
}
CONFIG_VERBS = ("run", "grade", "validate", "audit", "health")


def refuse_retired(argv: list[str]) -> None:
    """Exit 2 naming the override when a verb that reads the config is given a retired flag."""
    verb = next((a for a in argv if not a.startswith("-")), None)
    if verb not in CONFIG_VERBS:
        return
    for arg in argv:
        flag = arg.split("=", 1)[0]
        if flag in RETIRED_FLAGS:
            fail(
                f"{verb} {flag}: a config value is set by an override now, e.g. "
                f"{RETIRED_FLAGS[flag]}=VALUE (after the verb; see `deepswe-eval {verb} --help`)"
            )


def keep_health(path: Path | None, run_dir: Path) -> None:
    """The manifest copied into the run folder (report.HEALTH_FILE), checked readable first."""
    if path is None:
        return
    from deepswe.eval.health import HealthError, load_manifest
    from deepswe.eval.report import HEALTH_FILE

    try:
        manifest = load_manifest(path)
    except HealthError as exc:
        fail(f"--health {exc}")
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / HEALTH_FILE).write_text(manifest.model_dump_json(indent=1), encoding="utf-8")


def fail(msg: str, code: int = 2) -> None:
    typer.echo(f"deepswe-eval: {msg}", err=True)
    raise typer.Exit(code)


def read_config(config: Path | None, overrides: list[str] | None, edits: dict[str, Any]):
    """The EvalConfig of --config + overrides + the flags that were given."""
    from deepswe.eval.config import ConfigError, load_eval_config

    given = {k: v for k, v in edits.items() if v is not None}
    try:
        return load_eval_config(config, overrides or [], given)
    except ConfigError as exc:
        fail(str(exc))


def task_set_flags(dataset: str | None, repo_mirror: Path | None) -> dict[str, Any]:
    """The eval-config fields every verb that reads the config takes as flags (where things are
    on this machine), named as the config names them; None where the flag was not given."""
    return {"dataset": dataset, "repo_mirror": str(repo_mirror) if repo_mirror else None}


def load_dataset(name: str, ids: list[str] | None, limit: int | None):
    """Tasks of `name`, in a stable order, narrowed by --ids then --limit."""
    from deepswe.data.datasets import load_tasks
    from deepswe.data.errors import DataError

    try:
        tasks = load_tasks(name)  # names include swe-mini, swe-mini:train, swe-mini:test
    except DataError as exc:
        fail(f"dataset {name}: {exc}")
    tasks = sorted(tasks, key=lambda t: t.instance_id)
    if ids:
        known = {t.instance_id for t in tasks}
        unknown = [i for i in ids if i not in known]
        if unknown:
            fail(f"--ids not in {name}: {', '.join(unknown)}")
        tasks = [t for t in tasks if t.instance_id in set(ids)]
    return tasks[:limit] if limit else tasks


def prepare_tasks(tasks, cfg):
    """SWE-bench and R2E-Gym tasks get their environment (an image, or a spec to build one
    from --repo-mirror); returns (tasks, {instance_id: unsupported reason}). A task that can
    be neither (no image here, no mirror) exits 2 with one line, before any run folder."""
    from deepswe.env.grading.owned import strict_refusal
    from deepswe.env.recipes.r2e_gym import environment as r2e_env
    from deepswe.env.recipes.swebench import environment as swebench_env
    from deepswe.eval.config import with_grading_rules

    mirror = Path(cfg.repo_mirror) if cfg.repo_mirror else None
    unsupported: dict[str, str] = {}
    preparers = [
        (swebench_env.needs_swebench_env, partial(swebench_env.prepare_all, mode=cfg.swebench_env)),
        (r2e_env.needs_r2e_env, partial(r2e_env.prepare_all, mode=cfg.r2e_env)),
    ]
    try:
        for needs, prepare_all in preparers:
            if not any(map(needs, tasks)):
                continue
            done: list = []
            for k in range(0, len(tasks), 25):  # a line per 25 tasks: specs, mirrors, images
                more_tasks, more = prepare_all(tasks[k : k + 25], mirror=mirror)
                done += more_tasks
                unsupported.update(more)
                typer.echo(
                    f"environments: {len(done)}/{len(tasks)} task(s) prepared, "
                    f"{len(unsupported)} unsupported",
                    err=True,
                )
            tasks = done
    except (swebench_env.SwebenchEnvError, r2e_env.R2EEnvError) as exc:
        fail(str(exc))
    for t in tasks:  # strict rules refuse a runner they cannot own: said before any episode
        why = strict_refusal(with_grading_rules(t, cfg).test_spec)
        if why and t.instance_id not in unsupported:
            unsupported[t.instance_id] = why
    return tasks, unsupported


def tasks_to_check(cfg, ids: list[str] | None, limit: int | None):
    """validate's, audit's and health's tasks and {id: why} for those that cannot be graded
    here (they are recorded unsupported_env; the others are graded): the engine answers, and
    sandboxes a killed run left are gone."""
    preflight_backend(cfg.sandbox_backend)
    tasks, unsupported = prepare_tasks(load_dataset(cfg.dataset, ids, limit), cfg)
    clean_leftover_sandboxes(cfg.sandbox_backend)
    return tasks, unsupported


def say_unsupported(unsupported: dict[str, str], dataset: str) -> None:
    """The tasks not graded here, each with its reason, and where to look next."""
    if not unsupported:
        return
    typer.echo(f"{len(unsupported)} task(s) not graded here (unsupported_env):", err=True)
    for i, why in unsupported.items():
        typer.echo(f"  {i}: {why[:300]}", err=True)
    typer.echo(f"  what builds here: deepswe-eval envs --dataset {dataset}", err=True)


def check_infra_errors(store, allowed: int, retries: int) -> None:
    """Exit 3 when more episodes than `allowed` are still infra_error: their numbers are not
    results, and a script that reads only the exit status must not take them for a run."""
    from deepswe.eval.store import EpisodeStatus

    left = [r for r in store.records() if r.status is EpisodeStatus.INFRA_ERROR]
    if len(left) <= allowed:
        return
    first = left[0]
    why = first.reason.strip().splitlines()[0] if first.reason.strip() else "no reason recorded"
    fail(
        f"{len(left)} episode(s) are still infra_error after {retries} retries (allowed: "
        f"{allowed}); e.g. {first.instance_id} run {first.run}: {why}\nthe report counts them "
        "apart; run the same command again to retry them, or accept N with "
        "eval.max_infra_errors=N",
        code=3,
    )


def preflight_backend(backend: str) -> None:
    """Fail fast, before any episode, when the sandbox backend cannot start sandboxes at all
    (Kubernetes: no in-cluster config and no KUBECONFIG)."""
    from deepswe.env.sandbox import SandboxError, preflight

    try:
        preflight(backend)
    except (SandboxError, ValueError) as exc:
        fail(f"sandbox backend {backend}: {exc}")


def clean_leftover_sandboxes(backend: str = "docker") -> None:
    # A run killed with SIGKILL cannot remove its sandboxes; the next start does.
    try:
        from deepswe.env.sandbox import clean_leftovers

        clean_leftovers(backend)
    except Exception as exc:  # no engine: the episodes will say so as infra errors
        typer.echo(f"note: could not clean leftover sandboxes: {exc}", err=True)
