"""Same weights, same numbers: HF Qwen3ForCausalLM vs the megatron GPTModel on CPU over gloo.

Logits, gradients of one loss w.r.t. every parameter (mapped back to HF names), and the weights
after one AdamW step agree to float32 rounding on a tiny Qwen3, tied and untied.
"""

from __future__ import annotations

import pytest
import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

from deepswe.train.backends.megatron import mapping, model, shim

torch.set_num_threads(1)


def tiny_config(tied: bool, **kw) -> Qwen3Config:
    return Qwen3Config(
        vocab_size=512,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=256,
        tie_word_embeddings=tied,
        **kw,
    )


@pytest.fixture(scope="module", autouse=True)
def megatron_on_gloo():
    shim.init_distributed()  # world size 1, TP = PP = CP = 1; idempotent across test modules


def pair(tied: bool, seed: int = 0, dtype: torch.dtype = torch.float32):
    """An HF model with random (not all-ones) norms and a GPTModel holding the same weights."""
    cfg = tiny_config(tied, rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    torch.manual_seed(seed)
    hf = Qwen3ForCausalLM(cfg).to(dtype)
    with torch.no_grad():  # HF initialises norms to 1: a q_norm/k_norm swap would go unseen
        for name, p in hf.named_parameters():
            if "norm" in name:
                p.add_(0.2 * torch.randn_like(p))
    gpt = model.build_model(cfg, model.ParallelConfig(), dtype)
    dims = mapping.Dims.from_hf_config(cfg)
    model.load_megatron_state(gpt, mapping.hf_to_megatron(hf.state_dict(), dims))
    return hf, gpt, dims


def loss_of(logits: torch.Tensor, ids: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """A weighted next-token log-likelihood: every parameter gets a gradient."""
    lp = torch.log_softmax(logits[:, :-1].float(), -1).gather(-1, ids[:, 1:, None]).squeeze(-1)
    return (lp * w).sum()


IDS = torch.randint(0, 512, (3, 11), generator=torch.Generator().manual_seed(7))
W = torch.randn(3, 10, generator=torch.Generator().manual_seed(8))


@pytest.mark.parametrize("tied", [False, True])
def test_logits_match(tied):
    hf, gpt, _ = pair(tied)
    with torch.no_grad():
        a = hf.eval()(input_ids=IDS).logits
        b = model.forward_logits(gpt.eval(), IDS)
    assert b.shape == a.shape == (3, 11, 512)
    diff = (a - b).abs().max().item()
    print(f"max |logit diff| (tied={tied}) = {diff:.3e}")
    torch.testing.assert_close(b, a, atol=1e-5, rtol=0)


@pytest.mark.parametrize("tied", [False, True])
def test_gradients_match_after_mapping_back(tied):
    hf, gpt, dims = pair(tied, seed=1)
    loss_of(hf.train()(input_ids=IDS).logits, IDS, W).backward()
    loss_of(model.forward_logits(gpt.train(), IDS), IDS, W).backward()
    mg_grads = {n: p.grad for n, p in gpt.named_parameters()}
    assert all(g is not None for g in mg_grads.values())
    back = mapping.megatron_to_hf(mg_grads, dims)
    worst = 0.0
    for name, p in hf.named_parameters():  # lm_head is the embedding when tied: one parameter
        assert p.grad is not None and p.grad.abs().sum() > 0, name
        torch.testing.assert_close(back[name], p.grad, atol=1e-5, rtol=1e-4, msg=name)
        # and as a whole: float32 rounding, not a slightly wrong layout or norm (~1e-7 here)
        assert (back[name] - p.grad).norm() <= 1e-5 * p.grad.norm(), name
        worst = max(worst, (back[name] - p.grad).abs().max().item())
    print(f"max |grad diff| (tied={tied}) = {worst:.3e}")


def test_one_adamw_step_gives_the_same_weights():
    """Same AdamW on both sides, eps = 1e-3 rather than 1e-8: Adam's first step is
    lr * g / (|g| + eps), so a rounding difference dg on an entry whose gradient is itself mostly
    rounding noise (|g| ~ 1e-8 after cancellation) moves the weight by up to lr * dg / eps. With
    eps = 1e-8 that is ~1e-3 (seen on 1 of 8192 up_proj entries), with 1e-4 up to 9e-6, with
    1e-3 under 3e-6; a layout error would still show as ~lr = 1e-2."""
    hf, gpt, dims = pair(False, seed=2)
    kw = dict(lr=1e-2, betas=(0.9, 0.999), eps=1e-3, weight_decay=0.01)
    opt_hf, opt_mg = (
        torch.optim.AdamW(hf.parameters(), **kw),
        torch.optim.AdamW(gpt.parameters(), **kw),
    )
    loss_of(hf.train()(input_ids=IDS).logits, IDS, W).backward()
    loss_of(model.forward_logits(gpt.train(), IDS), IDS, W).backward()
    opt_hf.step()
    opt_mg.step()
    after = mapping.megatron_to_hf(model.megatron_params(gpt), dims)
    worst = 0.0
    for name, t in hf.state_dict().items():
        torch.testing.assert_close(after[name], t, atol=1e-5, rtol=0, msg=name)
        worst = max(worst, (after[name] - t).abs().max().item())
    print(f"max |weight diff| after one AdamW step = {worst:.3e}")
