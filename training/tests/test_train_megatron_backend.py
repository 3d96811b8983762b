"""The `megatron` TrainingBackend against the `hf` one, on the trainer's tiny Qwen3 policy.

Same checkpoint in, same log-probs, same GRPO++ step (loss, grad norm, clipped AdamW update),
HF-format checkpoints that transformers loads, exact resume; and tensor and data parallelism
over gloo in real processes (selfcheck.py spawns them).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from deepswe.train.backends import TrainingBackend, backend_class
from deepswe.train.backends.hf import HFBackend
from deepswe.train.backends.megatron import MegatronBackend, selfcheck
from deepswe.train.backends.megatron.groups import dp_share
from deepswe.train.backends.megatron.model import ParallelConfig
from deepswe.train.backends.megatron.selfcheck import OPTIM, random_batch
from deepswe.train.models import build_test_model

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return build_test_model(tmp_path_factory.mktemp("tiny"))


def vocab(model_dir: Path) -> int:
    import json

    return json.loads((model_dir / "config.json").read_text())["vocab_size"]


def test_it_is_the_registered_training_backend(model_dir):
    assert backend_class("megatron") is MegatronBackend
    assert isinstance(MegatronBackend(model_dir), TrainingBackend)


def test_logprobs_match_the_hf_backend(model_dir):
    batch = random_batch(vocab(model_dir)).rollout
    lp_hf = HFBackend(model_dir).forward_logprobs(batch)
    lp = MegatronBackend(model_dir).forward_logprobs(batch)
    print(f"max |logprob diff| = {(lp - lp_hf).abs().max():.3e}")
    torch.testing.assert_close(lp, lp_hf, atol=1e-5, rtol=0)
    pad = batch.attention_mask == 0
    assert not lp[pad].any() and not lp[:, 0].any()
    assert lp[~pad & (torch.arange(12) > 0)].lt(0).all()


@pytest.mark.parametrize("micro", [3, 1])
def test_two_clipped_steps_match_the_hf_backend(model_dir, micro):
    optim = OPTIM.model_copy(update={"micro_batch_size": micro})
    hf, mg = HFBackend(model_dir, optim=optim), MegatronBackend(model_dir, optim=optim)
    init = {k: v.clone() for k, v in hf.state_dict().items()}
    for seed in (0, 1):
        upd = random_batch(vocab(model_dir), seed)
        upd.rollout.old_logprobs = (
            hf.forward_logprobs(upd.rollout) + upd.rollout.old_logprobs
        ) * upd.loss_mask
        a, b = hf.train_step(upd), mg.train_step(upd)
        assert not a.skipped and not b.skipped and a.grad_norm > OPTIM.grad_clip  # clipped
        assert abs(a.loss) > 1e-3 and a.clipfrac > 0  # a real loss, some ratios clipped
        assert b.loss == pytest.approx(a.loss, rel=1e-5)
        assert b.grad_norm == pytest.approx(a.grad_norm, rel=1e-4)
        for k in ("clipfrac", "approx_kl", "entropy"):
            assert getattr(b, k) == pytest.approx(getattr(a, k), rel=1e-4, abs=1e-7), k
        assert b.trained_tokens == a.trained_tokens
    want, got = hf.state_dict(), mg.state_dict()
    assert sorted(got) == sorted(want)
    worst = max((got[k] - want[k]).abs().max().item() for k in want)
    moved = max((want[k] - init[k]).abs().max().item() for k in want)
    print(f"max |weight diff| after 2 steps (micro={micro}) = {worst:.3e}; moved {moved:.3e}")
    assert worst < 1e-3 * moved  # a layout error would differ by about a whole step


def test_save_writes_an_hf_checkpoint_and_load_resumes_exactly(model_dir, tmp_path):
    from transformers import AutoModelForCausalLM

    u1, u2 = random_batch(vocab(model_dir), 0), random_batch(vocab(model_dir), 1)
    b1 = u1.rollout
    straight = MegatronBackend(model_dir, optim=OPTIM)
    straight.train_step(u1)
    straight.train_step(u2)
    first = MegatronBackend(model_dir, optim=OPTIM)
    first.train_step(u1)
    torch.manual_seed(123)
    first.save(tmp_path / "ckpt")
    expected_rng = torch.rand(3)
    # the model folder is a plain HF checkpoint of the trained weights
    hf = AutoModelForCausalLM.from_pretrained(tmp_path / "ckpt" / "model", local_files_only=True)
    with torch.no_grad():
        torch.testing.assert_close(
            hf(input_ids=b1.input_ids).logits,
            first.model(input_ids=b1.input_ids).logits,
            atol=1e-5,
            rtol=0,
        )
    resumed = MegatronBackend(model_dir, optim=OPTIM)
    resumed.load(tmp_path / "ckpt")
    assert torch.equal(torch.rand(3), expected_rng)  # RNG state restored with the weights
    resumed.train_step(u2)
    want, got = straight.state_dict(), resumed.state_dict()
    assert all(torch.equal(got[k], want[k]) for k in want)


def test_the_trainer_with_backend_megatron_retraces_the_hf_run(model_dir, tmp_path):
    """End to end through Trainer (text source: real sampling from weights synced out of the
    backend each step): same grad norms, rewards and final weights as with backend hf."""
    from deepswe.train.config import validate
    from deepswe.train.trainer import Trainer

    runs = {}
    for name in ("hf", "megatron"):
        cfg = validate(
            {
                "run": {"seed": 7, "steps": 2, "tensorboard": False},
                "model": {"path": str(model_dir)},
                "data": {"source": "text", "text": {"target": "s"}},
                "rollout": {
                    "tasks_per_step": 2,
                    "group_size": 4,
                    "concurrency": 3,
                    "max_tokens_per_turn": 6,
                },
                "backend": {
                    "name": name,
                    "optim": {"lr": 1e-2, "micro_batch_size": 3, "adam_eps": 1e-3},
                },
                "algo": {"loss_constant": 8},
            },
            "test",
        )
        trainer = Trainer.setup(cfg, tmp_path / name)
        runs[name] = (trainer.train(), trainer.backend.state_dict())
    assert type(trainer.backend).__name__ == "MegatronBackend"
    (hf_recs, hf_w), (mg_recs, mg_w) = runs["hf"], runs["megatron"]
    for a, b in zip(hf_recs, mg_recs, strict=True):
        assert b["reward/mean"] == a["reward/mean"]
        assert b["actor/grad_norm"] == pytest.approx(a["actor/grad_norm"], rel=1e-4)
    assert max((mg_w[k] - hf_w[k]).abs().max().item() for k in hf_w) < 1e-5


def test_tensor_parallel_2_over_gloo_matches_the_hf_backend(model_dir):
    """~8 s: two real processes over gloo, each importing megatron-core and holding half of
    every sharded weight; log-probs, loss, grad norm and updated weights match the hf backend."""
    r = selfcheck.check(model_dir, tp=2)
    print("TP=2:", r)
    assert r["qkv_rows_per_rank"] == [(4 + 2 * 2) * 16 // 2] * 2  # one query group per rank
    assert r["logprob_max_diff"] < 1e-5 and r["weight_max_diff"] < 1e-5
    assert all(x == pytest.approx(r["loss_hf"], rel=1e-5) for x in r["loss"])
    assert all(x == pytest.approx(r["grad_norm_hf"], rel=1e-4) for x in r["grad_norm"])
    assert r["grad_norm_hf"] > OPTIM.grad_clip  # the clipped path, with the norm summed over TP
    assert r["ranks_identical"]
    # iter_hf_weights (the hybrid workers' in-place sync) gathers each TP shard as it comes:
    # on every rank, every HF tensor once, equal to the gathered state dict.
    assert r["stream_equal"]


def assert_matches_hf(r: dict) -> None:
    """The tolerances of the TP test above; every rank bit-identical to rank 0 (no drift)."""
    assert r["logprob_max_diff"] < 1e-5 and r["weight_max_diff"] < 1e-5
    assert all(x == pytest.approx(r["loss_hf"], rel=1e-5) for x in r["loss"])
    assert all(x == pytest.approx(r["grad_norm_hf"], rel=1e-4) for x in r["grad_norm"])
    assert r["grad_norm_hf"] > OPTIM.grad_clip  # the clipped path
    assert r["ranks_identical"] and r["stream_equal"]


@pytest.mark.parametrize(
    ("tp", "dp", "rows", "shares"),
    [(1, 2, 1, [0, 1]), (2, 2, 3, [1, 2])],
    ids=["dp2xtp1-empty-share", "dp2xtp2"],
)
def test_data_parallel_over_gloo_matches_the_hf_backend(model_dir, tp, dp, rows, shares):
    """~8 s / ~15 s: each DP rank trains its rows; gradients and metric sums are summed over DP,
    so log-probs, loss, grad norm (clipped) and updated weights are the full batch's. With one
    row on DP 2, rank 0's share is empty: it must still join every collective, not hang."""
    r = selfcheck.check(model_dir, tp=tp, dp=dp, rows=rows, timeout=300)
    print(f"DP={dp} x TP={tp}, {rows} rows:", r)
    assert r["rows_per_dp_rank"] == shares
    assert_matches_hf(r)


