"""The deepswe-verify command line: score, select, report.

    deepswe-verify score --run runs/<eval-id> --verifier ef|regression|reproduction ...

    deepswe-verify select --recorded traj/ --out runs/tts      recorded R2E-Gym/DeepSWE rollouts
    deepswe-verify select --run runs/<eval-id> --out runs/tts  an eval run and its verdicts
    deepswe-verify report runs/tts                             print the report
    deepswe-verify render --recorded traj.json --format r2e-gym --tokenizer DIR   a judge's prompt

Bad input exits 2 with a message naming the file and field; nothing already written is lost.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from pydantic import ValidationError

from deepswe.verify.recorded import RecordedError, load_recorded
from deepswe.verify.report import build_report
from deepswe.verify.run_pools import load_run_pools

if TYPE_CHECKING:
    from deepswe.env.policies import PolicySpec
    from deepswe.env.policies.endpoint import EndpointConfig

app = typer.Typer(
    help="Verifiers and test-time selection: Best@k of EF, EB and hybrid selection.",
    no_args_is_help=True,
)


def _fail(message: str) -> typer.Exit:
    typer.echo(f"deepswe-verify: {message}", err=True)
    return typer.Exit(2)


@app.command()
def score(
    run: Annotated[Path, typer.Option(help="The eval run folder whose graded episodes to score.")],
    verifier: Annotated[str, typer.Option(help="ef | regression | reproduction")],
    judge_path: Annotated[
        Path | None, typer.Option(help="ef: an in-process judge (HF folder, merged LoRA)")
    ] = None,
    judge_url: Annotated[
        str | None, typer.Option(help="ef: an OpenAI-compatible endpoint serving the judge")
    ] = None,
    judge_model: Annotated[str | None, typer.Option(help="ef: the judge's served name")] = None,
    judge_tokenizer: Annotated[
        str | None, typer.Option(help="ef: the judge's tokenizer (folder or model id)")
    ] = None,
    writer: Annotated[
        str, typer.Option(help="reproduction: scripted-standin (no model: a stand-in) | agent")
    ] = "scripted-standin",
    writer_url: Annotated[str | None, typer.Option(help="agent writer: endpoint")] = None,
    writer_model: Annotated[str | None, typer.Option(help="agent writer: model name")] = None,
    judge_format: Annotated[
        str, typer.Option(help="ef: ours | r2e-gym (R2E-Gym's input: the published verifier)")
    ] = "ours",
    workers: Annotated[int, typer.Option(min=1, help="candidates scored at once")] = 2,
) -> None:
    """Score an eval run's graded candidates with one verifier (resumable)."""
    from deepswe.verify.scoring import ScoreError, score_run

    judge = None
    if verifier == "ef":
        judge = _judge(judge_path, judge_url, judge_model, judge_tokenizer)
    test_writer = _writer(writer, writer_url, writer_model) if verifier == "reproduction" else None
    try:
        counts = score_run(
            run, verifier, judge=judge, writer=test_writer, workers=workers, ef_format=judge_format
        )
    except ScoreError as exc:
        raise _fail(str(exc)) from None
    typer.echo(f"{verifier}: {counts} (in {run}/verdicts/{verifier}/)")


def _judge(path, url, model, tokenizer):
    if path and url:
        raise _fail("--judge-path and --judge-url: give one")
    from deepswe.verify.ef.score import make_judge

    if path:
        return make_judge(path=path)
    if not (url and model and tokenizer):
        raise _fail(
            "--verifier ef needs --judge-path, or --judge-url with --judge-model and "
            "--judge-tokenizer"
        )
    from deepswe.verify.ef.endpoint import EndpointJudgeConfig

    config = EndpointJudgeConfig(base_url=url, model=model, tokenizer=tokenizer)
    _check_endpoint(config)
    return make_judge(endpoint=config)


def _writer(kind, url, model):
    from deepswe.verify.eb import make_writer

    spec = None
    if kind == "agent":
        if not (url and model):
            raise _fail("--writer agent needs --writer-url and --writer-model")
        from deepswe.env.policies import PolicySpec

        spec = PolicySpec(name="openai", base_url=url, model=model)
        _check_endpoint(spec)
    try:
        return make_writer(kind, spec)
    except ValueError as exc:
        raise _fail(f"--writer: {exc}") from None


def _check_endpoint(endpoint: EndpointConfig | PolicySpec) -> None:
    """Ask an endpoint (a judge's config, or a policy's spec) for its models before the first
    candidate: a wrong URL, key or model name exits 2 with one line, not a store of failures."""
    from deepswe.env.policies import PolicySpec
    from deepswe.env.policies.endpoint import EndpointError, check_endpoint, check_policy_endpoint

    try:
        if isinstance(endpoint, PolicySpec):
            check_policy_endpoint(endpoint)
        else:
            check_endpoint(endpoint)
    except EndpointError as exc:
        raise _fail(str(exc)) from None


