"""SFT warm-start: teach a model without pretraining to emit tool calls, before GRPO++.

DeepSWE starts RL from Qwen3-32B, a model that already writes tool calls. The `tiny` profile's
model is randomly initialised, so this stage stands in for pretraining: it fine-tunes the model
on scripted episodes over the TRAIN tasks, recorded through the real tools in real sandboxes
(`deepswe.env.episode.run_task` with a `ScriptedPolicy`), then graded by the hidden tests.

Per task it records one RIGHT fix (the gold patch as `str_replace` calls, then `finish`) and
`wrong_per_task` WRONG ones (a no-op edit of the same hunk: a comment or a `pass` line inserted
before the buggy line, which is left as it was, so the grade is unresolved). Trained on that
mix, the model samples the right fix about 1 time in 1 + wrong_per_task: a starting policy
GRPO++ can measurably improve (bench/learning.py).

Sequences are built as the trainer builds them (`deepswe.train.rollout.build_sequence`): the
prompt and the observations rendered by the chat template (loss mask 0), each assistant turn as
its tokens plus the end-of-turn token (loss mask 1). The model then sees, at rollout time,
exactly the token layout it was fine-tuned on.
"""

from __future__ import annotations

import random
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from unidiff import PatchSet

from deepswe.data.task import Task
from deepswe.env.agent.loop import EpisodeLimits
from deepswe.env.episode import run_task
from deepswe.env.policies.scripted import FINISH, ScriptedPolicy
from deepswe.env.sandbox import SandboxLimits
from deepswe.env.trajectory import Trajectory
from deepswe.train.rollout import ChatRenderer, TokenSequence, build_sequence

# Lines a wrong fix inserts before the buggy line: a change that runs and fixes nothing.
WRONG_LINES = ("# TODO: check this", "pass")
Line = tuple[str, str]  # a hunk line: (text with its newline, " " | "-" | "+")


@dataclass(frozen=True)
class SFTConfig:
    """The SFT stage's knobs (the tiny profile's defaults; see training/README.md)."""

    wrong_per_task: int = 2  # wrong fixes per right one: the start policy's odds of a right fix
    # Passes over the sequences. 1 toy task: 300 epochs = 900 steps, ~4 min, loss 0.0128 nats a
    # token, at the floor the 1:2 right:wrong choice sets (ln 3 at one token of ~80); after 100
    # epochs (0.02) one reply in three was malformed at T = 1 and GRPO++ gained half as much.
    epochs: int = 300
    lr: float = 3e-3  # AdamW peak; a randomly initialised tiny model needs a large step
    final_lr: float = 0.1  # linear decay to lr * final_lr: the last epochs sharpen the fit
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    seed: int = 0  # shuffling order and the torch RNG
    threads: int = 2  # torch CPU threads (a shared box)


@dataclass
class ScriptedEpisode:
    """One recorded scripted episode: which fix it plays, its trajectory, its graded reward."""

    instance_id: str
    label: str  # "right" | "wrong-0" | "wrong-1" ...
    trajectory: Trajectory

    @property
    def reward(self) -> float:
        return float(self.trajectory.reward or 0.0)


def _call(name: str, **params: str) -> str:
    body = "".join(f"<parameter={k}>{v}</parameter>\n" for k, v in params.items())
    return f"<function={name}>\n{body}</function>"


def _base_file(task: Task, path: str) -> str | None:
    """`path` at the task's base commit, when its source is a local git repository."""
    src = task.environment.source if task.environment else ""
    if not src or not Path(src).is_dir():
        return None
    r = subprocess.run(["git", "-C", src, "show", f"{task.base_commit}:{path}"],
                       capture_output=True, text=True)  # fmt: skip
    return r.stdout if r.returncode == 0 else None


def _span(lines: list[Line], text: str | None) -> list[Line]:
    """The changed lines of a hunk with the least context that makes their old text unique in
    `text` (the whole hunk when `text` is unknown): a short str_replace, as a model writes."""
    changed = [i for i, (_, kind) in enumerate(lines) if kind != " "]
    lo, hi = changed[0], changed[-1]
    while text is not None:
        # The agent's parser strips parameter values: the stripped text must be unique.
        old = "".join(v for v, kind in lines[lo : hi + 1] if kind != "+").strip()
        if old and text.count(old) == 1:
            return lines[lo : hi + 1]
        if lo == 0 and hi == len(lines) - 1:
            break
        lo, hi = max(lo - 1, 0), min(hi + 1, len(lines) - 1)
    return lines


def fix_edits(task: Task) -> list[tuple[str, list[Line]]]:
    """The gold patch as (path, hunk lines) edits, each hunk cut to its unique changed span."""
    if not task.gold_patch:
        raise ValueError(f"{task.instance_id}: no gold patch to script a fix from")
    edits = []
    for f in PatchSet(task.gold_patch):
        if f.is_added_file or f.is_removed_file:
            raise ValueError(f"{task.instance_id}: the scripted fixes edit existing files only")
        text = _base_file(task, f.path)
        for hunk in f:
            lines = [(ln.value, "+" if ln.is_added else "-" if ln.is_removed else " ")
                     for ln in hunk]  # fmt: skip
            edits.append((f.path, _span(lines, text)))
    return edits


