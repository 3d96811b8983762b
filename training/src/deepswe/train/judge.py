"""Fine-tuning the execution-free judge: LoRA SFT (peft) on judge-data rows.

Rows come from deepswe.verify.ef.judge_data (system, user, assistant target). Sequences are
built as the SFT warm start builds them (deepswe.train.sft): the chat template renders the
prompt (loss mask 0), the target `<judgement>YES|NO</judgement>` plus the end-of-turn token is
the only text trained on (mask 1), and the loss is the same summed next-token cross-entropy.

Held-out rows are whole tasks (a task's positive and negative stay on one side), drawn with the
seed; their loss (nats per target token) is measured before and after training and written to
metrics.json beside the adapter (out/adapter, peft's format: what vLLM serves with --lora-modules)
and the merged model (out/merged: what deepswe.verify.ef.local.LocalJudge loads). Like the SFT
warm start, a run is not resumable: it writes its folder whole at the end, or nothing.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import torch
import yaml
from pydantic import BaseModel, ConfigDict, Field

from deepswe.data.profile import load_section
from deepswe.train.rollout import ChatRenderer, TokenSequence, build_sequence
from deepswe.train.sft import sequence_loss
from deepswe.verify.ef.judge_data import JudgeRow


class LoRASettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    rank: int = Field(64, ge=1, description="LoRA rank r")
    alpha: float = Field(128.0, gt=0, description="LoRA alpha (scale alpha / r)")
    dropout: float = Field(0.0, ge=0, lt=1, description="dropout on the LoRA input")
    targets: list[str] | Literal["all-linear"] = Field(
        "all-linear", description="module names, or every linear layer but the output layer"
    )


class JudgeSFTConfig(BaseModel):
    """One judge fine-tuning run (configs/judge-*.yaml); every value of the 14B recipe is
    sourced in configs/judge-14b.yaml."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(description="base model: a local HF folder or a cached hub id")
    device: str = Field("cpu", description="torch device")
    dtype: Literal["float32", "bfloat16", "float16"] = Field("float32", description="weights")
    lora: LoRASettings = Field(default_factory=LoRASettings)
    lr: float = Field(1e-5, gt=0, description="AdamW peak learning rate")
    epochs: int = Field(2, ge=1, description="passes over the training rows")
    warmup_ratio: float = Field(0.05, ge=0, lt=1, description="linear warmup share of steps")
    scheduler: Literal["cosine"] = Field("cosine", description="decay after warmup")
    batch_size: int = Field(8, ge=1, description="sequences per optimizer step")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay")
    grad_clip: float = Field(1.0, gt=0, description="max global grad norm")
    heldout_fraction: float = Field(0.2, ge=0, lt=1, description="share of tasks held out")
    seed: int = Field(42, description="held-out draw, shuffling, torch RNG")
    threads: int = Field(2, ge=1, description="torch CPU threads")


def load_judge_config(path: str | Path, overrides: Sequence[str] = ()) -> JudgeSFTConfig:
    return load_section(path, None, JudgeSFTConfig, overrides)


def judge_sequence(row: JudgeRow, renderer: ChatRenderer) -> TokenSequence:
    """Prompt (mask 0) then the target's tokens and the end-of-turn token (mask 1)."""
    target = row.messages[-1]
    if target["role"] != "assistant":
        raise ValueError(f"{row.instance_id} run {row.run}: the last message is not the target")
    ids = renderer.encode(target["content"]) + [renderer.eos_id]
    return build_sequence(renderer, row.messages, [(ids, [0.0] * len(ids))], False)


def split_heldout(
    rows: Sequence[JudgeRow], fraction: float, seed: int
) -> tuple[list[JudgeRow], list[JudgeRow]]:
    """(train, held-out) by task: round(fraction x tasks) tasks, at least one when fraction > 0."""
    tasks = sorted({r.instance_id for r in rows})
    random.Random(seed).shuffle(tasks)
    n = max(1, round(fraction * len(tasks))) if fraction > 0 else 0
    held = set(tasks[:n])
    return [r for r in rows if r.instance_id not in held], [
        r for r in rows if r.instance_id in held
    ]


