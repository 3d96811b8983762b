"""Does the tiny model learn? SFT warm-start, then GRPO++ steps, reward measured before and after.

    tasks -> SFT on scripted right + wrong fixes (or reuse --sft) -> baseline: the SFT policy's
    mean reward (every task x --eval-samples seeded episodes, before any RL step)
    -> N GRPO++ steps (the real trainer: Docker episodes, LOO advantages, AdamW)
    -> the same seeded measurement on the trained policy -> gain over the baseline

Tasks: by default one toy task (deepswe.data.toy: a real one-line bug in a real git repository);
--toy-tasks N for more, --swe-mini N for the first N tasks of the swe-mini TRAIN split.
Prints each step's reward and wall time, and the gain over the named baseline (the SFT policy).
Run: .venv/bin/python bench/learning.py [--steps 16] [--eval-samples 32] [--out runs/bench-learning]
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from deepswe.train.config import load_config
from deepswe.train.models import init_tiny_model
from deepswe.train.sft import SFTConfig, policy_reward, run_sft, train_tasks
from deepswe.train.trainer import Trainer

ROOT = Path(__file__).resolve().parents[1]

SWE_MINI = Path(__file__).resolve().parents[1] / "data" / "swe-mini" / "tasks.jsonl"
# The tiny profile, shrunk to short episodes: a scripted fix is str_replace -> finish.
OVERRIDES = [
    "episode.max_steps=4",
    "rollout.tasks_per_step=2",
    "rollout.group_size=4",
    "rollout.concurrency=2",
    "rollout.max_tokens_per_turn=192",
    "backend.optim.micro_batch_size=1",
    "backend.logprob_chunk=512",
    "run.save_every=1000",
    "run.tensorboard=false",
]


@dataclass
class LearningResult:
    baseline: float  # SFT policy's mean reward, before any RL step
    final: float  # the same measurement after the GRPO++ steps
    steps: list[dict] = field(default_factory=list)  # trainer metrics, one record a step
    sft_loss: list[float] = field(default_factory=list)
    sft_data: list[tuple[str, str, str | None]] = field(default_factory=list)  # id, label, outcome
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def gain(self) -> float:
        return self.final - self.baseline


def task_file(out: Path, tasks_arg: str | None, n_toy: int, n_swe_mini: int = 0) -> Path:
    """The tasks to learn on, as a JSONL file the trainer's spine source can read: the first
    `n_swe_mini` of the swe-mini train split, or of `tasks_arg`'s, else `n_toy` toy tasks.
    A folder a previous run left keeps its tasks (its SFT model was trained on them)."""
    path = out / "tasks.jsonl"
    if path.exists():
        return path
    if tasks_arg is not None or n_swe_mini > 0:
        src = Path(tasks_arg) if tasks_arg else SWE_MINI
        tasks = train_tasks(src)  # the train split, sources resolved on this machine
        tasks = tasks[:n_swe_mini] if n_swe_mini > 0 else tasks
    else:
        from deepswe.data.toy import make_toy_tasks

        tasks = make_toy_tasks(out / "toy", n=n_toy)
    path.write_text("".join(t.model_dump_json() + "\n" for t in tasks))
    return path


def learning_run(
    out: Path,
    *,
    steps: int,
    eval_samples: int,
    seed: int = 0,
    lr: float = 3e-4,
    sft: SFTConfig = SFTConfig(),
    sft_model: Path | None = None,
    tasks: str | None = None,
    n_toy: int = 1,
    n_swe_mini: int = 0,
    extra: list[str] = (),  # type: ignore[assignment]
    log=print,
) -> LearningResult:
    """The whole measurement in `out` (a fresh folder, or one a previous run left to reuse)."""
    torch.set_num_threads(sft.threads)
    out.mkdir(parents=True, exist_ok=True)
    seconds: dict[str, float] = {}
    t0 = time.monotonic()
    data = task_file(out, tasks, n_toy, n_swe_mini)
    base = out / "model-init"
    if not base.exists():
        init_tiny_model(base, size="tiny", seed=seed)
    sft_model = sft_model or out / "model-sft"
    over = [
        *OVERRIDES,
        f"data.path={data}",
        f"run.seed={seed}",
        f"run.steps={steps}",
        f"backend.optim.lr={lr}",
        *extra,
    ]
    sft_loss: list[float] = []
    sft_data: list[tuple[str, str, str | None]] = []
    if not sft_model.exists():
        cfg0 = load_config(ROOT / "configs" / "tiny.yaml", [*over, f"model.path={base}"])
        episodes, sft_loss = run_sft(cfg0, sft_model, sft, log=log)
        sft_data = [(e.instance_id, e.label, e.trajectory.outcome) for e in episodes]
    seconds["sft"] = time.monotonic() - t0
    cfg = load_config(ROOT / "configs" / "tiny.yaml", [*over, f"model.path={sft_model}"])
    trainer = Trainer.setup(cfg, out / f"grpo-{int(time.time())}")
    t0 = time.monotonic()
    baseline, _ = policy_reward(trainer.engine, trainer.source, cfg, eval_samples, seed)
    seconds["baseline_eval"] = time.monotonic() - t0
    log(f"baseline (SFT policy, before any RL step): mean reward {baseline:.3f}")
    records, t0 = [], time.monotonic()
    while trainer.step < cfg.run.steps:
        rec = trainer.run_step()
        records.append(rec)
        log(
            f"step {rec['step']:3d}  reward/mean {rec['reward/mean']:.3f}  "
            f"step {rec['time/step']:.1f}s (rollout {rec['time/rollout']:.1f}s, "
            f"update {rec['time/update']:.1f}s)"
        )
    trainer.log.close()
    seconds["grpo"] = time.monotonic() - t0
    t0 = time.monotonic()
    final, _ = policy_reward(trainer.engine, trainer.source, cfg, eval_samples, seed)
    seconds["final_eval"] = time.monotonic() - t0
    return LearningResult(baseline, final, records, sft_loss, sft_data, seconds)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("runs/bench-learning"))
    ap.add_argument("--steps", type=int, default=16, help="GRPO++ steps")
    ap.add_argument("--eval-samples", type=int, default=32, help="episodes per task per measure")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lr", type=float, default=3e-4, help="GRPO++ AdamW learning rate")
    ap.add_argument("--sft", type=Path, default=None, help="reuse this SFT checkpoint")
    ap.add_argument("--sft-epochs", type=int, default=SFTConfig().epochs)
    ap.add_argument("--tasks", default=None, help="task JSONL (its train split if it has one)")
    ap.add_argument("--swe-mini", type=int, default=0, help="first N swe-mini train tasks")
    ap.add_argument("--toy-tasks", type=int, default=1, help="toy tasks (default data)")
    ap.add_argument("overrides", nargs="*", help="extra tiny.yaml overrides a.b=value")
    args = ap.parse_args()
    started = time.monotonic()
    r = learning_run(
        args.out,
        steps=args.steps,
        eval_samples=args.eval_samples,
        seed=args.seed,
        lr=args.lr,
        sft=SFTConfig(epochs=args.sft_epochs, seed=args.seed),
        sft_model=args.sft,
        tasks=args.tasks,
        n_toy=args.toy_tasks,
        n_swe_mini=args.swe_mini,
        extra=args.overrides,
    )
    print("\nstep  reward/mean  step_s")
    for rec in r.steps:
        print(f"{rec['step']:4d}  {rec['reward/mean']:11.3f}  {rec['time/step']:6.1f}")
    print(f"\nbaseline (SFT policy)  {r.baseline:.3f}")
    print(f"after {len(r.steps)} GRPO++ steps {r.final:.3f}")
    print(f"gain over baseline     {r.gain:+.3f}")
    print("seconds: " + json.dumps({k: round(v, 1) for k, v in r.seconds.items()}))
    print(f"total wall time {time.monotonic() - started:.0f}s")


if __name__ == "__main__":
    main()
