"""The judge stage of `deepswe-reproduce tts`: judge SFT rows from the train pool, `deepswe-train
judge` in a subprocess (verify never imports train), or a served judge instead (tts/pipeline.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

from deepswe.reproduce.tts.context import Ctx, TTSError, cli_bin, relay, with_issues
from deepswe.verify.types import Candidate


def judge_base(ctx: Ctx) -> str:
    for p in ctx.cfg.judge.base_models:
        if Path(p).exists():
            return p
    raise TTSError(
        f"tts.judge.base_models: none of {ctx.cfg.judge.base_models} exists; make one "
        "with `deepswe-train init-model --out runs/models/tiny-qwen3`"
    )


def stage_judge(ctx: Ctx) -> None:
    from deepswe.verify.ef.judge_data import build_judge_rows, task_splits, write_rows
    from deepswe.verify.ef.tokens import ChatTokens, load_tokenizer

    j = ctx.cfg.judge
    if j.base_url:
        ctx.notes.append(f"judge: served at {j.base_url} as {j.model}; not trained here")
        return
    folder, base = ctx.out / "judge", judge_base(ctx)
    if (folder / "model" / "metrics.json").is_file():
        return
    tasks = ctx.tasks["train"]
    cands = with_issues(ctx.pool("train"), tasks)
    pools: dict[str, list[Candidate]] = {}
    for c in cands:
        pools.setdefault(c.instance_id, []).append(c)
    rows = build_judge_rows(
        pools,
        task_splits(ctx.cfg.train.dataset, tasks),
        ChatTokens(load_tokenizer(base)),
        j.max_prompt_tokens,
        seed=ctx.cfg.seed,
        log=ctx.log,
    )
    if not rows:
        raise TTSError("judge: no training rows (no graded train candidates)")
    write_rows(rows, folder / "data.jsonl")
    for stale in (folder / "model", folder / "model.tmp"):  # a killed run leaves no whole model
        shutil.rmtree(stale, ignore_errors=True)
    cmd = [
        cli_bin("deepswe-train"),
        "judge",
        "--config",
        j.config,
        "--data",
        str(folder / "data.jsonl"),
        "--out",
        str(folder / "model"),
        f"model={base}",
        *j.overrides,
    ]
    ctx.log(f"tts judge: base {base}, {len(rows)} rows: {' '.join(cmd[1:])}")
    if relay(cmd, ctx.log) != 0:
        raise TTSError("deepswe-train judge failed (its message is above)")


def served_judge(ctx: Ctx):
    """The served judge's endpoint config (tts.judge.base_url set)."""
    from deepswe.verify.ef.endpoint import EndpointJudgeConfig

    j = ctx.cfg.judge
    if not (j.base_url and j.model and j.tokenizer):
        raise TTSError("tts.judge.base_url needs tts.judge.model and tts.judge.tokenizer")
    return EndpointJudgeConfig(base_url=j.base_url, model=j.model, tokenizer=j.tokenizer)


def make_tts_judge(ctx: Ctx):
    from deepswe.verify.ef.score import make_judge

    if ctx.cfg.judge.base_url:
        return make_judge(endpoint=served_judge(ctx))
    return make_judge(path=ctx.out / "judge" / "model" / "merged")


__all__ = ["judge_base", "make_tts_judge", "served_judge", "stage_judge"]
