"""The GRPO++ update's cost against a plain forward/backward over the same tokens.

One batch of agent-shaped sequences (the tiny profile's training prompt, a scripted
str_replace reply, its tool observation, a finish reply: ~1.8k tokens each, G rows per group,
mixed rewards) on the tiny model. Timed, each the median of --repeats:

  grpo++ step   the trainer's stages after the rollout: pi_old recomputed by the backend
                (Trainer.old_logprobs), compact filtering + LOO advantages
                (Trainer.advantages), backend.train_step (micro-batched forward/backward
                with the clipped loss, grad clipping, AdamW)
  plain f/b     the named baseline: the same model, same rows, same micro-batches, one
                transformers forward with labels (cross-entropy on the same loss-mask
                tokens) and backward, no optimizer

and prints the ratio grpo++ / plain (1.0 = the GRPO++ machinery costs nothing extra). Below 1
because the backend runs the vocabulary projection and softmax only at trained positions, where
a plain labelled forward runs them at every position (measured 2026-11-30, 4 x 1769 tokens, 2
threads: 2.03 s against 7.62 s, 0.27x; 3.54x before that change).
Run: .venv/bin/python bench/train_step.py [--rows 4] [--repeats 3] [--threads 2]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import torch

from deepswe.data.toy import make_toy_tasks
from deepswe.env.agent import prompts
from deepswe.env.policies.scripted import FINISH, patch_to_actions
from deepswe.train.backends.hf import HFBackend
from deepswe.train.config import load_config
from deepswe.train.engines.hf import load_tokenizer
from deepswe.train.models import init_tiny_model
from deepswe.train.rollout import ChatRenderer, build_sequence, collate
from deepswe.train.trainer import Trainer


def agent_batch(model: Path, rows: int, group: int, tmp: Path):
    """`rows` agent-shaped sequences (reward 1 on every other row), groups of `group`."""
    renderer = ChatRenderer(load_tokenizer(model))
    task = make_toy_tasks(tmp, n=1)[0]
    edit = patch_to_actions(task.gold_patch)[0]
    msgs = prompts.build_messages(task.problem_statement, "train", 4)
    observation = "Execution output of [file_editor]:\nThe file has been edited.\n" * 8
    msgs += [
        {"role": "assistant", "content": edit},
        {"role": "user", "content": observation},
        {"role": "assistant", "content": FINISH},
    ]
    samples = []
    for text in (edit, FINISH):
        ids = renderer.encode(text) + [renderer.eos_id]
        samples.append((ids, [-0.5] * len(ids)))
    seq = build_sequence(renderer, msgs, samples, generation_prompt=False)
    pad = renderer.tok.pad_token_id
    return collate(
        [seq] * rows,
        [float(i % 2) for i in range(rows)],
        [i // group for i in range(rows)],
        ["submitted"] * rows,
        pad,
    )


def grpo_step(trainer_like, backend: HFBackend, batch) -> float:
    t0 = time.perf_counter()
    update, _ = Trainer.advantages(trainer_like, batch)
    assert update is not None
    Trainer.old_logprobs(SimpleNamespace(backend=backend, cfg=trainer_like.cfg), update.rollout)
    backend.train_step(update)
    return time.perf_counter() - t0


def plain_step(backend: HFBackend, batch) -> float:
    """Forward with labels + backward, same micro-batches, no optimizer step."""
    model, m = backend.model, backend.optim_cfg.micro_batch_size
    model.train()
    t0 = time.perf_counter()
    model.zero_grad(set_to_none=True)
    for s in range(0, len(batch), m):
        ids, attn = batch.input_ids[s : s + m], batch.attention_mask[s : s + m]
        labels = torch.where(batch.loss_mask[s : s + m].bool(), ids, -100)
        model(input_ids=ids, attention_mask=attn, labels=labels).loss.backward()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=4, help="sequences in the batch")
    ap.add_argument("--group", type=int, default=2, help="rollouts per task (G)")
    ap.add_argument("--micro", type=int, default=1, help="micro-batch size")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        model = init_tiny_model(Path(tmp) / "m", size="tiny", seed=0).path
        cfg = load_config(
            "configs/tiny.yaml",
            [
                f"model.path={model}",
                f"backend.optim.micro_batch_size={args.micro}",
                "backend.logprob_chunk=512",
            ],
        )
        backend = HFBackend.from_config(cfg)
        batch = agent_batch(model, args.rows, args.group, Path(tmp))
        like = SimpleNamespace(cfg=cfg)
        grpo_step(like, backend, batch)  # warm-up (allocator, kernels)
        plain_step(backend, batch)
        g = statistics.median(grpo_step(like, backend, batch) for _ in range(args.repeats))
        p = statistics.median(plain_step(backend, batch) for _ in range(args.repeats))
    t, n = batch.input_ids.shape
    print(
        f"batch: {t} rows x {n} tokens, {int(batch.loss_mask.sum())} trained tokens, "
        f"micro-batch {args.micro}, {args.threads} threads"
    )
    print(f"plain forward/backward (baseline)  {p:7.2f} s")
    print(f"grpo++ step                        {g:7.2f} s")
    print(f"ratio grpo++ / plain               {g / p:7.2f}x")


if __name__ == "__main__":
    main()
