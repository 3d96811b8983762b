"""SFT warm-start: teach a model without pretraining to emit tool calls, before GRPO++.

DeepSWE starts RL from Qwen3-32B, a model that already writes tool calls. The `tiny` profile's
model is randomly initialised, so this stage stands in for pretraining: it fine-tunes the model
on scripted right and wrong fixes of the TRAIN tasks (deepswe.train.scripted_fixes), recorded
through the real tools in real sandboxes and graded by the hidden tests. Trained on 1 right :
`wrong_per_task` wrong, the model samples the right fix about 1 time in 1 + wrong_per_task: a
starting policy GRPO++ can measurably improve (bench/learning.py).

Its settings are the `sft:` section of the training profile (`SFTConfig`, sft_config.py, apart so
that TrainConfig can hold it while this module types its config as TrainConfig), so one YAML holds the
whole tiny recipe; the resolved config is written into the output folder beside the model.

Sequences are built as the trainer builds them (`deepswe.train.rollout.build_sequence`): the
prompt and the observations rendered by the chat template (loss mask 0), each assistant turn as
its tokens plus the end-of-turn token (loss mask 1). The model then sees, at rollout time,
exactly the token layout it was fine-tuned on.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import yaml

from deepswe.data.task import Task
from deepswe.env.trajectory import Trajectory
from deepswe.train.config import TrainConfig
from deepswe.train.rollout import ChatRenderer, TokenSequence, build_sequence
from deepswe.train.scripted_fixes import ScriptedEpisode, record_episodes
from deepswe.train.sft_config import SFTConfig


def sft_sequence(traj: Trajectory, renderer: ChatRenderer) -> TokenSequence:
    """The training sequence of a scripted trajectory: each assistant turn's tokens + eos."""
    samples = []
    for m in traj.messages:
        if m["role"] == "assistant":
            ids = renderer.encode(m["content"]) + [renderer.eos_id]
            samples.append((ids, [0.0] * len(ids)))
    return build_sequence(renderer, traj.messages, samples, generation_prompt=False)


def sequence_loss(model: Any, seq: TokenSequence, device: torch.device) -> tuple[torch.Tensor, int]:
    """Summed next-token cross-entropy over loss-mask positions, and their count.

    Only the positions whose NEXT token is trained go through the output layer: with Qwen's
    152k vocabulary the full [T, V] logits of a 1.6k-token prompt would cost more than the
    whole decoder of a tiny model.
    """
    ids = torch.tensor([seq.ids], dtype=torch.long, device=device)  # [1, T]
    hidden = model.base_model(input_ids=ids).last_hidden_state[0]  # [T, H]
    mask = torch.tensor(seq.loss_mask[1:], dtype=torch.bool, device=device)  # [T-1]
    logits = model.get_output_embeddings()(hidden[:-1][mask]).float()  # [N, V]
    targets = ids[0, 1:][mask]  # [N]
    return torch.nn.functional.cross_entropy(logits, targets, reduction="sum"), int(mask.sum())


def train_sft(
    model_path: str | Path,
    sequences: list[TokenSequence],
    out: str | Path,
    cfg: SFTConfig = SFTConfig(),
    log: Callable[[str], None] = print,
    resolved: dict[str, Any] | None = None,
) -> list[float]:
    """Fine-tune the model at `model_path` on `sequences` (loss on mask-1 tokens only, one
    sequence a step, AdamW) and save it with its tokenizer to `out`, and `resolved` (the run's
    resolved config) as out/config.yaml; returns the mean loss (nats per trained token) of each
    epoch."""
    from deepswe.train.engines.hf import load_model, load_tokenizer

    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out} exists and is not empty")
    torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    model = load_model(model_path, "cpu", "float32").train()
    device = torch.device("cpu")
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    total_steps = max(cfg.epochs * len(sequences) - 1, 1)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda k: 1.0 - (1.0 - cfg.final_lr) * min(k / total_steps, 1.0)
    )
    rng = random.Random(cfg.seed)
    order, history = list(range(len(sequences))), []
    for epoch in range(cfg.epochs):
        t0, total, count = time.monotonic(), 0.0, 0
        rng.shuffle(order)
        for i in order:
            loss, n = sequence_loss(model, sequences[i], device)
            opt.zero_grad(set_to_none=True)
            (loss / max(n, 1)).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            opt.step()
            sched.step()
            total, count = total + float(loss.detach()), count + n
        history.append(total / max(count, 1))
        log(
            f"sft epoch {epoch + 1}/{cfg.epochs}: loss {history[-1]:.4f} "
            f"({time.monotonic() - t0:.1f}s)"
        )
    tmp = out.with_name(out.name + ".tmp")
    model.save_pretrained(tmp)
    load_tokenizer(model_path).save_pretrained(tmp)
    if resolved is not None:
        (tmp / "config.yaml").write_text(yaml.safe_dump(resolved, sort_keys=False))
    tmp.rename(out)  # the folder appears complete or not at all
    return history


