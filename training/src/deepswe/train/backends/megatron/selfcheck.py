"""Check the megatron backend against the hf backend on TP x DP ranks (CPU, gloo).

    python -m deepswe.train.backends.megatron.selfcheck MODEL_DIR --tp 2 [--dp 2] [--rows 3]
        [--resume] [--out report.json]

Spawns tp * dp processes (file:// rendezvous, no port), each building MegatronBackend with
tensor_parallel = tp (the world's remaining factor is data parallelism); on the same random batch
they compute log-probs and take one GRPO++ step. The parent does the same with HFBackend and
prints (and writes) the largest differences as JSON: {"tp", "dp", "rows_per_dp_rank",
"qkv_rows_per_rank", "logprob_max_diff", "loss", "loss_hf", "grad_norm", "grad_norm_hf",
"weight_max_diff", "ranks_identical"}. With --resume: two steps straight against one step, save,
load into a fresh backend, one step: {"tp", "dp", "files", "resumed_equal", "rng_restored"}.
--distributed-optimizer shards the AdamW state over DP in either check; `check_zero` compares it
with the unsharded optimizer on the same ranks, `check_reshard` saves on TP 2 and resumes on
TP 1 x DP 2 (sharded checkpoints are read back by another layout).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
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


def random_batch(vocab: int, seed: int = 0, rows: int = 3) -> UpdateBatch:
    """`rows` right-padded rows of 12 random tokens (real lengths 12, 9, 6, 12, ...; prompt: the
    first 4), rewards 1, 0, 0, 1, ... with advantages +-, and old log-probs that make importance
    ratios away from 1 (0 until the backend fills them)."""
    g = torch.Generator().manual_seed(seed)
    attn = torch.ones(rows, 12, dtype=torch.long)
    for i in range(rows):
        attn[i, (12, 9, 6)[i % 3] :] = 0
    ids = torch.randint(3, vocab, (rows, 12), generator=g) * attn
    mask = attn.bool().clone()
    mask[:, :4] = False
    noise = 1.0 * (torch.rand(rows, 12, generator=g) - 0.5) * mask
    rewards = torch.tensor([(1.0, 0.0, 0.0)[i % 3] for i in range(rows)])
    rb = RolloutBatch(
        ids,
        attn,
        mask.long(),
        noise,
        rewards,
        torch.zeros(rows, dtype=torch.long),
        ["submitted"] * rows,
    )
    baseline = rewards.mean() if rows > 1 else 0.5  # a lone row's own mean would zero it
    adv = (rewards - baseline)[:, None] * mask
    return UpdateBatch(rb, adv, mask, loss_denominator(mask, "seq-sum-constant", 4))


def run_backend(backend, upd: UpdateBatch) -> dict:
    """Log-probs, then one step with old_logprobs = those log-probs + the batch's noise."""
    lp = backend.forward_logprobs(upd.rollout)
    upd.rollout.old_logprobs = (lp + upd.rollout.old_logprobs) * upd.loss_mask
    stats = backend.train_step(upd)
    return {"lp": lp, "loss": stats.loss, "norm": stats.grad_norm, "w": backend.state_dict()}


def _step(build, vocab: int, rows: int, tmp: str) -> dict:
    from megatron.core import parallel_state as ps

    from deepswe.train.backends.megatron.groups import dp_share

    mg = build()
    res = run_backend(mg, random_batch(vocab, rows=rows))
    res["qkv_rows"] = mg.gpt.decoder.layers[0].self_attention.linear_qkv.weight.shape[0]
    share = dp_share(rows, ps.get_data_parallel_rank(), ps.get_data_parallel_world_size())
    res["dp_rows"] = share.stop - share.start
    # The streamed export (hybrid workers' weight sync): the state dict, one tensor at a time.
    streamed = list(mg.iter_hf_weights())
    names = [n for n, _ in streamed]
    res["stream_equal"] = len(names) == len(set(names)) == len(res["w"]) and all(
        torch.equal(t, res["w"][n]) for n, t in streamed
    )
    return res


def _zero(build, vocab: int, rows: int, tmp: str) -> dict:
    """Two steps with the optimizer unsharded, then sharded over DP: the same bits."""
    from deepswe.train.backends.megatron.model import MegatronOptions

    u1, u2 = random_batch(vocab, 0, rows), random_batch(vocab, 1, rows)
    out = {}
    for sharded in (False, True):
        b = build(MegatronOptions(distributed_optimizer=sharded))
        b.train_step(u1)
        b.train_step(u2)
        out[sharded] = (b.state_dict(), b.optimizer.state_bytes(), len(b.optimizer.mine))
    (w0, bytes0, n0), (w1, bytes1, n1) = out[False], out[True]
    return {
        "equal": all(torch.equal(w0[k], w1[k]) for k in w0),
        "bytes": [bytes0, bytes1],
        "owned": [n0, n1],
    }


