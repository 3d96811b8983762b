"""The stages of `make reproduce`, per profile.

tiny: preflight -> data -> images -> model -> sft -> train -> eval-sft -> eval-trained ->
baselines -> tts (then the report). Every stage runs the subprojects' own commands with the
profile (configs/tiny.yaml) and writes under OUT = runs/reproduce-tiny/:

    models/init, models/sft          the random tiny Qwen3 and its SFT warm start
    train/                           the GRPO++ run (metrics.jsonl, checkpoints/, final/)
    eval/learning-sft, learning-trained   held-out swe-toy, both checkpoints served by vLLM
    eval/swe-mini-model              the trained model on a few real swe-mini:test tasks
    eval/swe-mini-baselines/{gold,empty}  the harness check on the same tasks
    tts/                             test-time scaling (verifiers, Best@k)
    REPORT.md, report.html, plots/   the report (deepswe.reproduce.report)

deepswe-32b: preflight only checks what the cluster profile needs and says what is missing;
its stages are the Makefile's targets with BASE_URL/JUDGE_URL (README, "deepswe-32b").
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from deepswe.reproduce.pipeline import Context, Stage, StageFailed, StageResult
from deepswe.reproduce.preflight import cluster_preflight, preflight
from deepswe.train.step_record import read_metrics


def _rel(p: Path) -> str:
    try:
        return str(p.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(p)


# --- tiny --------------------------------------------------------------------------------------
def _toy(ctx: Context, split: str) -> Path:
    return Path(ctx.cfg.swe_toy.out) / f"{split}.jsonl"


def swe_mini_check_ids(ctx: Context) -> list[str]:
    """The first `per_repo` task ids of each project of the swe-mini check's dataset."""
    from deepswe.data.datasets import load_tasks

    by_repo: dict[str, list[str]] = {}
    for t in load_tasks(ctx.cfg.swe_mini.dataset):
        by_repo.setdefault(t.repo, []).append(t.instance_id)
    return [
        i for repo in sorted(by_repo) for i in sorted(by_repo[repo])[: ctx.cfg.swe_mini.per_repo]
    ]


def data(ctx: Context) -> StageResult:
    toy = ctx.cfg.swe_toy
    ctx.sh(
        "deepswe-data",
        "swe-toy",
        "--out",
        toy.out,
        "--train",
        str(toy.train),
        "--test",
        str(toy.test),
        "--seed",
        str(toy.seed),
    )
    ctx.sh("deepswe-data", "swe-mini", "fetch")
    ids = swe_mini_check_ids(ctx)
    ctx.path("swe-mini-check-ids.txt").write_text("".join(i + "\n" for i in ids))
    return StageResult(
        artifacts=[
            str(_toy(ctx, "train")),
            str(_toy(ctx, "test")),
            _rel(ctx.path("swe-mini-check-ids.txt")),
        ],
        numbers={"swe_toy_train": toy.train, "swe_toy_test": toy.test, "swe_mini_check": len(ids)},
    )


def _check_ids(ctx: Context) -> list[str]:
    return ctx.path("swe-mini-check-ids.txt").read_text().split()


def images(ctx: Context) -> StageResult:
    ctx.sh("deepswe-env", "build", "--tasks", _toy(ctx, "train"))
    ctx.sh("deepswe-env", "build", "--tasks", _toy(ctx, "test"))
    ids = _check_ids(ctx)
    for i in ids:
        ctx.sh("deepswe-env", "build", "--tasks", ctx.cfg.swe_mini.dataset, "--id", i)
    return StageResult(numbers={"images": ctx.cfg.swe_toy.train + ctx.cfg.swe_toy.test + len(ids)})


def model(ctx: Context) -> StageResult:
    out = ctx.path("models", "init")
    if out.exists():  # a kill after the write: init-model writes whole folders only
        shutil.rmtree(out)
    ctx.sh("deepswe-train", "init-model", "--out", out)
    return StageResult(artifacts=[_rel(out)])


SFT_LOSS = re.compile(r"sft epoch (\d+)/(\d+): loss ([0-9.]+)")


