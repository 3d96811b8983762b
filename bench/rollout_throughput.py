"""Rollouts at their own pace: lock-step batches against continuous batching, on vLLM's CPU engine.

64 episodes (threads), each a few turns of: ask the engine for a reply, then wait out a tool
call. Reply lengths and tool latencies are drawn from a spread (seeded), the same plan for both
ways of serving:
- lock-step (the baseline, what a hybrid rank's model-parallel fan-out serves with:
  engines/batching.py): requests that arrive while a generate call runs wait for it, and go
  together into the next one, which runs to its longest reply;
- continuous (`ColocatedVLLMEngine.submit`, as vLLM's server and rLLM's async engine serve):
  each request joins the running batch at the next decoding step, and its episode goes on to
  its tool call the moment its reply ends.
Prints, for each: wall seconds, episodes/s, generated tokens/s, the engine's busy share (time in
decoding steps or generate calls over the wall), and continuous / lock-step as ratios (issue #44's
goal: >= 2x episodes/s). The model is the project's tiny random Qwen-shaped one
(deepswe.train.models.build_test_model): it almost never samples its end token, so each reply is
as long as the plan asks. Tool calls are sleeps: what they cost is the wait, not CPU.

Run: .venv/bin/python bench/rollout_throughput.py [--episodes 64] [--turns 4] [--seed 0]
     [--out runs/bench-rollout-throughput.json]
Needs vLLM's CPU build in .venv-vllm (infra/vllm/install-cpu.sh); without it, says so and exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPLY_TOKENS = (8, 16, 32, 64, 128, 256)  # a spread: most replies short, some long
TOOL_S = (0.05, 0.1, 0.2, 0.5, 1.0)  # file views and greps, then a test run or two
PROMPT_TOKENS, OBSERVATION_TOKENS = 48, 24


def plan(episodes: int, turns: int, seed: int) -> list[list[tuple[int, float]]]:
    """(reply tokens, tool seconds) for each turn of each episode: the same for both modes."""
    rng = random.Random(seed)
    return [
        [(rng.choice(REPLY_TOKENS), rng.choice(TOOL_S)) for _ in range(turns)]
        for _ in range(episodes)
    ]


def run_mode(engine, mode: str, schedule: list[list[tuple[int, float]]], seed: int) -> dict:
    """Every episode of `schedule` at once, served `mode` ("lockstep" | "continuous")."""
    from deepswe.train.engines.batching import LockStepBatches

    batches = LockStepBatches(engine.sample_many)
    tokens = [0] * len(schedule)
    errors: list[BaseException] = []

    def sample(prompt: list[int], max_tokens: int) -> list[int]:
        # unseeded: vLLM's CPU build cannot sample a seeded request whose prefill is split
        # across steps ("CPU Generator does not use offset"), which 64 long prompts at once
        # cause; the plan, not the tokens, decides the lengths
        request = (prompt, 1, 1.0, max_tokens, None)
        if mode == "lockstep":
            return batches.sample(request)[0].token_ids
        return engine.submit(*request).result()[0].token_ids

    def episode(i: int) -> None:
        try:
            rng = random.Random(seed * 1000 + i)
            context = [rng.randrange(5, 1000) for _ in range(PROMPT_TOKENS)]
            for reply, tool_s in schedule[i]:
                ids = sample(context, reply)
                tokens[i] += len(ids)
                time.sleep(tool_s)  # the tool call
                context += ids + [rng.randrange(5, 1000) for _ in range(OBSERVATION_TOKENS)]
        except BaseException as e:  # a bench records what broke
            errors.append(e)

    busy0 = engine.busy_s
    t0 = time.monotonic()
    threads = [threading.Thread(target=episode, args=(i,)) for i in range(len(schedule))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    if errors:
        raise errors[0]
    busy = engine.busy_s - busy0
    return {
        "mode": mode,
        "wall_s": round(wall, 2),
        "episodes_per_s": round(len(schedule) / wall, 3),
        "tokens_per_s": round(sum(tokens) / wall, 1),
        "tokens": sum(tokens),
        "engine_busy_share": round(busy / wall, 3),
        "generate_calls": batches.batches if mode == "lockstep" else None,
    }


def inner(model: str, out: Path, episodes: int, turns: int, seed: int) -> None:
    """In vLLM's interpreter: one engine, a warm-up, then both modes on the same plan."""
    from deepswe.train.engines.vllm_colocated import ColocatedVLLMEngine

    engine = ColocatedVLLMEngine(model, dtype="float32", max_model_len=2048)
    schedule = plan(episodes, turns, seed)
    engine.sample(list(range(5, 40)), 1, 1.0, 16, seed=0)  # warm-up, not timed
    results = [run_mode(engine, m, schedule, seed) for m in ("lockstep", "continuous")]
    out.write_text(json.dumps(results, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=64)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path("runs/bench-rollout-throughput.json"))
    ap.add_argument("--inner", nargs=2, metavar=("MODEL", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.episodes < 1 or args.turns < 1:
        ap.error("--episodes and --turns must be at least 1")
    if args.inner:
        inner(args.inner[0], Path(args.inner[1]), args.episodes, args.turns, args.seed)
        return
    from deepswe.train.engines.vllm_server import SRC_DIR, find_python
    from deepswe.train.models import build_test_model

    try:
        python = find_python()
    except FileNotFoundError as e:
        print(f"bench/rollout_throughput.py: {e}; skipped")
        return
    with tempfile.TemporaryDirectory() as tmp:
        # head_dim 32: vLLM's CPU attention has no 16
        model = build_test_model(Path(tmp) / "model", heads=2, kv_heads=1, seed=0)
        raw = Path(tmp) / "results.json"
        env = dict(
            os.environ,
            PYTHONPATH=str(SRC_DIR),
            VLLM_CPU_KVCACHE_SPACE="1",
            VLLM_CPU_OMP_THREADS_BIND="nobind",
        )
        cmd = [str(python), __file__, "--inner", str(model), str(raw)]
        cmd += ["--episodes", str(args.episodes), "--turns", str(args.turns)]
        cmd += ["--seed", str(args.seed)]
        print(f"{args.episodes} episodes x {args.turns} turns, both modes...", flush=True)
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600)
        if done.returncode != 0:
            sys.exit(f"bench failed:\n{done.stderr[-4000:]}")
        results = json.loads(raw.read_text())
    lock, cont = results
    print(
        "| mode | wall s | episodes/s | generated tokens/s | engine busy share | generate calls |"
    )
    print("|---|---|---|---|---|---|")
    for r in results:
        calls = r["generate_calls"] if r["generate_calls"] is not None else "-"
        print(
            f"| {r['mode']} | {r['wall_s']} | {r['episodes_per_s']} | {r['tokens_per_s']} | "
            f"{r['engine_busy_share']} | {calls} |"
        )
    ratio = cont["episodes_per_s"] / lock["episodes_per_s"]
    tok_ratio = cont["tokens_per_s"] / lock["tokens_per_s"]
    print(
        f"\ncontinuous / lock-step (baseline): episodes/s {ratio:.2f}x, generated tokens/s "
        f"{tok_ratio:.2f}x (goal >= 2x episodes/s); same plan, seed {args.seed}, "
        f"vLLM CPU build, tiny model, {os.cpu_count()} cores"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    summary = {"episodes": args.episodes, "turns": args.turns, "seed": args.seed}
    summary.update(results=results, episodes_per_s_ratio=round(ratio, 3))
    args.out.write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