def _reshard_save(build, vocab: int, rows: int, tmp: str) -> dict:
    """On the saving layout: the straight two-step weights, and a checkpoint after one step."""
    u1, u2 = random_batch(vocab, 0, rows), random_batch(vocab, 1, rows)
    straight = build()
    straight.train_step(u1)
    straight.train_step(u2)
    want = straight.state_dict()  # collective under TP
    if dist.get_rank() == 0:
        torch.save(want, f"{tmp}/straight.pt")
    first = build()
    first.train_step(u1)
    first.save(Path(tmp) / "ckpt")
    return {}


def _reshard_load(build, vocab: int, rows: int, tmp: str) -> dict:
    """On another layout: load, step, compare with the straight run; the control loads the
    weights only (fresh AdamW) to show what a lost optimizer state would cost."""
    from deepswe.train.backends.megatron.backend import read_hf_weights
    from deepswe.train.backends.megatron.model import MegatronOptions

    u2 = random_batch(vocab, 1, rows)
    want = torch.load(f"{tmp}/straight.pt", weights_only=True)
    diff = lambda w: max((w[k] - want[k]).abs().max().item() for k in want)  # noqa: E731
    resumed = build(MegatronOptions(distributed_optimizer=True))
    resumed.load(Path(tmp) / "ckpt")
    resumed.train_step(u2)
    control = build(MegatronOptions(distributed_optimizer=True))
    control.load_hf_state(read_hf_weights(Path(tmp) / "ckpt" / "model"))
    control.train_step(u2)
    return {"diff": diff(resumed.state_dict()), "control_diff": diff(control.state_dict())}


def _resume(build, vocab: int, rows: int, tmp: str) -> dict:
    u1, u2 = random_batch(vocab, 0, rows), random_batch(vocab, 1, rows)
    straight = build()
    straight.train_step(u1)
    straight.train_step(u2)
    first = build()
    first.train_step(u1)
    torch.manual_seed(123 + dist.get_rank())
    first.save(Path(tmp) / "ckpt")
    expected_rng = torch.rand(3)
    resumed = build()
    resumed.load(Path(tmp) / "ckpt")
    rng_restored = torch.equal(torch.rand(3), expected_rng)
    resumed.train_step(u2)
    want, got = straight.state_dict(), resumed.state_dict()
    return {"equal": all(torch.equal(got[k], want[k]) for k in want), "rng": rng_restored}


TASKS = {
    "step": _step,
    "resume": _resume,
    "zero": _zero,
    "reshard_save": _reshard_save,
    "reshard_load": _reshard_load,
}


def _rank(
    rank: int, task: str, model_dir: str, tp: int, world: int, rows: int, tmp: str, sharded: bool
) -> None:
    from deepswe.train.backends.megatron import MegatronBackend
    from deepswe.train.backends.megatron.model import MegatronOptions, ParallelConfig

    torch.set_num_threads(1)
    rdzv = f"file://{tmp}/rdzv-{task}"
    dist.init_process_group("gloo", init_method=rdzv, rank=rank, world_size=world)
    par, opts = ParallelConfig(tensor_parallel=tp), MegatronOptions(distributed_optimizer=sharded)
    build = lambda o=opts: MegatronBackend(model_dir, optim=OPTIM, parallel=par, options=o)  # noqa: E731
    vocab = json.loads((Path(model_dir) / "config.json").read_text())["vocab_size"]
    res = TASKS[task](build, vocab, rows, tmp)
    torch.save(res, f"{tmp}/rank{rank}.pt")
    dist.destroy_process_group()


def _spawn(
    task: str,
    model_dir: str | Path,
    tp: int,
    dp: int,
    rows: int,
    tmp: str,
    timeout: float,
    sharded: bool = False,
) -> list[dict]:
    """Run `task` on tp * dp processes; their results in rank order. TimeoutError (the
    processes killed) when they have not all finished within `timeout` seconds: a hang."""
    n = tp * dp
    ctx = mp.start_processes(
        _rank,
        args=(task, str(model_dir), tp, n, rows, tmp, sharded),
        nprocs=n,
        join=False,
        start_method="spawn",
    )
    deadline = time.monotonic() + timeout
    while not ctx.join(timeout=max(deadline - time.monotonic(), 0.0)):
        if time.monotonic() >= deadline:
            for p in ctx.processes:
                p.kill()
            raise TimeoutError(f"{n} ranks (tp={tp}, dp={dp}) still running after {timeout} s")
    return [torch.load(f"{tmp}/rank{r}.pt", weights_only=True) for r in range(n)]


