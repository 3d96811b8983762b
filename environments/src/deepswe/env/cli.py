"""`deepswe-env`: the environments subproject's command line. One small sub-app per verb group."""

from __future__ import annotations

import time
from enum import Enum
from pathlib import Path

import typer

app = typer.Typer(help="DeepSWE sandboxes, images and agent environment.", no_args_is_help=True)
images_app = typer.Typer(help="Registry-free base images and offline wheels.", no_args_is_help=True)
app.add_typer(images_app, name="images")


class SuiteChoice(str, Enum):
    bookworm = "bookworm"
    bullseye = "bullseye"
    all = "all"


@images_app.command("base")
def images_base(
    suite: SuiteChoice = typer.Option(
        SuiteChoice.all, help="Debian suite to build; all = every one."
    ),
    force: bool = typer.Option(False, help="Rebuild even when the recipe's image exists."),
) -> None:
    """Build deepswe/base:<suite>-<recipe hash> from Debian packages (no-op when present)."""
    from docker.errors import DockerException

    from deepswe.env.images import SUITES, ImageBuildError, ensure_base_image

    suites = list(SUITES) if suite is SuiteChoice.all else [suite.value]
    for name in suites:
        started = time.monotonic()
        try:
            tag = ensure_base_image(name, force=force)
        except ImageBuildError as err:
            typer.secho(f"images base: {err}", fg="red", err=True)
            raise typer.Exit(1) from None
        except DockerException as err:
            msg = f"images base: cannot use the Docker engine ({err}); `make engine` starts one"
            typer.secho(msg, fg="red", err=True)
            raise typer.Exit(1) from None
        typer.echo(f"{tag}  ({time.monotonic() - started:.1f}s)")


@images_app.command("tag")
def images_tag(suite: SuiteChoice = typer.Argument(..., help="Debian suite.")) -> None:
    """Print the tag the current recipe gives a suite's base image (builds nothing)."""
    from deepswe.env.images import SUITES, base_image_tag

    for name in list(SUITES) if suite is SuiteChoice.all else [suite.value]:
        typer.echo(base_image_tag(name))


@images_app.command("wheels")
def images_wheels(
    requirements: list[str] = typer.Argument(..., help="pip requirements, e.g. 'pyyaml==6.0.2'."),
    dest: Path = typer.Option(..., help="Folder to put the wheels in."),
    python: str = typer.Option("3.11", help="Target Python: 3.11 (bookworm) or 3.9 (bullseye)."),
) -> None:
    """Download wheels for a base image's Python, for offline install inside a sandbox."""
    from deepswe.env.images import WheelDownloadError, download_wheels

    try:
        for wheel in download_wheels(requirements, dest, python):
            typer.echo(str(wheel))
    except WheelDownloadError as err:
        typer.secho(f"images wheels: {err}", fg="red", err=True)
        raise typer.Exit(1) from None


# --- the spine: build, episode, grade, gc -------------------------------------------------------


class PolicyChoice(str, Enum):
    gold = "gold"
    empty = "empty"
    openai = "openai"


_TASKS_HELP = "A task file (JSONL), or a dataset name (swe-mini, swe-mini:test, ...)."


def _load(tasks: str):
    from deepswe.data.datasets import load_tasks
    from deepswe.data.errors import DataError

    try:
        return load_tasks(tasks)
    except DataError as err:
        typer.secho(f"{tasks}: {err}", fg="red", err=True)
        raise typer.Exit(1) from None


def _task(tasks: str, instance_id: str):
    found = [t for t in _load(tasks) if t.instance_id == instance_id]
    if not found:
        typer.secho(f"{tasks}: no task with id {instance_id!r}", fg="red", err=True)
        raise typer.Exit(1)
    return found[0]


@app.command("build")
def build(
    tasks: str = typer.Option(..., help=_TASKS_HELP),
    instance_id: str | None = typer.Option(None, "--id", help="Only this task (default: all)."),
) -> None:
    """Build (or find) the image of each task that carries an environment spec."""
    from deepswe.env.images import ImageBuildError
    from deepswe.env.images.task import ensure_task_image

    chosen = [_task(tasks, instance_id)] if instance_id else _load(tasks)
    for i, task in enumerate(chosen, 1):
        try:
            tag = ensure_task_image(task, log=lambda m: typer.echo(m, err=True))
        except ImageBuildError as err:
            typer.secho(f"{task.instance_id}: {err}", fg="red", err=True)
            raise typer.Exit(1) from None
        typer.echo(f"[{i}/{len(chosen)}] {task.instance_id}  {tag}")


