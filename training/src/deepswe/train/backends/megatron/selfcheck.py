"""Check the megatron backend against the hf backend on N tensor-parallel ranks (CPU, gloo).

    python -m deepswe.train.backends.megatron.selfcheck MODEL_DIR --tp 2 [--out report.json]

Spawns `tp` processes (file:// rendezvous, no port), each building MegatronBackend with
tensor_parallel = tp; on the same random batch they compute log-probs and take one GRPO++ step.
The parent does the same with HFBackend and prints (and writes) the largest differences as JSON:
{"tp", "logprob_max_diff", "loss", "loss_hf", "grad_norm", "grad_norm_hf", "weight_max_diff"}.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from deepswe.train.algos import loss_denominator
from deepswe.train.backends import OptimConfig, UpdateBatch
from deepswe.train.rollout import RolloutBatch

# eps 1e-3: see test_train_megatron_parity.py (Adam amplifies rounding on near-zero gradients);
# grad_clip 1e-3 so the clipped path is compared too.
OPTIM = OptimConfig(lr=1e-2, adam_eps=1e-3, grad_clip=1e-3)


def random_batch(vocab: int, seed: int = 0) -> UpdateBatch:
    """3 right-padded rows of 12 random tokens (prompt: the first 4), advantages +-, and
    old log-probs that make importance ratios away from 1 (0 until the backend fills them)."""
    g = torch.Generator().manual_seed(seed)
    attn = torch.ones(3, 12, dtype=torch.long)
    attn[1, 9:], attn[2, 6:] = 0, 0
    ids = torch.randint(3, vocab, (3, 12), generator=g) * attn
    mask = attn.bool().clone()
    mask[:, :4] = False
    noise = 1.0 * (torch.rand(3, 12, generator=g) - 0.5) * mask
    rewards = torch.tensor([1.0, 0.0, 0.0])
    rb = RolloutBatch(ids, attn, mask.long(), noise, rewards, torch.zeros(3, dtype=torch.long), ["submitted"] * 3)  # fmt: skip
    adv = (rewards - rewards.mean())[:, None] * mask
    return UpdateBatch(rb, adv, mask, loss_denominator(mask, "seq-sum-constant", 4))


def run_backend(backend, upd: UpdateBatch) -> dict:
    """Log-probs, then one step with old_logprobs = those log-probs + the batch's noise."""
    lp = backend.forward_logprobs(upd.rollout)
    upd.rollout.old_logprobs = (lp + upd.rollout.old_logprobs) * upd.loss_mask
    stats = backend.train_step(upd)
    return {"lp": lp, "loss": stats.loss, "norm": stats.grad_norm, "w": backend.state_dict()}


def _rank(rank: int, model_dir: str, tp: int, init: str, out: str) -> None:
    from deepswe.train.backends.megatron import MegatronBackend
    from deepswe.train.backends.megatron.model import ParallelConfig

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=tp)
    mg = MegatronBackend(model_dir, optim=OPTIM, parallel=ParallelConfig(tensor_parallel=tp))
    vocab = mg.hf_config.vocab_size
    res = run_backend(mg, random_batch(vocab))
    res["qkv_rows"] = mg.gpt.decoder.layers[0].self_attention.linear_qkv.weight.shape[0]
    torch.save(res, f"{out}/rank{rank}.pt")
    dist.destroy_process_group()


def check(model_dir: str | Path, tp: int) -> dict:
    from deepswe.train.backends.hf import HFBackend

    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(_rank, args=(str(model_dir), tp, f"file://{tmp}/rdzv", tmp), nprocs=tp)
        ranks = [torch.load(f"{tmp}/rank{r}.pt", weights_only=True) for r in range(tp)]
    hf = HFBackend(model_dir, optim=OPTIM)
    ref = run_backend(hf, random_batch(hf.model.config.vocab_size))
    worst = lambda f: max(f(r) for r in ranks)  # noqa: E731
    return {
        "tp": tp,
        "qkv_rows_per_rank": [int(r["qkv_rows"]) for r in ranks],
        "logprob_max_diff": worst(lambda r: (r["lp"] - ref["lp"]).abs().max().item()),
        "loss": [r["loss"] for r in ranks],
        "loss_hf": ref["loss"],
        "grad_norm": [r["norm"] for r in ranks],
        "grad_norm_hf": ref["norm"],
        "weight_max_diff": worst(
            lambda r: max((r["w"][k] - ref["w"][k]).abs().max().item() for k in ref["w"])
        ),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model_dir", help="HF Qwen3 checkpoint folder (local)")
    p.add_argument("--tp", type=int, default=2, help="tensor-parallel ranks (processes)")
    p.add_argument("--out", type=Path, default=None, help="also write the JSON report here")
    a = p.parse_args()
    report = json.dumps(check(a.model_dir, a.tp), indent=1)
    print(report)
    if a.out:
        a.out.write_text(report)


if __name__ == "__main__":
    main()