def _str_replace(path: str, lines: list[Line], root: str) -> str:
    old = "".join(v for v, kind in lines if kind != "+")
    new = "".join(v for v, kind in lines if kind != "-")
    return _call("file_editor", command="str_replace", path=f"{root}/{path}", old_str=old,
                 new_str=new)  # fmt: skip


def right_fix_actions(edits: list[tuple[str, list[Line]]], root: str = "/testbed") -> list[str]:
    """The gold fix: one str_replace per edit, then `finish`."""
    return [_str_replace(path, lines, root) for path, lines in edits] + [FINISH]


def wrong_fix_actions(
    edits: list[tuple[str, list[Line]]], k: int, root: str = "/testbed"
) -> list[str]:
    """A wrong fix: the first edit's old text kept, with `WRONG_LINES[k]` inserted (indented
    like it) before the first line the gold patch changes; then `finish`."""
    path, lines = edits[0]
    noop = WRONG_LINES[k % len(WRONG_LINES)]
    out: list[Line] = []
    for value, kind in lines:
        if kind == "+":
            continue  # the wrong fix never writes the gold lines
        if kind == "-" and not any(t == "+" for _, t in out):
            indent = value[: len(value) - len(value.lstrip())]
            out.append((f"{indent}{noop}\n", "+"))
        out.append((value, " "))
    if not any(t == "+" for _, t in out):  # a pure insertion: the no-op goes at its end
        out.append((noop + "\n", "+"))
    return [_str_replace(path, out, root), FINISH]


def fix_scripts(task: Task, wrong_per_task: int) -> list[tuple[str, list[str]]]:
    """(label, model texts) of the right fix and `wrong_per_task` wrong ones."""
    edits = fix_edits(task)
    scripts = [("right", right_fix_actions(edits))]
    scripts += [(f"wrong-{k}", wrong_fix_actions(edits, k)) for k in range(wrong_per_task)]
    return scripts


def record_episodes(
    tasks: list[Task],
    limits: EpisodeLimits,
    sandbox_limits: SandboxLimits | None = None,
    wrong_per_task: int = 2,
    backend: str = "docker",
    log: Callable[[str], None] = print,
) -> list[ScriptedEpisode]:
    """Play every fix script of every task through the real tools and grade it."""
    out = []
    for task in tasks:
        for label, script in fix_scripts(task, wrong_per_task):
            traj = run_task(task, ScriptedPolicy(script), limits=limits, backend=backend,
                            sandbox_limits=sandbox_limits)  # fmt: skip
            out.append(ScriptedEpisode(task.instance_id, label, traj))
            log(f"sft data: {task.instance_id} {label}: {traj.ending.value}, {traj.outcome}")
    return out


def sft_sequence(traj: Trajectory, renderer: ChatRenderer) -> TokenSequence:
    """The training sequence of a scripted trajectory: each assistant turn's tokens + eos."""
    samples = []
    for m in traj.messages:
        if m["role"] == "assistant":
            ids = renderer.encode(m["content"]) + [renderer.eos_id]
            samples.append((ids, [0.0] * len(ids)))
    return build_sequence(renderer, traj.messages, samples, generation_prompt=False)


def _sequence_loss(
    model: Any, seq: TokenSequence, device: torch.device
) -> tuple[torch.Tensor, int]:
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
) -> list[float]:
    """Fine-tune the model at `model_path` on `sequences` (loss on mask-1 tokens only, one
    sequence a step, AdamW) and save it with its tokenizer to `out`; returns the mean loss
    (nats per trained token) of each epoch."""
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
            loss, n = _sequence_loss(model, sequences[i], device)
            opt.zero_grad(set_to_none=True)
            (loss / max(n, 1)).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            opt.step()
            sched.step()
            total, count = total + float(loss.detach()), count + n
        history.append(total / max(count, 1))
        log(f"sft epoch {epoch + 1}/{cfg.epochs}: loss {history[-1]:.4f} "
            f"({time.monotonic() - t0:.1f}s)")  # fmt: skip
    tmp = out.with_name(out.name + ".tmp")
    model.save_pretrained(tmp)
    load_tokenizer(model_path).save_pretrained(tmp)
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
    train_cfg: Any,
    out: str | Path,
    cfg: SFTConfig = SFTConfig(),
    tasks: list[Task] | None = None,
    log: Callable[[str], None] = print,
) -> tuple[list[ScriptedEpisode], list[float]]:
    """The whole stage for a TrainConfig: record scripted episodes with the training episode's
    limits (same prompts and step reminders as GRPO++ rollouts), then fine-tune model.path."""
    from deepswe.train.engines.hf import load_tokenizer
    from deepswe.train.sources.spine import SpineSource

    source = SpineSource(train_cfg, tasks)
    tasks = source.tasks() if tasks is not None else train_tasks(train_cfg.data.path)
    episodes = record_episodes(
        tasks, source.limits, train_cfg.episode.sandbox, cfg.wrong_per_task,
        train_cfg.episode.sandbox_backend, log,
    )  # fmt: skip
    renderer = ChatRenderer(load_tokenizer(train_cfg.model.path))
    usable = [e for e in episodes if e.trajectory.ending.value == "submitted"]
    seqs = [sft_sequence(e.trajectory, renderer) for e in usable]
    history = train_sft(train_cfg.model.path, seqs, out, cfg, log)
    return episodes, history


def policy_reward(
    engine: Any, source: Any, cfg: Any, samples: int, seed: int
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