@pytest.mark.slow
def test_data_parallel_4_with_an_empty_share_matches_the_hf_backend(model_dir):
    """~15 s: 3 rows on DP 4 (rank 0 gets none); a 4-way sum still leaves the ranks identical."""
    r = selfcheck.check(model_dir, tp=1, dp=4, rows=3, timeout=300)
    print("DP=4 x TP=1, 3 rows:", r)
    assert r["rows_per_dp_rank"] == [0, 1, 1, 1]
    assert_matches_hf(r)


@pytest.mark.parametrize("sharded", [False, True], ids=["adamw", "distributed-optimizer"])
def test_data_parallel_save_and_load_resume_exactly(model_dir, sharded):
    """~15 s each, DP 2 x TP 2: a sharded checkpoint (dist/: DCP, every rank writing its own
    shards, DP replicas once), model/ for engines, RNG per rank; one step, save, load into fresh
    backends, one step = two steps, bit for bit, with AdamW whole on every DP rank or sharded."""
    r = selfcheck.check_resume(model_dir, tp=2, dp=2, timeout=300, sharded=sharded)
    files = set(r["files"])
    assert {"model/model.safetensors", "dist/.metadata", "dist/layout.json"} <= files
    assert {f for f in files if f.startswith("rng_rank")} == {f"rng_rank{i}.pt" for i in range(4)}
    assert len([f for f in files if f.endswith(".distcp")]) >= 2  # one writer per TP shard at least
    assert r["resumed_equal"] and r["rng_restored"]