def _same(a: dict, b: dict) -> bool:
    """Bit-identical results: DP ranks must not drift apart."""
    return (
        torch.equal(a["lp"], b["lp"])
        and a["loss"] == b["loss"]
        and a["norm"] == b["norm"]
        and all(torch.equal(a["w"][k], b["w"][k]) for k in a["w"])
    )


def check(
    model_dir: str | Path,
    tp: int,
    dp: int = 1,
    rows: int = 3,
    timeout: float = 600.0,
    sharded: bool = False,
) -> dict:
    from deepswe.train.backends.hf import HFBackend

    with tempfile.TemporaryDirectory() as tmp:
        ranks = _spawn("step", model_dir, tp, dp, rows, tmp, timeout, sharded)
    hf = HFBackend(model_dir, optim=OPTIM)
    ref = run_backend(hf, random_batch(hf.model.config.vocab_size, rows=rows))
    worst = lambda f: max(f(r) for r in ranks)  # noqa: E731
    return {
        "tp": tp,
        "dp": dp,
        "rows_per_dp_rank": [int(r["dp_rows"]) for r in ranks[::tp]],
        "qkv_rows_per_rank": [int(r["qkv_rows"]) for r in ranks],
        "logprob_max_diff": worst(lambda r: (r["lp"] - ref["lp"]).abs().max().item()),
        "loss": [r["loss"] for r in ranks],
        "loss_hf": ref["loss"],
        "grad_norm": [r["norm"] for r in ranks],
        "grad_norm_hf": ref["norm"],
        "weight_max_diff": worst(
            lambda r: max((r["w"][k] - ref["w"][k]).abs().max().item() for k in ref["w"])
        ),
        "ranks_identical": all(_same(r, ranks[0]) for r in ranks),
        "stream_equal": all(r["stream_equal"] for r in ranks),
    }


def check_zero(
    model_dir: str | Path, tp: int, dp: int, rows: int = 3, timeout: float = 600.0
) -> dict:
    """The distributed optimizer against the unsharded one on the same TP x DP ranks."""
    with tempfile.TemporaryDirectory() as tmp:
        ranks = _spawn("zero", model_dir, tp, dp, rows, tmp, timeout)
    return {
        "tp": tp,
        "dp": dp,
        "equal": all(r["equal"] for r in ranks),
        "state_bytes": [r["bytes"] for r in ranks],
        "owned_params": [r["owned"] for r in ranks],
    }


def check_reshard(model_dir: str | Path, rows: int = 3, timeout: float = 600.0) -> dict:
    """Save after one step on TP 2 x DP 1; on TP 1 x DP 2 with the distributed optimizer, load
    and step: against two steps straight on TP 2 (different TP sums: close, not bit-equal)."""
    with tempfile.TemporaryDirectory() as tmp:
        _spawn("reshard_save", model_dir, 2, 1, rows, tmp, timeout)
        ranks = _spawn("reshard_load", model_dir, 1, 2, rows, tmp, timeout)
    return {
        "weight_max_diff": max(r["diff"] for r in ranks),
        "control_max_diff": min(r["control_diff"] for r in ranks),
    }


def check_resume(
    model_dir: str | Path,
    tp: int,
    dp: int = 1,
    rows: int = 3,
    timeout: float = 600.0,
    sharded: bool = False,
) -> dict:
    """Save after one step, load into fresh backends, step again: equal to two steps straight."""
    with tempfile.TemporaryDirectory() as tmp:
        ranks = _spawn("resume", model_dir, tp, dp, rows, tmp, timeout, sharded)
        files = sorted(str(p.relative_to(f"{tmp}/ckpt")) for p in Path(tmp, "ckpt").rglob("*"))
    return {
        "tp": tp,
        "dp": dp,
        "files": files,
        "resumed_equal": all(r["equal"] for r in ranks),
        "rng_restored": all(r["rng"] for r in ranks),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model_dir", help="HF Qwen3 checkpoint folder (local)")
    p.add_argument("--tp", type=int, default=2, help="tensor-parallel ranks")
    p.add_argument("--dp", type=int, default=1, help="data-parallel ranks (processes: tp * dp)")
    p.add_argument("--rows", type=int, default=3, help="rows in the batch (split over DP)")
    p.add_argument("--resume", action="store_true", help="check save/load/resume instead")
    p.add_argument("--distributed-optimizer", action="store_true", help="shard AdamW over DP")
    p.add_argument("--out", type=Path, default=None, help="also write the JSON report here")
    a = p.parse_args()
    fn = check_resume if a.resume else check
    report = json.dumps(
        fn(a.model_dir, a.tp, a.dp, a.rows, sharded=a.distributed_optimizer), indent=1
    )
    print(report)
    if a.out:
        a.out.write_text(report)


if __name__ == "__main__":
    main()