@app.command("episode")
def episode(
    tasks: str = typer.Option(..., help=_TASKS_HELP),
    instance_id: str = typer.Option(..., "--id", help="The task to run."),
    policy: PolicyChoice = typer.Option(
        ..., help="gold: the task's own fix; empty: submit at once; openai: a chat endpoint."
    ),
    base_url: str | None = typer.Option(
        None, help="openai: endpoint, e.g. http://localhost:8000/v1."
    ),
    model: str | None = typer.Option(None, help="openai: model name as the server knows it."),
    temperature: float = typer.Option(1.0, help="openai: sampling temperature (DeepSWE: 1.0)."),
    max_steps: int = typer.Option(100, help="Hard step limit (DeepSWE eval: 100)."),
    max_context: int = typer.Option(
        65_536, help="Context budget in tokens (DeepSWE eval: 65,536)."
    ),
    scaffold: str = typer.Option(
        "deepswe", help="r2e-gym: R2E-Gym's texts where they differ by design; deepswe: ours."
    ),
    out: Path | None = typer.Option(None, help="Write the whole trajectory here (JSON)."),
) -> None:
    """Run one episode and print {instance_id, outcome, reward, ended, steps, seconds}."""
    import json

    from deepswe.env.agent.loop import EpisodeLimits
    from deepswe.env.episode import run_task
    from deepswe.env.policies import PolicySpec, make_policy
    from deepswe.env.policies.endpoint import EndpointError, check_policy_endpoint
    from deepswe.env.tools.scaffold import SCAFFOLDS

    if scaffold not in SCAFFOLDS:
        typer.secho(f"--scaffold {scaffold!r}: one of {', '.join(SCAFFOLDS)}", fg="red", err=True)
        raise typer.Exit(2)
    task = _task(tasks, instance_id)
    spec = PolicySpec(name=policy.value, base_url=base_url, model=model, temperature=temperature)
    try:
        chosen = make_policy(spec, task)
        check_policy_endpoint(spec)  # a wrong URL, key or model name: said now, not as infra_error
    except (ValueError, EndpointError) as err:
        typer.secho(str(err), fg="red", err=True)
        raise typer.Exit(2) from None
    limits = EpisodeLimits(max_steps=max_steps, max_context_tokens=max_context, scaffold=scaffold)
    traj = run_task(task, chosen, limits=limits)
    if out is not None:
        tmp = out.with_suffix(out.suffix + ".tmp")
        tmp.write_text(traj.model_dump_json(indent=1))
        tmp.replace(out)
    typer.echo(json.dumps(traj.summary()))


@app.command("grade")
def grade(
    tasks: str = typer.Option(..., help=_TASKS_HELP),
    instance_id: str = typer.Option(..., "--id", help="The task the patch is for."),
    patch: Path = typer.Option(..., exists=True, dir_okay=False, help="The patch (unified diff)."),
    log: Path | None = typer.Option(None, help="Write the test log here."),
) -> None:
    """Grade a patch in a fresh sandbox; prints the outcome as JSON."""
    import json

    from deepswe.env.episode import grade_patch

    run = grade_patch(_task(tasks, instance_id), patch.read_text())
    result = run.grade
    if log is not None:
        log.write_text(run.text)
    typer.echo(
        json.dumps(
            {
                "instance_id": instance_id,
                "outcome": result.outcome.value,
                "reward": result.reward,
                "reason": result.reason,
            }
        )
    )


@app.command("gc")
def gc(
    everything: bool = typer.Option(
        False, "--all", help="Remove every deepswe sandbox, live ones too."
    ),
    backend: str = typer.Option(
        "docker", help="docker: this host's containers; kubernetes: this host's pods (KUBECONFIG)"
    ),
    selector: str = typer.Option(
        None,
        help="Only sandboxes with these labels, e.g. deepswe.run=abc (comma: and); kubernetes: "
        "a label selector instead of this host's pods",
    ),
    max_seconds: float = typer.Option(
        300.0, help="docker: start no removal after this many seconds (run again to continue)"
    ),
    parallel: int = typer.Option(8, min=1, help="docker: removals in flight at once"),
    call_timeout: float = typer.Option(30.0, help="docker: seconds each engine call may take"),
) -> None:
    """Remove sandboxes whose creating process is gone (containers, or pods with --backend
    kubernetes); --all removes live ones too. Docker: exit 1 naming what could not be removed
    (a second run continues with it), 2 when the engine cannot be reached."""
    if backend == "kubernetes":
        from deepswe.env.sandbox import SandboxStartError
        from deepswe.env.sandbox.kubernetes_cluster import gc as collect_pods

        try:
            removed = collect_pods(selector, orphans_only=not everything)
        except SandboxStartError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        typer.echo(
            f"removed {len(removed)} sandbox pod(s)" + (": " + " ".join(removed) if removed else "")
        )
        return
    if backend != "docker":
        typer.echo(f"error: --backend: docker or kubernetes, not {backend!r}", err=True)
        raise typer.Exit(2)
    _gc_docker(everything, _labels(selector), max_seconds, parallel, call_timeout)


def _labels(selector: str | None) -> dict[str, str]:
    """`a=b,c=d` as labels; a term without `=` is refused by name."""
    labels = {}
    for term in filter(None, (selector or "").split(",")):
        key, eq, value = term.partition("=")
        if not eq or not key.strip():
            typer.echo(f"error: --selector: {term!r} is not label=value", err=True)
            raise typer.Exit(2)
        labels[key.strip()] = value.strip()
    return labels


def _gc_docker(
    everything: bool, labels: dict[str, str], max_seconds: float, parallel: int, timeout: float
) -> None:
    from deepswe.env.sandbox import SandboxError
    from deepswe.env.sandbox.docker_gc import collect, state_file

    shown = {"at": 0.0}

    def progress(done: int, total: int) -> None:
        if done == total or time.monotonic() - shown["at"] >= 1.0:
            shown["at"] = time.monotonic()
            typer.echo(f"gc: {done}/{total} dealt with", err=True)

    try:
        report = collect(
            everything=everything,
            selector=labels,
            parallel=parallel,
            call_timeout_s=timeout,
            max_seconds=max_seconds,
            progress=progress,
            state=state_file(),
        )
    except SandboxError as exc:  # no engine at all
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    lines = report.lines()
    typer.echo(lines[0] + (": " + " ".join(report.removed) if report.removed else ""))
    for line in lines[1:]:
        typer.echo(line, err=True)
    if report.list_error and not report.removed and not report.failed and not report.left:
        raise typer.Exit(2)
    if not report.complete:
        raise typer.Exit(1)