@app.command("select")
def select_cmd(
    out: Annotated[Path, typer.Option(help="Folder for report.json, report.md, predictions/.")],
    recorded: Annotated[
        Path | None,
        typer.Option(help="R2E-Gym/DeepSWE trajectory records: a .json/.jsonl file or a folder."),
    ] = None,
    run: Annotated[
        Path | None, typer.Option(help="An eval run folder whose verdicts/ hold the scores.")
    ] = None,
    counting: Annotated[
        str,
        typer.Option(
            help="Recorded reproduction scores: per-test (each test counts at most 1) or "
            "raw-sum (R2E-Gym's sum of 'resolved' substring counts)."
        ),
    ] = "per-test",
    samples: Annotated[
        int | None,
        typer.Option(help="Estimate Best@k from this many random subsets instead of exactly."),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the sampled estimate.")] = 0,
    model_name: Annotated[
        str, typer.Option(help="model_name_or_path prefix in predictions/*.jsonl.")
    ] = "deepswe-verify",
) -> None:
    """Select among each task's candidates by every method and write the Best@k report."""
    if (recorded is None) == (run is None):
        raise _fail("give exactly one of --recorded <dir-or-jsonl> or --run <eval run dir>")
    if counting not in ("per-test", "raw-sum"):
        raise _fail(f"--counting must be per-test or raw-sum, not {counting!r}")
    if samples is not None and samples < 1:
        raise _fail(f"--samples must be at least 1, not {samples}")
    try:
        if recorded is not None:
            pools = load_recorded(recorded, counting=counting)  # type: ignore[arg-type]
            source = f"recorded:{recorded}"
        else:
            pools = load_run_pools(run)  # type: ignore[arg-type]
            source = f"run:{run}"
    except (RecordedError, FileNotFoundError) as e:
        raise _fail(str(e)) from e
    except ValidationError as e:  # a stored verdict or episode that does not validate
        raise _fail(f"{run}: a stored record does not validate: {e}") from e
    if not pools.scores:
        raise _fail(f"{recorded or run}: no candidates ({len(pools.skipped)} rollouts skipped)")
    report = build_report(
        pools, out, source=source, model_name=model_name, samples=samples, seed=seed
    )
    typer.echo((out / "report.md").read_text(encoding="utf-8"))
    typer.echo(
        f"wrote {out}/report.json, report.md, best_at_k.png, predictions/ ({report['tasks']} tasks)"
    )


@app.command()
def report(out: Annotated[Path, typer.Argument(help="A folder `select` wrote.")]) -> None:
    """Print the report a `select` wrote."""
    path = out / "report.md"
    if not (out / "report.json").is_file() or not path.is_file():
        raise _fail(f"{out}: no report.json/report.md here; run `deepswe-verify select` first")
    try:
        json.loads((out / "report.json").read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise _fail(f"{out / 'report.json'}: not JSON ({e.msg})") from e
    typer.echo(path.read_text(encoding="utf-8"))


@app.command()
def render(
    recorded: Annotated[
        Path,
        typer.Option(help="An R2E-Gym trajectory record: a .json file, or a .jsonl (--index)."),
    ],
    tokenizer: Annotated[
        Path,
        typer.Option(help="Tokenizer folder to count with (Qwen's BPE: runs/models/tiny-qwen3)."),
    ],
    fmt: Annotated[
        str, typer.Option("--format", help="r2e-gym (R2E-Gym's verifier input) | ours")
    ] = "r2e-gym",
    max_tokens: Annotated[
        int | None,
        typer.Option(
            min=1, help="Budget; default r2e-gym 65536 (R2E-Gym's max_tokens), ours 32752."
        ),
    ] = None,
    index: Annotated[int, typer.Option(min=0, help="Which line of a .jsonl.")] = 0,
) -> None:
    """Print, as JSON, the judge's chat (system, user) for a recorded trajectory, condensed to the
    budget; a summary line goes to stderr."""
    from deepswe.verify.ef.render_cli import RenderError, render_recorded

    try:
        prompt = render_recorded(recorded, tokenizer, fmt, max_tokens, index)
    except RenderError as e:
        raise _fail(str(e)) from None
    typer.echo(json.dumps(prompt.messages, indent=1, ensure_ascii=False))
    what = "user text" if fmt == "r2e-gym" else "chat"
    typer.echo(
        f"{fmt}: {prompt.condensed} thoughts condensed; {what} {prompt.tokens} tokens, "
        f"limit {prompt.budget} ({prompt.status.value})",
        err=True,
    )
