"""PPO clip loss and loss aggregation: naive float64 loops, gradients, padding and micro-batches."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from deepswe.train.algos import AGG_MODES, agg_loss, loss_denominator, ppo_clip_loss

C = 64.0  # a small stand-in for DeepSWE's 32768, so gradients stay far from underflow


def naive_agg(loss: list[list[float]], mask: list[list[bool]], mode: str, constant: float) -> float:
    rows = [
        [x for x, m in zip(lr, mr, strict=True) if m] for lr, mr in zip(loss, mask, strict=True)
    ]
    if mode == "seq-sum-constant":
        return sum(sum(r) for r in rows) / (constant * len(rows))
    if mode == "token-mean":
        n = sum(len(r) for r in rows)
        return sum(sum(r) for r in rows) / max(n, 1)
    nonempty = [sum(r) / len(r) for r in rows if r]
    return sum(nonempty) / max(len(nonempty), 1)


def naive_ppo(lp, old, adv, mask, el, eh, mode, constant):
    loss, n_tok, n_low, n_high, kl, ratio_sum = [], 0, 0, 0, 0.0, 0.0
    for b in range(len(lp)):
        row = []
        for t in range(len(lp[b])):
            if not mask[b][t]:
                row.append(0.0)
                continue
            log_r = min(max(lp[b][t] - old[b][t], -20.0), 20.0)
            r, a = math.exp(log_r), adv[b][t]
            row.append(max(-a * r, -a * min(max(r, 1 - el), 1 + eh)))
            n_tok += 1
            n_low += a < 0 and r < 1 - el
            n_high += a > 0 and r > 1 + eh
            kl += r - 1 - log_r
            ratio_sum += r
        loss.append(row)
    n = max(n_tok, 1)
    metrics = {
        "clipfrac_low": n_low / n,
        "clipfrac_high": n_high / n,
        "approx_kl": kl / n,
        "ratio_mean": ratio_sum / n,
    }
    return naive_agg(loss, mask, mode, constant), metrics


def random_inputs(seed: int, b: int, t: int, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    old = -torch.rand(b, t, generator=g, dtype=dtype) * 3
    lp = old + torch.randn(b, t, generator=g, dtype=dtype) * 0.3  # ratios spread across both clips
    adv = torch.randn(b, 1, generator=g, dtype=dtype).expand(b, t).clone()
    adv[0] = 0.0  # a zero-advantage row
    lengths = torch.randint(0, t + 1, (b,), generator=g)
    mask = torch.arange(t)[None, :] < lengths[:, None]
    return lp, old, adv, mask


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("shape", [(1, 1), (2, 7), (5, 33), (9, 4)])
@pytest.mark.parametrize("mode", AGG_MODES)
def test_ppo_clip_loss_matches_naive_loop(seed: int, shape, mode: str) -> None:
    lp, old, adv, mask = random_inputs(seed, *shape)
    loss, m = ppo_clip_loss(lp, old, adv, mask, 0.2, 0.28, mode, constant=C)
    want, want_m = naive_ppo(
        lp.tolist(), old.tolist(), adv.tolist(), mask.tolist(), 0.2, 0.28, mode, C
    )
    assert math.isclose(loss.item(), want, rel_tol=1e-12, abs_tol=1e-14)
    got_m = {k.removeprefix("actor/"): v for k, v in m.as_dict().items()}
    for k, v in want_m.items():
        assert math.isclose(got_m[k], v, rel_tol=1e-9, abs_tol=1e-12), k
    assert math.isclose(
        got_m["clipfrac"], want_m["clipfrac_low"] + want_m["clipfrac_high"], abs_tol=1e-12
    )


@settings(max_examples=40, deadline=None)
@given(
    rows=st.lists(
        st.lists(st.tuples(st.floats(-100, 100), st.booleans()), min_size=3, max_size=3),
        min_size=1,
        max_size=6,
    ),
    mode=st.sampled_from(AGG_MODES),
)
def test_agg_loss_matches_naive(rows, mode: str) -> None:
    loss = torch.tensor([[x for x, _ in r] for r in rows], dtype=torch.float64)
    mask = torch.tensor([[m for _, m in r] for r in rows])
    got = agg_loss(loss, mask, mode, constant=C).item()
    assert math.isclose(
        got, naive_agg(loss.tolist(), mask.tolist(), mode, C), rel_tol=1e-12, abs_tol=1e-12
    )
    assert math.isclose(
        got,
        agg_loss(loss, mask, mode, C, loss_denominator(mask, mode, C)).item(),
        rel_tol=1e-12,
        abs_tol=1e-12,
    )


@pytest.mark.parametrize("mode", AGG_MODES)
def test_masked_tokens_get_exactly_zero_gradient_even_with_garbage(mode: str) -> None:
    """Padding may hold anything: non-finite logprobs, old logprobs and advantages, and also
    in-range values that a log-ratio clamp alone would let through."""
    lp, old, adv, mask = random_inputs(1, 4, 9)
    mask[1] = False  # one fully masked row (a compact-filtered trajectory)
    n_pad = int((~mask).sum())
    inf, nan = float("inf"), float("nan")
    # (logprob, old logprob, advantage) per padded token, cycled
    cases = [
        (inf, 0.0, 1.0),
        (-inf, nan, -1.0),
        (nan, 1e6, 2.0),
        (1e6, -inf, nan),
        (0.5, 0.1, nan),
        (0.3, 0.3, inf),
    ]
    garbage = torch.tensor(cases, dtype=lp.dtype).repeat(40, 1)[:n_pad]
    lp, old, adv = lp.clone(), old.clone(), adv.clone()
    lp[~mask], old[~mask], adv[~mask] = garbage[:, 0], garbage[:, 1], garbage[:, 2]
    lp.requires_grad_(True)
    loss, m = ppo_clip_loss(lp, old, adv, mask, agg=mode, constant=C)
    loss.backward()
    assert torch.isfinite(loss) and all(math.isfinite(v) for v in m.as_dict().values())
    assert torch.isfinite(lp.grad).all()
    assert torch.equal(lp.grad[~mask], torch.zeros(int((~mask).sum()), dtype=lp.dtype))
    assert (lp.grad[mask & (adv != 0)] != 0).any()


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_gradient_is_zero_exactly_where_the_clipped_branch_is_active(sign: float) -> None:
    b, t = 3, 200
    old = torch.full((b, t), -1.0, dtype=torch.float64)
    log_r = torch.linspace(-0.6, 0.6, t, dtype=torch.float64).expand(b, t)  # r in [0.55, 1.82]
    lp = (old + log_r).requires_grad_(True)
    adv = torch.full((b, t), sign * 0.7, dtype=torch.float64)
    mask = torch.ones(b, t, dtype=torch.bool)
    loss, m = ppo_clip_loss(lp, old, adv, mask, 0.2, 0.28, "seq-sum-constant", constant=C)
    loss.backward()
    r = torch.exp(log_r)
    clipped = (r > 1.28) if sign > 0 else (r < 0.8)
    assert clipped.any() and (~clipped).any()
    assert torch.equal(lp.grad[clipped], torch.zeros(int(clipped.sum()), dtype=torch.float64))
    # unclipped: d(-A r)/d logprob = -A r, divided by C * B
    torch.testing.assert_close(
        lp.grad[~clipped], (-adv * r / (C * b))[~clipped], rtol=1e-12, atol=0
    )
    # the other side is never clipped: with A > 0 a falling ratio keeps its gradient
    assert (lp.grad[r < 0.8] != 0).all() if sign > 0 else (lp.grad[r > 1.28] != 0).all()
    frac = clipped.double().mean().item()
    got = m.clipfrac_high.item() if sign > 0 else m.clipfrac_low.item()
    other = m.clipfrac_low.item() if sign > 0 else m.clipfrac_high.item()
    assert math.isclose(got, frac, rel_tol=1e-12) and other == 0.0


def test_constant_divisor_makes_per_token_gradient_independent_of_length() -> None:
    """With seq-sum-constant a token weighs 1/(C*B) in a short and in a long trajectory alike."""
    lengths, t = [3, 11, 30], 30
    mask = torch.arange(t)[None, :] < torch.tensor(lengths)[:, None]
    old = torch.full((3, t), -2.0, dtype=torch.float64)
    adv = torch.full((3, t), -1.5, dtype=torch.float64)
    grads = {}
    for mode in AGG_MODES:
        lp = old.clone().requires_grad_(True)  # ratio 1: no clipping anywhere
        loss, _ = ppo_clip_loss(lp, old, adv, mask, agg=mode, constant=C)
        loss.backward()
        grads[mode] = lp.grad
    g = grads["seq-sum-constant"][mask]
    assert torch.allclose(g, torch.full_like(g, 1.5 / (C * 3)), rtol=1e-14, atol=0)
    # the per-trajectory token mean weighs a token of the 3-token trajectory 10x one of the 30
    sm = grads["seq-mean-token-mean"]
    assert math.isclose((sm[0, 0] / sm[2, 0]).item(), 10.0, rel_tol=1e-12)


@pytest.mark.parametrize("mode", AGG_MODES)
def test_padding_changes_neither_loss_nor_gradient(mode: str) -> None:
    """Regression guard: verl's seq-mean-token-sum-norm divides by mask.shape[-1], so the same
    trajectory padded to another width got another loss; our constant is given, not inferred."""
    lp5, old5, adv5, _ = random_inputs(7, 2, 5)
    mask5 = torch.ones(2, 5, dtype=torch.bool)
    mask5[1, 3:] = False
    pad = 12 - 5
    garbage = torch.full((2, pad), 3.0, dtype=torch.float64)
    lp12 = torch.cat([lp5, garbage], 1).requires_grad_(True)
    lp5 = lp5.clone().requires_grad_(True)
    old12, adv12 = torch.cat([old5, garbage], 1), torch.cat([adv5, garbage], 1)
    mask12 = torch.cat([mask5, torch.zeros(2, pad, dtype=torch.bool)], 1)
    l5, _ = ppo_clip_loss(lp5, old5, adv5, mask5, agg=mode, constant=C)
    l12, _ = ppo_clip_loss(lp12, old12, adv12, mask12, agg=mode, constant=C)
    l5.backward()
    l12.backward()
    assert math.isclose(l5.item(), l12.item(), rel_tol=1e-14, abs_tol=1e-16)
    assert torch.equal(lp12.grad[:, :5], lp5.grad)
    assert torch.equal(lp12.grad[:, 5:], torch.zeros(2, pad, dtype=torch.float64))


class TinyPolicy(torch.nn.Module):
    """logprob of token y_t under softmax(x_t @ W): enough parameters to compare gradients."""

    def __init__(self, d: int, v: int, seed: int) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.w = torch.nn.Parameter(torch.randn(d, v, generator=g, dtype=torch.float64) * 0.5)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(x @ self.w, -1).gather(-1, y[..., None]).squeeze(-1)


def _micro_batch_case(seed: int, b: int = 8, t: int = 10, d: int = 4, v: int = 6):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(b, t, d, generator=g, dtype=torch.float64)
    y = torch.randint(0, v, (b, t), generator=g)
    policy = TinyPolicy(d, v, seed)
    with torch.no_grad():  # the sampling policy: slightly different weights, so ratios != 1
        old = TinyPolicy(d, v, seed)
        old.w.add_(torch.randn(d, v, generator=g, dtype=torch.float64) * 0.3)
        old_lp = old(x, y)
    adv = torch.randn(b, generator=g, dtype=torch.float64)[:, None].expand(b, t)
    lengths = torch.randint(0, t + 1, (b,), generator=g)
    mask = torch.arange(t)[None, :] < lengths[:, None]
    return policy, x, y, old_lp, adv, mask


def _grad(policy, loss):
    policy.zero_grad()
    loss.backward()
    return policy.w.grad.clone()


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("mode", AGG_MODES)
def test_micro_batch_accumulation_equals_full_batch(seed: int, mode: str) -> None:
    policy, x, y, old_lp, adv, mask = _micro_batch_case(seed)
    full, _ = ppo_clip_loss(policy(x, y), old_lp, adv, mask, agg=mode, constant=C)
    g_full = _grad(policy, full)
    denom = loss_denominator(mask, mode, C)
    policy.zero_grad()
    total = 0.0
    for sl in (slice(0, 3), slice(3, 4), slice(4, 8)):  # uneven micro-batches
        part, _ = ppo_clip_loss(
            policy(x[sl], y[sl]),
            old_lp[sl],
            adv[sl],
            mask[sl],
            agg=mode,
            constant=C,
            denominator=denom,
        )
        part.backward()
        total += part.item()
    assert math.isclose(total, full.item(), rel_tol=1e-12, abs_tol=1e-15)
    torch.testing.assert_close(policy.w.grad, g_full, rtol=1e-12, atol=1e-15)


def test_seq_sum_constant_local_loss_scaled_by_micro_over_global_also_matches() -> None:
    """The other documented recipe: equal micro-batches, local mean scaled by micro/global size."""
    policy, x, y, old_lp, adv, mask = _micro_batch_case(11)
    full, _ = ppo_clip_loss(policy(x, y), old_lp, adv, mask, constant=C)
    g_full = _grad(policy, full)
    policy.zero_grad()
    for start in range(0, 8, 2):
        sl = slice(start, start + 2)
        part, _ = ppo_clip_loss(policy(x[sl], y[sl]), old_lp[sl], adv[sl], mask[sl], constant=C)
        (part * 2 / 8).backward()
    torch.testing.assert_close(policy.w.grad, g_full, rtol=1e-12, atol=1e-15)


def test_token_mean_needs_the_global_denominator() -> None:
    """Why `denominator` exists: local token means scaled by row counts are not the full-batch
    token mean once micro-batches hold different numbers of tokens."""
    policy, x, y, old_lp, adv, mask = _micro_batch_case(5)
    mask[:4, 2:] = False  # first half short, second half long
    full, _ = ppo_clip_loss(policy(x, y), old_lp, adv, mask, agg="token-mean")
    naive = sum(
        ppo_clip_loss(policy(x[sl], y[sl]), old_lp[sl], adv[sl], mask[sl], agg="token-mean")[
            0
        ].item()
        * 4
        / 8
        for sl in (slice(0, 4), slice(4, 8))
    )
    assert not math.isclose(naive, full.item(), rel_tol=1e-6)


def test_loss_denominator_values() -> None:
    mask = torch.tensor([[1, 1, 0], [0, 0, 0], [1, 0, 0]])
    assert loss_denominator(mask, "seq-sum-constant", 32768) == 3 * 32768
    assert loss_denominator(mask, "token-mean") == 3
    assert loss_denominator(mask, "seq-mean-token-mean") == 2
    assert loss_denominator(torch.zeros(2, 4), "token-mean") == 1  # never divides by zero


def test_all_masked_batch_gives_zero_loss_and_zero_gradient() -> None:
    lp = torch.zeros(2, 3, requires_grad=True)
    for mode in AGG_MODES:
        loss, m = ppo_clip_loss(
            lp, torch.zeros(2, 3), torch.ones(2, 3), torch.zeros(2, 3), agg=mode, constant=C
        )
        loss.backward()
        assert loss.item() == 0.0 and m.clipfrac.item() == 0.0
    assert torch.equal(lp.grad, torch.zeros(2, 3))


def test_bad_arguments_are_refused() -> None:
    z = torch.zeros(2, 3)
    with pytest.raises(ValueError, match="needs a positive constant"):
        ppo_clip_loss(z, z, z, z, agg="seq-sum-constant")
    with pytest.raises(ValueError, match="unknown loss aggregation mode 'seq-mean-token-sum'"):
        agg_loss(z, z, "seq-mean-token-sum")
    with pytest.raises(ValueError, match=r"must all be \[B, T\]"):
        ppo_clip_loss(z, z, z[:1], z, constant=C)
    with pytest.raises(ValueError, match="eps_low"):
        ppo_clip_loss(z, z, z, z, eps_low=1.0, constant=C)
    with pytest.raises(ValueError, match="denominator must be > 0"):
        agg_loss(z, z, "token-mean", denominator=0.0)
