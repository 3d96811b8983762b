"""The `megatron` TrainingBackend against the `hf` one, on the trainer's tiny Qwen3 policy.

Same checkpoint in, same log-probs, same GRPO++ step (loss, grad norm, clipped AdamW update),
HF-format checkpoints that transformers loads, exact resume; and tensor parallelism 2 over gloo
in two real processes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from deepswe.train.backends import TrainingBackend, backend_class
from deepswe.train.backends.hf import HFBackend
from deepswe.train.backends.megatron import MegatronBackend, selfcheck
from deepswe.train.backends.megatron.selfcheck import OPTIM, random_batch
from deepswe.train.fixtures import build_tiny_policy

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return build_tiny_policy(tmp_path_factory.mktemp("tiny"))


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
            hf(input_ids=b1.input_ids).logits, first.model(input_ids=b1.input_ids).logits,
            atol=1e-5, rtol=0,
        )  # fmt: skip
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
                "rollout": {"tasks_per_step": 2, "group_size": 4, "concurrency": 3,
                            "max_tokens_per_turn": 6},
                "backend": {"name": name, "optim": {"lr": 1e-2, "micro_batch_size": 3,
                                                    "adam_eps": 1e-3}},
                "algo": {"loss_constant": 8},
            },
            "test",
        )  # fmt: skip
        trainer = Trainer.setup(cfg, tmp_path / name)
        runs[name] = (trainer.train(), trainer.backend.state_dict())
    assert type(trainer.backend).__name__ == "MegatronBackend"
    (hf_recs, hf_w), (mg_recs, mg_w) = runs["hf"], runs["megatron"]
    for a, b in zip(hf_recs, mg_recs, strict=True):
        assert b["reward/mean"] == a["reward/mean"]
        assert b["actor/grad_norm"] == pytest.approx(a["actor/grad_norm"], rel=1e-4)
    assert max((mg_w[k] - hf_w[k]).abs().max().item() for k in hf_w) < 1e-5


def test_tensor_parallel_2_over_gloo_matches_the_hf_backend(model_dir):
    """~10 s: two real processes over gloo, each importing megatron-core and holding half of
    every sharded weight; log-probs, loss, grad norm and updated weights match the hf backend."""
    r = selfcheck.check(model_dir, tp=2)
    print("TP=2:", r)
    assert r["qkv_rows_per_rank"] == [(4 + 2 * 2) * 16 // 2] * 2  # one query group per rank
    assert r["logprob_max_diff"] < 1e-5 and r["weight_max_diff"] < 1e-5
    assert all(x == pytest.approx(r["loss_hf"], rel=1e-5) for x in r["loss"])
    assert all(x == pytest.approx(r["grad_norm_hf"], rel=1e-4) for x in r["grad_norm"])
    assert r["grad_norm_hf"] > OPTIM.grad_clip  # the clipped path, with the norm summed over TP