def mean_loss(model: Any, seqs: Sequence[TokenSequence], device: torch.device) -> float:
    """Nats per target token over `seqs`, without gradients."""
    total, count = 0.0, 0
    with torch.no_grad():
        for s in seqs:
            loss, n = sequence_loss(model, s, device)
            total, count = total + float(loss), count + n
    return total / max(count, 1)


def lora_model(cfg: JudgeSFTConfig) -> Any:
    from peft import LoraConfig, get_peft_model

    from deepswe.train.engines.hf import load_model

    base = load_model(cfg.model, cfg.device, cfg.dtype)
    lora = LoraConfig(
        r=cfg.lora.rank,
        lora_alpha=cfg.lora.alpha,
        lora_dropout=cfg.lora.dropout,
        target_modules=cfg.lora.targets,
        task_type="CAUSAL_LM",
        bias="none",
    )
    return get_peft_model(base, lora)


def train_judge(
    cfg: JudgeSFTConfig,
    rows: Sequence[JudgeRow],
    out: str | Path,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """LoRA-fine-tune cfg.model on `rows`; write out/{adapter,merged,metrics.json,config.yaml}
    and return the metrics."""
    from transformers import get_cosine_schedule_with_warmup

    from deepswe.train.engines.hf import load_tokenizer

    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out} exists and is not empty")
    torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    device, tokenizer = torch.device(cfg.device), load_tokenizer(cfg.model)
    renderer = ChatRenderer(tokenizer)
    train_rows, held_rows = split_heldout(rows, cfg.heldout_fraction, cfg.seed)
    if not train_rows:
        raise ValueError("no training rows left after holding tasks out")
    train = [judge_sequence(r, renderer) for r in train_rows]
    held = [judge_sequence(r, renderer) for r in held_rows]
    model = lora_model(cfg)
    inner = model.get_base_model()  # the causal LM with LoRA layers in place
    before = mean_loss(inner, held, device) if held else None
    log(f"judge: {len(train)} train rows, {len(held)} held out; held-out loss {before}")
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    steps = cfg.epochs * math.ceil(len(train) / cfg.batch_size)
    sched = get_cosine_schedule_with_warmup(opt, math.ceil(cfg.warmup_ratio * steps), steps)
    model.train()
    rng, order, history = random.Random(cfg.seed), list(range(len(train))), []
    for epoch in range(cfg.epochs):
        t0, total, count = time.monotonic(), 0.0, 0
        rng.shuffle(order)
        for b in range(0, len(order), cfg.batch_size):
            batch = [train[i] for i in order[b : b + cfg.batch_size]]
            n_tokens = sum(sum(s.loss_mask[1:]) for s in batch)
            opt.zero_grad(set_to_none=True)
            for s in batch:  # token mean over the batch, one sequence in memory at a time
                loss, n = sequence_loss(inner, s, device)
                (loss / max(n_tokens, 1)).backward()
                total, count = total + float(loss.detach()), count + n
            torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
            opt.step()
            sched.step()
        history.append(total / max(count, 1))
        log(
            f"judge epoch {epoch + 1}/{cfg.epochs}: train loss {history[-1]:.4f} "
            f"({time.monotonic() - t0:.1f}s)"
        )
    model.eval()
    after = mean_loss(inner, held, device) if held else None
    metrics = {
        "heldout_loss_before": before,
        "heldout_loss_after": after,
        "train_loss": history,
        "steps": steps,
        "train_rows": len(train),
        "heldout_rows": len(held),
        "heldout_tasks": sorted({r.instance_id for r in held_rows}),
    }
    log(f"judge: held-out loss {before} -> {after}")
    save(model, tokenizer, cfg, metrics, out)
    return metrics


def save(model: Any, tokenizer: Any, cfg: JudgeSFTConfig, metrics: dict, out: Path) -> None:
    """out/adapter, out/merged (+ tokenizer), metrics.json, config.yaml; the folder appears
    complete or not at all."""
    tmp = out.with_name(out.name + ".tmp")
    model.save_pretrained(tmp / "adapter")
    merged = model.merge_and_unload()
    merged.save_pretrained(tmp / "merged")
    tokenizer.save_pretrained(tmp / "merged")
    (tmp / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    (tmp / "config.yaml").write_text(yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False))
    tmp.rename(out)
