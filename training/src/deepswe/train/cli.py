"""`deepswe-train`: build the tiny model, check a training config, train.

    deepswe-train init-model --out runs/models/tiny-qwen3
    deepswe-train validate-config configs/tiny.yaml [a.b=value ...]
    deepswe-train train --config configs/tiny.yaml [a.b=value ...] [--out runs/ID] [--resume]
    deepswe-train sft --config configs/tiny.yaml --out runs/models/tiny-qwen3-sft [sft.epochs=5 ...]
    deepswe-train judge --config configs/judge-tiny.yaml --data JUDGE.jsonl --out runs/judge-tiny

Exit codes: 0 done; 1 the config (or an override) is invalid, or the run folder is in the way;
3 the config is valid but this machine or this build cannot run it (GPUs missing, an engine or
backend not built yet).
"""

from __future__ import annotations

from pathlib import Path

import typer
import yaml

from deepswe.train.preflight import data_problems, machine_problems

app = typer.Typer(
    help="deepswe-train: GRPO++ training of SWE agents (DeepSWE recipe).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

EXIT_INVALID, EXIT_CANNOT_RUN = 1, 3
_OVERRIDES_HELP = "Config overrides, each `section.key=value` (value parsed as YAML)."


def _fail(message: str, code: int) -> typer.Exit:
    typer.echo(message, err=True)
    return typer.Exit(code)


@app.command("init-model")
def init_model(
    out: Path = typer.Option(..., "--out", help="Folder to write the HF model + tokenizer to."),
    size: str = typer.Option(
        "tiny",
        "--size",
        help="Model shape: tiny (2 layers, hidden 64) or small (4 layers, hidden 128).",
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the random initialisation."),
) -> None:
    """Build a randomly initialised Qwen3-architecture model with Qwen's real tokenizer (no hub)."""
    from deepswe.train.models import SIZES, init_tiny_model

    if size not in SIZES:
        raise _fail(f"--size {size!r}: known sizes are {', '.join(SIZES)}", EXIT_INVALID)
    try:
        m = init_tiny_model(out, size=size, seed=seed)
    except FileExistsError as e:
        raise _fail(str(e), EXIT_INVALID) from None
    typer.echo(
        f"wrote {m.path}: Qwen3 {size}, {m.parameters:,} parameters, vocabulary {m.vocab_size:,}"
    )


@app.command("validate-config")
def validate_config(
    config: Path = typer.Argument(..., help="Training profile (YAML), e.g. configs/tiny.yaml."),
    overrides: list[str] | None = typer.Argument(None, help=_OVERRIDES_HELP),
) -> None:
    """Validate a profile + overrides, print the fully resolved config, then check that this
    machine can run it."""
    from deepswe.train.config import ConfigError, load_config, resolved

    try:
        cfg = load_config(config, overrides or [])
    except ConfigError as e:
        raise _fail(str(e), EXIT_INVALID) from None
    typer.echo(yaml.safe_dump(resolved(cfg), sort_keys=False), nl=False)
    problems = machine_problems(cfg)
    if problems:
        lines = "\n  ".join(problems)
        raise _fail(
            f"{config}: the config is valid, but it cannot run here:\n  {lines}", EXIT_CANNOT_RUN
        )
    typer.echo(f"{config}: valid, and runnable on this machine", err=True)


def _plan_lines(
    cfg, config: Path, overrides: list[str], assumptions=None
) -> tuple[list[str], str | None]:
    """The placement, the memory and time budget and the per-node launch commands of a GPU
    profile (lines to print, and the budget's problem or None); a CPU profile's placement only."""
    from deepswe.train.cluster import placement_plan
    from deepswe.train.cluster.budget import estimate, launch_commands

    placement = placement_plan(cfg)
    if placement.gpus == 0:
        return [*placement.describe().splitlines(), "CPU run: no GPU memory or time to plan"], None
    budget = estimate(cfg, assumptions=assumptions)
    launch = launch_commands(str(config), placement, overrides)
    return [*budget.lines(), "", "launch:", *(f"  {c}" for c in launch)], budget.problem()


@app.command("plan")
def plan(
    config: Path = typer.Option(
        ..., "--config", help="Training profile (YAML), e.g. configs/deepswe-32b.yaml."
    ),
    overrides: list[str] | None = typer.Argument(None, help=_OVERRIDES_HELP),
    gpu: str | None = typer.Option(
        None, "--gpu", help="GPU name for the printout (default H100 SXM 80GB)."
    ),
    gpu_memory_gb: float | None = typer.Option(
        None, "--gpu-memory-gb", help="Memory of one GPU, GB (default 80)."
    ),
    bf16_tflops: float | None = typer.Option(
        None, "--bf16-tflops", help="Dense BF16 TFLOPS of one GPU (default 989)."
    ),
    hbm_tb_s: float | None = typer.Option(
        None, "--hbm-tb-s", help="HBM bandwidth, TB/s (default 3.35)."
    ),
    train_mfu: float | None = typer.Option(
        None, "--train-mfu", help="MFU of the update (default 0.35)."
    ),
    mean_fill: float | None = typer.Option(
        None, "--mean-fill", help="Share of the token budget a mean trajectory fills (default 0.5)."
    ),
    tool_seconds: float | None = typer.Option(
        None, "--tool-seconds", help="Seconds of one tool call (default 5)."
    ),
) -> None:
    """Print, without GPUs, where a profile's parts go, the memory each GPU needs in each phase
    of a step (rollout, weight sync, update), the time a step takes and the launch command per
    node. Exits 3 when the plan does not fit the GPU, naming the phase and what to change."""
    from deepswe.train.cluster.budget import Assumptions, with_overrides
    from deepswe.train.config import ConfigError, load_config

    try:
        cfg = load_config(config, overrides or [])
    except ConfigError as e:
        raise _fail(str(e), EXIT_INVALID) from None
    a = with_overrides(
        Assumptions(),
        gpu=gpu,
        gpu_memory_gb=gpu_memory_gb,
        bf16_tflops=bf16_tflops,
        hbm_tb_s=hbm_tb_s,
        train_mfu=train_mfu,
        mean_fill=mean_fill,
        tool_seconds=tool_seconds,
    )
    try:
        lines, problem = _plan_lines(cfg, config, overrides or [], a)
    except ValueError as e:  # a field that cannot be placed, an unknown model shape
        raise _fail(str(e), EXIT_INVALID) from None
    typer.echo("\n".join(lines))
    if problem:
        raise _fail(f"{config}: the plan does not fit: {problem}", EXIT_CANNOT_RUN)


@app.command("train")
def train(
    config: Path = typer.Option(
        ..., "--config", help="Training profile (YAML), e.g. configs/tiny.yaml."
    ),
    overrides: list[str] | None = typer.Argument(None, help=_OVERRIDES_HELP),
    out: Path | None = typer.Option(None, "--out", help="Run folder (default: runs/<run.name>)."),
    resume: bool = typer.Option(
        False,
        "--resume",
        help="Continue from the run folder's latest "
        "checkpoint (the config must be the same but for run.steps).",
    ),
    include_unhealthy: bool = typer.Option(
        False,
        "--include-unhealthy",
        help="Keep the tasks the health manifest calls unhealthy (data.include_unhealthy=true).",
    ),
) -> None:
    """Run GRPO++ training: rollouts, advantages, updates, checkpoints, metrics under runs/ID."""
    from deepswe.train.config import ConfigError, load_config
    from deepswe.train.trainer import train_run

    if include_unhealthy:
        overrides = [*(overrides or []), "data.include_unhealthy=true"]
    try:
        cfg = load_config(config, overrides or [])
    except ConfigError as e:
        raise _fail(str(e), EXIT_INVALID) from None
    problems = machine_problems(cfg) + data_problems(cfg)
    if cfg.cluster.gpus:  # a GPU profile shows its plan first, whether it can start here or not
        try:
            lines, problem = _plan_lines(cfg, config, overrides or [])
        except ValueError as e:
            lines, problem = [], str(e)
        typer.echo("\n".join(lines), err=True)
        if problem:
            problems.insert(0, f"the plan does not fit: {problem}")
    if problems:
        raise _fail(f"{config}: cannot run here:\n  " + "\n  ".join(problems), EXIT_CANNOT_RUN)
    try:
        run_dir = train_run(cfg, out=out, resume=resume)  # the config parsed once, above
    except (ConfigError, FileNotFoundError) as e:  # run folder in the way, nothing to resume
        raise _fail(str(e), EXIT_INVALID) from None
    typer.echo(f"done: {run_dir} (metrics.jsonl, checkpoints/, trajectories/)")


@app.command("sft")
def sft(
    config: Path = typer.Option(
        ...,
        "--config",
        help="Training profile (YAML) whose sft "
        "section, model.path, data.path and episode limits the SFT stage "
        "uses.",
    ),
    overrides: list[str] | None = typer.Argument(
        None, help=_OVERRIDES_HELP + " SFT settings: sft.epochs=5, sft.lr=0.001, ..."
    ),
    out: Path = typer.Option(
        ...,
        "--out",
        help="Folder for the fine-tuned HF model and its resolved config.yaml (absent or empty).",
    ),
) -> None:
    """SFT warm-start (tiny profile): record scripted right and wrong fixes of the train tasks
    through the real tools in Docker, then fine-tune model.path on them (assistant tokens)."""
    from deepswe.train.config import ConfigError, load_config
    from deepswe.train.sft import run_sft

    try:
        cfg = load_config(config, overrides or [])
    except ConfigError as e:
        raise _fail(str(e), EXIT_INVALID) from None
    if out.exists() and any(out.iterdir()):
        raise _fail(f"--out {out}: exists and is not empty", EXIT_INVALID)
    episodes, losses = run_sft(cfg, out, log=lambda m: typer.echo(m, err=True))
    right = sum(e.reward for e in episodes if e.label == "right")
    typer.echo(
        f"wrote {out}: {len(episodes)} scripted episodes ({right:.0f} right fixes "
        f"resolved), loss {losses[0]:.3f} -> {losses[-1]:.3f}"
    )


@app.command("judge")
def judge(
    config: Path = typer.Option(
        ...,
        "--config",
        help="Judge fine-tuning config (YAML), e.g. "
        "configs/judge-tiny.yaml or configs/judge-14b.yaml.",
    ),
    data: Path = typer.Option(
        ...,
        "--data",
        help="Judge data (JSON lines from deepswe.verify.ef.judge_data: train-split tasks only).",
    ),
    out: Path = typer.Option(
        ...,
        "--out",
        help="Folder for adapter/, merged/, metrics.json and config.yaml (absent or empty).",
    ),
    overrides: list[str] | None = typer.Argument(
        None, help=_OVERRIDES_HELP + " e.g. lr=1e-4, lora.rank=16."
    ),
) -> None:
    """Fine-tune the execution-free judge: LoRA SFT on its YES/NO targets, held-out loss before
    and after."""
    from deepswe.train.config import ConfigError
    from deepswe.train.judge import load_judge_config, train_judge
    from deepswe.verify.ef.judge_data import read_rows

    try:
        cfg = load_judge_config(config, overrides or [])
        rows = read_rows(data)
    except (ConfigError, ValueError, OSError) as e:
        raise _fail(str(e), EXIT_INVALID) from None
    if out.exists() and any(out.iterdir()):
        raise _fail(f"--out {out}: exists and is not empty", EXIT_INVALID)
    m = train_judge(cfg, rows, out, log=lambda line: typer.echo(line, err=True))
    typer.echo(
        f"wrote {out}: held-out loss {m['heldout_loss_before']} -> "
        f"{m['heldout_loss_after']} ({m['train_rows']} rows, {m['steps']} steps)"
    )


if __name__ == "__main__":
    app()


@app.command("publish")
def publish(
    run: Path = typer.Argument(None, help="training run folder (runs/ID, with final/)"),
    eval_run: Path = typer.Option(None, "--eval", help="evaluation run folder (metrics.json)"),
    repo: str = typer.Option(None, help="model repo NAMESPACE/NAME"),
    dataset_repo: str = typer.Option(
        None, help="trajectory dataset repo (default: REPO-trajectories)"
    ),
    staging: Path = typer.Option(
        None, help="staging folder (default: RUN/publish or EVAL/publish)"
    ),
    push: bool = typer.Option(False, "--push", help="push to the Hub (HF_ENDPOINT, HF_TOKEN)"),
    private: bool = typer.Option(False, help="create new repos private"),
    create_pr: bool = typer.Option(False, help="open pull requests instead of committing"),
    force: bool = typer.Option(
        False,
        help="publish anyway: tiny weights under a full-reproduction name, or an "
        "evaluation failing its checks (incomplete, infra errors, other or unrecorded weights), "
        "the model card then saying which check was overridden",
    ),
) -> None:
    """Stage a run for the Hub and print the plan; push only with --push."""
    from deepswe.train.publish import PublishError, build_plan, push_plan, survey_plan
    from deepswe.train.publish.stage import StageError

    out = staging or ((run or eval_run) / "publish")
    try:
        plan = build_plan(run, eval_run, repo, dataset_repo, out, force=force)
    except StageError as err:
        raise _fail(f"publish: {err}", EXIT_INVALID) from None
    if not push:
        typer.echo(plan.render())
        typer.echo("not pushed (add --push, or PUSH=1 with make)")
        return
    try:
        survey_plan(plan, private=private)  # the plan then names what the push deletes
        typer.echo(plan.render())
        for line in push_plan(plan, private=private, create_pr=create_pr):
            typer.echo(f"pushed {line}")
    except PublishError as err:
        raise _fail(f"publish: {err}", EXIT_CANNOT_RUN) from None