def train_tasks(path: str | Path) -> list[Task]:
    """The tasks of a JSONL file; only its "train" split when rows carry one (swe-mini)."""
    from deepswe.data.datasets import load_tasks

    tasks = load_tasks(str(path))
    if any(t.metadata.get("split") for t in tasks):
        from deepswe.data.swemini.load import resolve_source

        tasks = [resolve_source(t) for t in tasks if t.metadata.get("split") == "train"]
    return tasks


def run_sft(
    train_cfg: TrainConfig,
    out: str | Path,
    cfg: SFTConfig | None = None,
    tasks: list[Task] | None = None,
    log: Callable[[str], None] = print,
) -> tuple[list[ScriptedEpisode], list[float]]:
    """The whole stage for a TrainConfig: record scripted episodes with the training episode's
    limits (same prompts and step reminders as GRPO++ rollouts), then fine-tune model.path into
    `out`, the resolved config beside it. `cfg` replaces the config's `sft` section."""
    from deepswe.train.engines.hf import load_tokenizer
    from deepswe.train.sources.spine import SpineSource

    cfg = cfg if cfg is not None else train_cfg.sft
    source = SpineSource(train_cfg, tasks)
    tasks = source.tasks() if tasks is not None else train_tasks(train_cfg.data.path)
    episodes = record_episodes(
        tasks,
        source.limits,
        train_cfg.episode.sandbox,
        cfg.wrong_per_task,
        train_cfg.episode.sandbox_backend,
        log,
    )
    renderer = ChatRenderer(load_tokenizer(train_cfg.model.path))
    usable = [e for e in episodes if e.trajectory.ending.value == "submitted"]
    seqs = [sft_sequence(e.trajectory, renderer) for e in usable]
    resolved = train_cfg.model_copy(update={"sft": cfg}).model_dump(mode="json")
    history = train_sft(train_cfg.model.path, seqs, out, cfg, log, resolved)
    return episodes, history


def policy_reward(
    engine: Any, source: Any, cfg: TrainConfig, samples: int, seed: int
) -> tuple[float, list[Trajectory]]:
    """Mean reward of the engine's policy over `samples` episodes of every task of `source`,
    sampled as GRPO++ rollouts are (sampling.episode_policy), episode k of task t seeded as
    rollout k of slot t of step 0 of a run seeded `seed`: the same call on the same weights
    gives the same number (CPU)."""
    from concurrent.futures import ThreadPoolExecutor

    from deepswe.train.sampling import episode_policy, rollout_seed

    tasks = source.tasks()

    def one(job: tuple[int, int]) -> Trajectory:
        t, k = job
        policy = episode_policy(engine, cfg, rollout_seed(seed, 0, t, k))
        return source.rollout(tasks[t], policy)

    jobs = [(t, k) for t in range(len(tasks)) for k in range(samples)]
    with ThreadPoolExecutor(max_workers=cfg.rollout.concurrency) as pool:
        trajs = list(pool.map(one, jobs))
    rewards = [t.reward or 0.0 for t in trajs]
    return sum(rewards) / max(len(rewards), 1), trajs