def sft(ctx: Context) -> StageResult:
    out = ctx.path("models", "sft")
    for leftover in (out, out.with_name(out.name + ".tmp")):  # a killed run's partial folder
        if leftover.exists():
            shutil.rmtree(leftover)
    log = ctx.sh(
        "deepswe-train",
        "sft",
        "--config",
        ctx.profile,
        "--out",
        out,
        f"model.path={ctx.path('models', 'init')}",
        f"data.path={_toy(ctx, 'train')}",
    )
    losses = [float(m.group(3)) for m in SFT_LOSS.finditer(log)]
    scripted = log.count("sft data: ")
    return StageResult(artifacts=[_rel(out)], numbers={"loss": losses, "episodes": scripted})


def train(ctx: Context) -> StageResult:
    out = ctx.path("train")
    resume = (
        ["--resume"]
        if (out / "checkpoints").is_dir() and any((out / "checkpoints").iterdir())
        else []
    )
    if out.exists() and not resume:
        shutil.rmtree(out)  # started, killed before its first checkpoint
    ctx.sh(
        "deepswe-train",
        "train",
        "--config",
        ctx.profile,
        "--out",
        out,
        *resume,
        f"model.path={ctx.path('models', 'sft')}",
        f"data.path={_toy(ctx, 'train')}",
    )
    steps = read_metrics(out / "metrics.jsonl")
    rewards = [s.reward.mean for s in steps]
    return StageResult(
        artifacts=[_rel(out / "final"), _rel(out / "metrics.jsonl")],
        numbers={"steps": len(steps), "reward": rewards},
    )


def _pass_at_1(run_dir: Path) -> dict:
    m = json.loads((run_dir / "metrics.json").read_text())
    keys = ("pass@1_mean", "pass@1_std", "tasks", "runs", "counts")
    return {"metrics": _rel(run_dir / "metrics.json"), **{k: m.get(k) for k in keys}}


def _serve_and_eval(ctx: Context, model_dir: Path, jobs: list[tuple[str, list[str]]]) -> dict:
    """Serve `model_dir` with vLLM (CPU build) and run `deepswe-eval run` with the openai policy
    for each (out folder name, extra args) in `jobs`; their Pass@1 by name."""
    from deepswe.train.engines.vllm_server import VLLMServer, VLLMServerError

    try:
        server = VLLMServer(model_dir)
    except (VLLMServerError, FileNotFoundError, TimeoutError) as exc:
        raise StageFailed(f"vLLM could not serve {model_dir}: {exc}") from exc
    ctx.echo(f"  vLLM serving {model_dir} at {server.url} (log {server.log_path})")
    out = {}
    try:
        for name, extra in jobs:
            run_dir = ctx.path("eval", name)
            ctx.sh(
                "deepswe-eval",
                "run",
                "--config",
                ctx.profile,
                "--out",
                run_dir,
                "eval.policy.name=openai",
                f"eval.policy.base_url={server.url}/v1",
                "eval.policy.model=policy",
                "eval.episode.prompt_variant=train",
                *extra,
            )
            out[name] = _pass_at_1(run_dir)
    finally:
        server.stop()
    return out


def _learning_args(ctx: Context) -> list[str]:
    c = ctx.cfg.learning
    return [
        "--dataset",
        c.dataset,
        f"eval.runs={c.runs}",
        f"eval.policy.seed={c.seed}",
        f"eval.episode.max_steps={c.max_steps}",
        f"eval.policy.max_tokens={c.max_tokens}",
        f"eval.workers={c.workers}",
    ]


def eval_sft(ctx: Context) -> StageResult:
    res = _serve_and_eval(ctx, ctx.path("models", "sft"), [("learning-sft", _learning_args(ctx))])
    return StageResult(artifacts=[_rel(ctx.path("eval", "learning-sft"))], numbers=res)


