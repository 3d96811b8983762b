"""The documented update order (deepswe.train.algos docstring) end to end, on CPU and on a GPU."""

from __future__ import annotations

import pytest
import torch

from deepswe.train.algos import (
    GRPOConfig,
    advantage_estimator,
    compact_filter,
    entropy_from_logits,
    expand_to_tokens,
    loss_denominator,
    ppo_clip_loss,
)

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


def run_update(device: str, dtype: torch.dtype, micro: int | None):
    """One GRPO++ step over 3 tasks x 4 rollouts with a linear 'policy'; returns (loss, grad)."""
    g = torch.Generator().manual_seed(0)  # draws in float64 always, so both runs see one batch
    cfg = GRPOConfig(loss_constant=16)
    b, t, d, v = 12, 16, 5, 7
    endings = (
        ["submitted", "max_steps", "submitted", "infra_error"] * 2
        + ["timeout"]
        + ["agent_error"] * 3
    )
    groups = [f"task-{i // 4}" for i in range(b)]
    rewards = torch.tensor([1, 0, 0, 1, 0, 1, 1, 0, 1, 0, 0, 1], dtype=dtype)
    lengths = torch.randint(1, t + 1, (b,), generator=g)
    mask = torch.arange(t)[None, :] < lengths[:, None]
    x = torch.randn(b, t, d, generator=g, dtype=torch.float64).to(dtype)
    y = torch.randint(0, v, (b, t), generator=g)
    w = (torch.randn(d, v, generator=g, dtype=torch.float64) * 0.5).to(device, dtype)
    w.requires_grad_(True)
    w_old = w.detach() + torch.randn(d, v, generator=g, dtype=torch.float64).to(device, dtype) * 0.2
    x, y, rewards, mask = x.to(device), y.to(device), rewards.to(device), mask.to(device)

    filt = compact_filter(
        endings, rewards, mask, cfg.mask_endings, cfg.keep_masked_in_baseline, cfg.drop_endings
    )
    rows = filt.keep_rows
    kept_groups = [grp for grp, keep in zip(groups, rows.tolist(), strict=True) if keep]
    adv = advantage_estimator(cfg.adv_estimator)(
        filt.rewards[rows], kept_groups, filt.baseline_mask[rows]
    )
    loss_mask = filt.loss_mask[rows]
    adv_tok = expand_to_tokens(adv, loss_mask)
    xs, ys = x[rows], y[rows]
    with torch.no_grad():
        old_lp = torch.log_softmax(xs @ w_old, -1).gather(-1, ys[..., None]).squeeze(-1)
    denom = loss_denominator(loss_mask, cfg.loss_agg, cfg.loss_constant)
    n = xs.shape[0]
    step = micro or n
    total = torch.zeros((), dtype=dtype, device=device)
    for s in range(0, n, step):
        sl = slice(s, s + step)
        logits = xs[sl] @ w
        lp = torch.log_softmax(logits, -1).gather(-1, ys[sl][..., None]).squeeze(-1)
        loss, metrics = ppo_clip_loss(
            lp,
            old_lp[sl],
            adv_tok[sl],
            loss_mask[sl],
            cfg.eps_low,
            cfg.eps_high,
            cfg.loss_agg,
            cfg.loss_constant,
            denom,
        )
        loss.backward()
        total += loss.detach()
        assert all(map(lambda f: f == f, metrics.as_dict().values()))  # no nan metrics
        assert entropy_from_logits(logits.detach()).shape == lp.shape
    return total.cpu().double(), w.grad.cpu().double(), filt.counts


@pytest.mark.parametrize("device", DEVICES)
def test_pipeline_micro_batched_equals_full_batch_reference(device: str) -> None:
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip(
            "no CUDA device (gpu tests run only on a GPU machine; `make test` deselects them)"
        )
    ref_loss, ref_grad, counts = run_update("cpu", torch.float64, micro=None)
    loss, grad, _ = run_update(device, torch.float32, micro=3)
    assert (counts.dropped, counts.masked, counts.trained) == (2, 3, 7)
    assert ref_grad.abs().max() > 0
    torch.testing.assert_close(loss, ref_loss, rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(grad, ref_grad, rtol=1e-4, atol=1e-6)
