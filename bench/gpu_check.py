"""The one-GPU check of the deepswe-32b path's parts (training/README.md, "Hybrid workers"): on one
NVIDIA GPU, in a few minutes, a line per check:

    cuda               the device, its memory
    hf-cuda-parity     hf backend on CUDA vs on CPU: log-probs and one clipped step's weights
    megatron-cuda      the megatron backend on CUDA against the hf backend (log-probs, a step)
    megatron-bf16-resume  bf16 with fp32 main weights, recomputation, a sharded checkpoint on
                       CUDA: one step, save, load, one step = two steps, bit for bit
    vllm-colocated     vLLM in this process: sample, sleep (memory given back), wake, take the
                       trained weights in place, then greedy tokens equal the hf engine's
    grpo-resume        three GRPO++ steps on the `text` source (hf engine and backend on CUDA),
                       and the same run stopped after two and resumed: equal weights

    python bench/gpu_check.py [--out runs/gpu-check.json] [--require-gpu] [--cpu]

Without a CUDA device every check is skipped (exit 0; `--require-gpu` makes it exit 2), so `make
bench` passes on CPU machines. A check that cannot run for want of a part says SKIP with the
reason; a failed check exits 1 after all have run. `--cpu` runs the megatron checks on the CPU
instead (gloo; the tests do, so the script's own code is exercised where no GPU is); it proves
nothing about CUDA. vLLM must be installed in this
interpreter (one GPU virtualenv: CONSTRAINTS= make setup, then pip install vllm).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import torch

PROMPT = [{"role": "user", "content": "Write a word with the letter s."}]
DEVICE = "cuda"  # --cpu: "cpu", for the megatron checks only


def _model(tmp: Path) -> Path:
    from deepswe.train.models import build_test_model

    # head_dim 32 (hidden 64 / 2 heads): a shape vLLM's attention backends serve
    return build_test_model(tmp / "model", heads=2, kv_heads=1)


def check_cuda(tmp: Path) -> str:
    p = torch.cuda.get_device_properties(0)
    return f"{p.name}, {p.total_memory / 2**30:.0f} GiB, {torch.cuda.device_count()} device(s)"


def _trained_pair(model: Path, device: str):
    from deepswe.train.backends.hf import HFBackend
    from deepswe.train.backends.megatron.selfcheck import OPTIM, random_batch, run_backend

    torch.manual_seed(0)
    backend = HFBackend(model, optim=OPTIM, device=device)
    res = run_backend(backend, random_batch(backend.model.config.vocab_size))
    return backend, res


def check_hf_parity(tmp: Path) -> str:
    model = _model(tmp)
    _, gpu = _trained_pair(model, "cuda")
    _, cpu = _trained_pair(model, "cpu")
    lp = (gpu["lp"].cpu() - cpu["lp"]).abs().max().item()
    w = max((gpu["w"][k].cpu() - cpu["w"][k]).abs().max().item() for k in cpu["w"])
    if lp > 1e-3 or w > 1e-3:
        raise AssertionError(f"log-probs differ by {lp:.1e}, weights by {w:.1e}")
    return f"log-probs within {lp:.1e}, weights after a clipped step within {w:.1e}"


def check_megatron_cuda(tmp: Path) -> str:
    """fp32 on CUDA (NCCL world of one, megatron's CUDA RNG tracker) against the hf backend on
    CPU: log-probs and the clipped step's weights."""
    from deepswe.train.backends.megatron import MegatronBackend
    from deepswe.train.backends.megatron.selfcheck import OPTIM, random_batch, run_backend

    model = _model(tmp)
    mg = MegatronBackend(model, optim=OPTIM, device=DEVICE)
    got = run_backend(mg, random_batch(mg.hf_config.vocab_size))
    _, cpu = _trained_pair(model, "cpu")
    lp = (got["lp"] - cpu["lp"]).abs().max().item()
    w = max((got["w"][k].cpu() - cpu["w"][k]).abs().max().item() for k in cpu["w"])
    if lp > 1e-3 or w > 1e-3:  # the hf-cuda-parity tolerance
        raise AssertionError(f"log-probs differ from hf by {lp:.1e}, weights by {w:.1e}")
    return f"vs hf on CPU: log-probs within {lp:.1e}, weights after a clipped step within {w:.1e}"


def check_megatron_bf16_resume(tmp: Path) -> str:
    """bf16 through fp32 main weights, the distributed optimizer, full recomputation, a sharded
    (DCP) checkpoint on CUDA: two steps straight = one step, save, load, one step."""
    from deepswe.train.backends.megatron import MegatronBackend
    from deepswe.train.backends.megatron.model import MegatronOptions
    from deepswe.train.backends.megatron.selfcheck import OPTIM, random_batch

    model = _model(tmp)
    opts = MegatronOptions(distributed_optimizer=True, recompute="full")

    def build() -> MegatronBackend:
        return MegatronBackend(model, optim=OPTIM, dtype="bfloat16", device=DEVICE, options=opts)

    vocab = build().hf_config.vocab_size
    u1, u2 = random_batch(vocab, 0), random_batch(vocab, 1)
    start = build()  # old log-probs near the policy's, so the ratios are not all clipped
    for u in (u1, u2):
        u.rollout.old_logprobs = (
            start.forward_logprobs(u.rollout) + u.rollout.old_logprobs
        ) * u.loss_mask
    straight = build()
    s1, s2 = straight.train_step(u1), straight.train_step(u2)
    first = build()
    first.train_step(u1)
    first.save(tmp / "ckpt")
    resumed = build()
    resumed.load(tmp / "ckpt")
    resumed.train_step(u2)
    want, got = straight.state_dict(), resumed.state_dict()
    bad = [k for k in want if not torch.equal(got[k], want[k])]
    if bad:
        raise AssertionError(f"resumed weights differ from the straight run's: {bad[:3]}")
    files = len(list((tmp / "ckpt" / "dist").glob("*.distcp")))
    return (
        f"bf16 + fp32 main weights, recompute full: losses {s1.loss:.4f}, {s2.loss:.4f}; "
        f"resumed from {files} DCP shard file(s) bit-equal"
    )


def check_vllm_colocated(tmp: Path) -> str:
    try:
        import vllm  # noqa: F401
    except ImportError:
        raise Skip("vLLM is not installed in this interpreter") from None
    from deepswe.train.backends import hf_weights
    from deepswe.train.engines.hf import HFEngine
    from deepswe.train.engines.vllm_colocated import ColocatedVLLMEngine

    model = _model(tmp)
    backend, _ = _trained_pair(model, "cuda")
    engine = ColocatedVLLMEngine(
        model, dtype="float32", gpu_memory_utilization=0.3, max_model_len=1024
    )
    before = engine.sample(PROMPT, 1, 0.0, 16)[0].token_ids
    free0 = torch.cuda.mem_get_info()[0]
    engine.sleep(2)
    freed = torch.cuda.mem_get_info()[0] - free0
    engine.wake_up(["weights"])
    n = engine.load_weights(hf_weights(backend))
    engine.wake_up(["kv_cache"])
    after = engine.sample(PROMPT, 1, 0.0, 16)[0].token_ids
    ref = HFEngine(model, device="cuda")
    ref.update_weights(backend.state_dict())
    want = ref.sample(PROMPT, 1, 0.0, 16)[0].token_ids
    if after != want:
        raise AssertionError(f"greedy tokens after the sync {after} != the hf engine's {want}")
    if freed <= 0:
        raise AssertionError("sleep(2) gave no memory back")
    changed = "changed" if after != before else "unchanged (greedy tokens equal before and after)"
    return (
        f"slept ({freed / 2**20:.0f} MiB given back), woke, loaded {n} tensors in place; "
        f"greedy tokens equal the hf engine's, {changed}"
    )


def check_grpo_resume(tmp: Path) -> str:
    from deepswe.train.config import validate
    from deepswe.train.trainer import Trainer

    def cfg(steps: int):
        return validate(
            {
                "run": {"seed": 7, "steps": steps, "save_every": 1, "tensorboard": False},
                "model": {"path": str(_model(tmp)), "device": "cuda"},
                "data": {"source": "text", "text": {"target": "s"}},
                "rollout": {
                    "tasks_per_step": 2,
                    "group_size": 4,
                    "concurrency": 4,
                    "max_tokens_per_turn": 6,
                },
                "backend": {"optim": {"lr": 1e-2, "micro_batch_size": 4}},
                "algo": {"loss_constant": 8},
            }
        )

    straight = Trainer.setup(cfg(3), tmp / "straight")
    records = straight.train()
    Trainer.setup(cfg(2), tmp / "resumed").train()
    resumed = Trainer.setup(cfg(3), tmp / "resumed", resume=True)
    resumed.train()
    a, b = straight.backend.state_dict(), resumed.backend.state_dict()
    diff = max((a[k] - b[k]).abs().max().item() for k in a)
    if diff != 0.0:
        raise AssertionError(f"resumed weights differ from the straight run's by {diff:.1e}")
    rewards = [r["reward/mean"] for r in records]
    return f"3 steps (reward {rewards}), resumed after 2: weights equal bit for bit"


class Skip(Exception):
    pass


CHECKS: list[tuple[str, Callable[[Path], str]]] = [
    ("cuda", check_cuda),
    ("hf-cuda-parity", check_hf_parity),
    ("megatron-cuda", check_megatron_cuda),
    ("megatron-bf16-resume", check_megatron_bf16_resume),
    ("vllm-colocated", check_vllm_colocated),
    ("grpo-resume", check_grpo_resume),
]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=None, help="also write the results as JSON")
    p.add_argument("--require-gpu", action="store_true", help="exit 2 without a CUDA device")
    p.add_argument("--cpu", action="store_true", help="run the megatron checks on CPU (a dry run)")
    a = p.parse_args()
    results, checks = [], CHECKS
    if a.cpu:
        global DEVICE
        DEVICE, checks = "cpu", [c for c in CHECKS if c[0].startswith("megatron")]
        print("DRY RUN on CPU: the megatron checks' code, not CUDA")
    elif not torch.cuda.is_available():
        print("SKIP all: no CUDA device here (run this on a machine with one NVIDIA GPU)")
        return 2 if a.require_gpu else 0
    for name, fn in checks:
        t0 = time.monotonic()
        with tempfile.TemporaryDirectory() as tmp:
            try:
                status, detail = "PASS", fn(Path(tmp))
            except Skip as e:
                status, detail = "SKIP", str(e)
            except Exception as e:  # one failed check must not hide the others
                status, detail = "FAIL", f"{type(e).__name__}: {e}"
                traceback.print_exc(file=sys.stderr)
        seconds = time.monotonic() - t0
        print(f"{status:<5} {name:<20} {seconds:6.1f} s  {detail}", flush=True)
        results.append({"check": name, "status": status, "seconds": seconds, "detail": detail})
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(results, indent=1))
    return 1 if any(r["status"] == "FAIL" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