def eval_trained(ctx: Context) -> StageResult:
    c = ctx.cfg.swe_mini
    ids = [a for i in _check_ids(ctx) for a in ("--ids", i)]
    mini = [
        "--dataset",
        c.dataset,
        *ids,
        f"eval.runs={c.runs}",
        f"eval.episode.max_steps={c.max_steps}",
        f"eval.policy.max_tokens={c.max_tokens}",
    ]
    res = _serve_and_eval(
        ctx,
        ctx.path("train", "final"),
        [("learning-trained", _learning_args(ctx)), ("swe-mini-model", mini)],
    )
    return StageResult(artifacts=[_rel(ctx.path("eval", n)) for n in res], numbers=res)


def baselines(ctx: Context) -> StageResult:
    ids = [a for i in _check_ids(ctx) for a in ("--ids", i)]
    out = ctx.path("eval", "swe-mini-baselines")
    ctx.sh(
        "deepswe-eval",
        "validate",
        "--config",
        ctx.profile,
        "--out",
        out,
        "--dataset",
        ctx.cfg.swe_mini.dataset,
        *ids,
    )
    for k in ("gold", "empty"):  # validate stores episodes; report adds metrics and view.html
        ctx.sh("deepswe-eval", "report", out / k)
    return StageResult(
        artifacts=[_rel(out / "gold"), _rel(out / "empty")],
        numbers={k: _pass_at_1(out / k) for k in ("gold", "empty")},
    )


def tts(ctx: Context) -> StageResult:
    out = ctx.path("tts")
    models = f"[{ctx.path('models', 'sft')},{ctx.path('models', 'init')}]"
    ctx.sh(
        "deepswe-reproduce",
        "tts",
        "--config",
        ctx.profile,
        "--out",
        out,
        f"eval.policy.args.path={ctx.path('train', 'final')}",
        f"tts.judge.base_models={models}",
        *ctx.cfg.tts_overrides,
    )
    report = json.loads((out / "report.json").read_text())
    best = {c["method"]: c["points"][-1]["mean"] for c in report["curves"] if c["points"]}
    return StageResult(
        artifacts=[_rel(out / "report.md")],
        numbers={
            "report": _rel(out / "report.json"),
            "tasks": report["tasks"],
            "candidates": report["candidates"],
            "pass@1": report["pass@1"]["mean"],
            "best@N": best,
        },
    )


def tiny_stages(ctx: Context) -> list[Stage]:
    stages = [
        Stage(
            "preflight",
            "Docker, disk, git, vLLM's CPU build and the profile, checked first",
            preflight,
        ),
        Stage("data", "swe-toy made (the curriculum), swe-mini's pinned sources fetched", data),
        Stage("images", "task images: swe-toy train/test, the swe-mini check tasks", images),
        Stage("model", "a randomly initialised tiny Qwen3 with Qwen's tokenizer", model),
        Stage(
            "sft",
            "SFT warm start on scripted right and wrong fixes (stands in for pretraining)",
            sft,
        ),
        Stage("train", "GRPO++ on swe-toy train, episodes in Docker", train),
        Stage(
            "eval-sft",
            "the SFT start on held-out swe-toy, served by vLLM, the openai policy",
            eval_sft,
        ),
        Stage(
            "eval-trained",
            "the trained model, same protocol and seeds; and on swe-mini:test tasks",
            eval_trained,
        ),
        Stage(
            "baselines",
            "gold and empty patches on the swe-mini tasks: the harness check",
            baselines,
        ),
    ]
    if ctx.cfg.tts:
        stages.append(
            Stage("tts", "verifiers and hybrid test-time scaling (the profile's tts:)", tts)
        )
    return stages


# --- deepswe-32b -------------------------------------------------------------------------------
def cluster_stages(ctx: Context) -> list[Stage]:
    def make(target: str):
        def run(c: Context) -> StageResult:
            c.sh("make", target, "PROFILE=deepswe-32b")
            return StageResult()

        return run

    return [
        Stage(
            "preflight", "GPUs, served endpoints, Docker, disk, checked first", cluster_preflight
        ),
        *(
            Stage(t, f"make {t} PROFILE=deepswe-32b", make(t))
            for t in ("data", "train", "eval", "eval-tts")
        ),
    ]


def stages_for(ctx: Context) -> list[Stage]:
    return tiny_stages(ctx) if ctx.cfg.profile == "tiny" else cluster_stages(ctx)
