"""TRL's GRPOTrainer on our SWE tasks through our OpenEnv server, on CPU (issue #46).

    make trl-openenv                     # swe-toy, the tiny model, 3 GRPO steps (a few minutes)
    .venv/bin/python examples/trl_openenv/train_grpo.py --out runs/trl-openenv \\
        [--server http://HOST:PORT]      # a server already running (else one is started here)
        [--model runs/models/tiny-qwen3-sft] [--tasks runs/data/swe-toy/train.jsonl] [--steps 3]

Each GRPO step takes `--tasks-per-step` tasks, runs `--num-generations` episodes of each as
sessions of a `deepswe-eval serve` server (real Docker sandboxes, R2E-Gym's tools, DeepSWE's
prompts), samples every reply from the model TRL is training (rollout.py), and trains on the
grader's rewards: 1.0 resolved, 0.0 otherwise, None (masked) for infra_error. The run folder
gets `reward_curve.jsonl` (a line per step: rewards, outcomes, timings), `reward_curve.png`,
TRL's own log (`trl_log.jsonl`), the server's profile, log and pid, and `run.json` (these
options).

The model defaults to the tiny profile's SFT warm start when it exists (make reproduce or
`deepswe-train sft` writes it), else the untrained tiny model (`deepswe-train init-model`),
whose replies call no tool: every episode then ends at the step limit, unresolved.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from rollout import OpenEnvRollout, env_reward  # noqa: E402

from deepswe.eval.openenv.process import ServerDidNotStart, start_serve  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
MODELS = (REPO / "runs/models/tiny-qwen3-sft", REPO / "runs/models/tiny-qwen3")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", type=Path, default=REPO / "runs/trl-openenv", help="the run folder")
    p.add_argument("--server", help="URL of a running server; default: start one on --tasks")
    p.add_argument("--tasks", type=Path, default=REPO / "runs/data/swe-toy/train.jsonl")
    p.add_argument("--model", type=Path, help="default: the tiny SFT start, else the tiny model")
    p.add_argument("--steps", type=int, default=3, help="GRPO optimizer steps")
    p.add_argument("--tasks-per-step", type=int, default=2)
    p.add_argument("--num-generations", type=int, default=4, help="episodes per task (G)")
    p.add_argument("--max-turns", type=int, default=4, help="the server's episode.max_steps")
    p.add_argument("--max-new-tokens", type=int, default=192, help="tokens per reply")
    p.add_argument("--learning-rate", type=float, default=3e-4, help="configs/tiny.yaml's")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def start_server(args: argparse.Namespace, sessions: int) -> tuple[str, subprocess.Popen]:
    """`deepswe-eval serve` over `args.tasks` with the tiny profile's episode (its scaffold,
    training prompts, step limit), waiting until it answers; the profile is in the run folder."""
    section = {
        "tasks": str(args.tasks),
        "max_sessions": sessions,
        "seed": args.seed,
        "episode": {"max_steps": args.max_turns, "prompt_variant": "train", "scaffold": "deepswe"},
        "sandbox": {"cpus": 1, "memory": "2g", "pids": 512},
    }
    try:
        server = start_serve(section, args.out)
    except ServerDidNotStart as exc:
        raise SystemExit(str(exc)) from None
    (args.out / "server.pid").write_text(f"{server.proc.pid}\n")  # its sandboxes carry this label
    return server.url, server.proc


def task_ids(path: Path) -> list[str]:
    return [json.loads(line)["instance_id"] for line in path.read_text().splitlines() if line]


def train(args: argparse.Namespace, url: str) -> list[dict]:
    """The GRPO run; returns TRL's log history."""
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    ids = task_ids(args.tasks)
    rows = args.steps * args.tasks_per_step
    dataset = Dataset.from_dict({"prompt": [ids[i % len(ids)] for i in range(rows)]})
    batch = args.tasks_per_step * args.num_generations
    config = GRPOConfig(
        output_dir=str(args.out / "trl"),
        per_device_train_batch_size=batch,
        gradient_accumulation_steps=1,
        num_generations=args.num_generations,
        max_steps=args.steps,
        learning_rate=args.learning_rate,
        temperature=args.temperature,
        beta=0.0,  # no reference model: GRPO++ (DeepSWE) drops the KL term too
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        seed=args.seed,
        max_completion_length=args.max_turns * (args.max_new_tokens + 2048),
    )
    trainer = GRPOTrainer(
        model=str(args.model),
        processing_class=AutoTokenizer.from_pretrained(str(args.model)),
        reward_funcs=[env_reward],
        train_dataset=dataset,
        args=config,
        rollout_func=OpenEnvRollout(url, args.max_new_tokens, args.out / "reward_curve.jsonl"),
    )
    trainer.train()
    return trainer.state.log_history


def plot_curve(curve: Path, out: Path) -> None:
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lines = [json.loads(x) for x in curve.read_text().splitlines() if x]
    steps = [x["step"] for x in lines]
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.plot(steps, [x["reward_mean"] for x in lines], marker="o")
    for x in lines:
        scored = [r for r in x["rewards"] if r is not None]
        ax.scatter([x["step"]] * len(scored), scored, s=8, alpha=0.4, color="grey")
    ax.set(xlabel="GRPO step", ylabel="reward (grader, via OpenEnv)", ylim=(-0.05, 1.05))
    ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    ax.set_title("TRL GRPOTrainer on swe-toy through deepswe-eval serve", fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=100)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.model = args.model or next((m for m in MODELS if m.is_dir()), None)
    if args.model is None or not args.model.is_dir():
        raise SystemExit("no model: make runs/models/tiny-qwen3 (deepswe-train init-model) first")
    if not args.server and not args.tasks.is_file():
        raise SystemExit(f"no task file at {args.tasks}: run `make data` (swe-toy) first")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "reward_curve.jsonl").unlink(missing_ok=True)
    (args.out / "run.json").write_text(json.dumps(vars(args), default=str, indent=1))
    proc = None
    url = args.server
    if url is None:
        url, proc = start_server(args, sessions=args.tasks_per_step * args.num_generations)
    try:
        history = train(args, url)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=60)
    (args.out / "trl_log.jsonl").write_text("".join(json.dumps(h) + "\n" for h in history))
    plot_curve(args.out / "reward_curve.jsonl", args.out / "reward_curve.png")
    for line in (args.out / "reward_curve.jsonl").read_text().splitlines():
        x = json.loads(line)
        print(f"step {x['step']}: reward {x['reward_mean']}, outcomes {x['outcomes']}")
    print(f"trl-openenv: reward curve in {args.out / 'reward_curve.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