def test_the_distributed_optimizer_steps_the_same_bits_with_half_the_state(model_dir):
    """~15 s, DP 2 x TP 1: each DP rank owns half the parameters (by size) and keeps their AdamW
    moments only; it steps them and broadcasts; two steps give the unsharded weights exactly."""
    r = selfcheck.check_zero(model_dir, tp=1, dp=2, timeout=300)
    print("ZeRO-1 on DP 2:", r)
    assert r["equal"]
    for full, shard in r["state_bytes"]:
        assert 0.3 * full < shard < 0.7 * full
    assert sum(owned for _, owned in r["owned_params"]) == r["owned_params"][0][0]


def test_a_sharded_checkpoint_resumes_on_another_layout(model_dir):
    """~25 s: saved by TP 2 x DP 1, resumed by TP 1 x DP 2 with the distributed optimizer (DCP
    reshards weights and moments); the next step lands on the straight TP 2 run's weights within
    TP rounding, while weights without their AdamW state land 100x further."""
    r = selfcheck.check_reshard(model_dir, timeout=300)
    print("reshard TP2 -> TP1 x DP2:", r)
    assert r["weight_max_diff"] < 1e-5
    assert r["control_max_diff"] > 100 * max(r["weight_max_diff"], 1e-7)


def test_dp_share_trains_every_row_once_in_balanced_chunks():
    for n in range(0, 9):
        for size in range(1, 6):
            shares = [dp_share(n, r, size) for r in range(size)]
            assert [i for s in shares for i in range(s.start, s.stop)] == list(range(n))
            lengths = [s.stop - s.start for s in shares]
            assert max(lengths) - min(lengths) <= 1


def test_unsupported_layouts_are_refused_naming_the_field(model_dir):
    with pytest.raises(NotImplementedError, match="backend.parallel.pipeline_parallel=2"):
        MegatronBackend(model_dir, parallel=ParallelConfig(pipeline_parallel=2))
    with pytest.raises(ValueError, match="not a multiple of backend.parallel.tensor_parallel=2"):
        MegatronBackend(model_dir, parallel=ParallelConfig(tensor_parallel=2))  # world of 1
