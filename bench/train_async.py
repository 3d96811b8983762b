"""Synchronous GRPO++ against one step behind: the same seed, wall time per step and learning.

    one SFT warm start (bench/learning.py's: scripted fixes of toy tasks, or --sft to reuse one)
    -> baseline: the SFT policy's mean reward over --eval-samples seeded episodes a task
    -> N GRPO++ steps synchronous (rollout.max_staleness 0, the baseline named in the ratios)
    -> N GRPO++ steps one step behind (rollout.max_staleness 1: the next step's episodes are
       sampled while this step trains), from the same SFT model and seed
    -> the same seeded measurement on each trained policy

Prints both reward curves side by side, each run's wall seconds per step and where a step's
time went (generation wall: the batch's sampling from its start to its end, wherever it ran;
exposed: what the trainer waited for it; update; weight push), the step-time ratio
one-behind / synchronous (< 1 is a speed-up), the staleness each step trained at, and the
reward after training of both (the learning must hold). The episodes are real Docker episodes
of the tiny profile; the engine is the `hf` one in this process unless overrides say otherwise,
so on a small CPU the engine and the trainer share the same cores: what overlap buys there is
bounded by that, and the numbers say so.

The measurement after training is on the training tasks (bench/learning.py's), not a held-out
set: held-out Pass@1 of a tiny profile run is `make eval` on swe-toy's test split.

Run: .venv/bin/python bench/train_async.py [--steps 10] [--eval-samples 32] [--sft PATH]
     [--out runs/bench-train-async] [overrides a.b=v ...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from learning import LearningResult, learning_run  # noqa: E402

from deepswe.train.sft import SFTConfig  # noqa: E402

PARTS = ("generation_wall", "generation_exposed", "update", "push_weights", "step")


def _median(result: LearningResult, key: str) -> float:
    values = [r.get(f"time/{key}", 0.0) for r in result.steps[1:]] or [0.0]
    return statistics.median(values)  # step 1 of a one-behind run has nothing to overlap


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("runs/bench-train-async"))
    ap.add_argument("--steps", type=int, default=10, help="GRPO++ steps of each run")
    ap.add_argument("--eval-samples", type=int, default=32, help="episodes per task per measure")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sft", type=Path, default=None, help="reuse this SFT checkpoint")
    ap.add_argument("overrides", nargs="*", help="extra tiny.yaml overrides a.b=value")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    sft_model = args.sft or args.out / "sync" / "model-sft"
    runs: dict[str, LearningResult] = {}
    for name, staleness in (("sync", 0), ("behind", 1)):
        print(f"== {name}: rollout.max_staleness={staleness}", flush=True)
        runs[name] = learning_run(
            args.out / name,
            steps=args.steps,
            eval_samples=args.eval_samples,
            seed=args.seed,
            sft=SFTConfig(seed=args.seed),
            sft_model=sft_model,
            extra=[*args.overrides, f"rollout.max_staleness={staleness}"],
        )
    sync, behind = runs["sync"], runs["behind"]
    print("\nstep  reward sync  reward behind  staleness  step_s sync  step_s behind")
    for a, b in zip(sync.steps, behind.steps, strict=True):
        print(
            f"{a['step']:4d}  {a['reward/mean']:11.3f}  {b['reward/mean']:13.3f}  "
            f"{b.get('staleness/max', 0):9.0f}  {a['time/step']:11.1f}  {b['time/step']:13.1f}"
        )
    print("\nmedian seconds a step (steps 2 on):  " + "  ".join(PARTS))
    table = {}
    for name, r in runs.items():
        table[name] = {k: round(_median(r, k), 2) for k in PARTS}
        print(f"  {name:7s} " + "  ".join(f"{table[name][k]:.2f}" for k in PARTS))
    ratio = table["behind"]["step"] / table["sync"]["step"] if table["sync"]["step"] else 0.0
    print(f"\nstep time one-behind / synchronous (baseline): {ratio:.2f}x")
    for name, r in runs.items():
        print(f"  {name}: reward {r.baseline:.3f} (SFT) -> {r.final:.3f} after {args.steps} steps")
    summary = {
        "steps": args.steps,
        "eval_samples": args.eval_samples,
        "seed": args.seed,
        "median_seconds": table,
        "step_ratio_behind_over_sync": round(ratio, 3),
        "runs": {
            n: {
                "baseline": r.baseline,
                "final": r.final,
                "curve": [s["reward/mean"] for s in r.steps],
                "seconds": r.seconds,
            }
            for n, r in runs.items()
        },
        "measured": time.strftime("%Y-%m-%d"),
    }
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(f"summary: {args.out / 'summary.json'}")


if __name__ == "__main__":
    main()
