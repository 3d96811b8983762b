"""KL estimators, entropy, and GRPOConfig (reference values, validation, unknown keys)."""

from __future__ import annotations

import math

import pytest
import torch
import yaml

from deepswe.train.algos import GRPOConfig, advantage_estimator, entropy_from_logits, kl_penalty


def naive_kl(lp: float, ref: float, kind: str) -> float:
    d = lp - ref
    if kind == "k1":
        return d
    if kind == "abs":
        return abs(d)
    if kind == "k2":
        return 0.5 * d * d
    x = min(max(ref - lp, -20.0), 20.0)
    return min(math.exp(x) - x - 1.0, 10.0)


@pytest.mark.parametrize("kind", ["k1", "abs", "k2", "k3", "low_var_kl"])
@pytest.mark.parametrize("seed", range(3))
def test_kl_penalty_matches_naive(kind: str, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    lp = -torch.rand(3, 17, generator=g, dtype=torch.float64) * 5
    ref = lp + torch.randn(3, 17, generator=g, dtype=torch.float64) * (4.0 if seed == 2 else 0.5)
    got = kl_penalty(lp, ref, kind)
    want = [
        [naive_kl(a, b, kind) for a, b in zip(ra, rb, strict=True)]
        for ra, rb in zip(lp.tolist(), ref.tolist(), strict=True)
    ]
    torch.testing.assert_close(got, torch.tensor(want, dtype=torch.float64), rtol=1e-12, atol=1e-12)
    if kind in ("k3", "low_var_kl", "abs", "k2"):
        assert (got >= 0).all()


def test_k3_estimates_the_true_kl() -> None:
    """Sampled from pi, the means of k1 and k3 converge to KL(pi || ref) (policies close enough
    that k3's value clamp at 10 never bites)."""
    g = torch.Generator().manual_seed(0)
    p = torch.softmax(torch.randn(5, generator=g, dtype=torch.float64) * 0.5, 0)
    q = torch.softmax(torch.randn(5, generator=g, dtype=torch.float64) * 0.5, 0)
    idx = torch.multinomial(p, 200_000, replacement=True, generator=g)
    true = (p * (p.log() - q.log())).sum().item()
    for kind in ("k1", "k3"):
        est = kl_penalty(p.log()[idx][None], q.log()[idx][None], kind).mean().item()
        assert abs(est - true) < 0.05 * true, kind


def test_kl_penalty_rejects_unknown_kind() -> None:
    with pytest.raises(ValueError, match="unknown KL estimator 'full'"):
        kl_penalty(torch.zeros(1, 1), torch.zeros(1, 1), "full")


@pytest.mark.parametrize("shape", [(1, 1, 2), (2, 5, 7), (3, 4, 50)])
def test_entropy_matches_naive_and_chunking(shape) -> None:
    g = torch.Generator().manual_seed(sum(shape))
    logits = torch.randn(*shape, generator=g, dtype=torch.float64) * 3
    got = entropy_from_logits(logits)
    want = []
    for row in logits.reshape(-1, shape[-1]).tolist():
        m = max(row)
        z = sum(math.exp(x - m) for x in row)
        want.append(-sum(math.exp(x - m) / z * ((x - m) - math.log(z)) for x in row))
    torch.testing.assert_close(got, torch.tensor(want, dtype=torch.float64).reshape(shape[:2]))
    torch.testing.assert_close(entropy_from_logits(logits, chunk_size=3), got, rtol=0, atol=0)
    assert (got <= math.log(shape[-1]) + 1e-12).all()


def test_entropy_of_uniform_and_half_precision() -> None:
    uniform = torch.zeros(1, 2, 8, dtype=torch.bfloat16)
    h = entropy_from_logits(uniform)
    assert h.dtype == torch.float32
    torch.testing.assert_close(h, torch.full((1, 2), math.log(8)))


def test_defaults_are_the_deepswe_recipe() -> None:
    cfg = GRPOConfig()
    assert (cfg.eps_low, cfg.eps_high) == (0.2, 0.28)
    assert (cfg.loss_agg, cfg.loss_constant) == ("seq-sum-constant", 32768)
    assert (
        cfg.adv_estimator == "loo"
        and advantage_estimator(cfg.adv_estimator).__name__ == "loo_advantages"
    )
    assert (cfg.kl_coef, cfg.entropy_coef) == (0.0, 0.0)
    assert cfg.mask_endings == {"max_context", "max_steps", "timeout"}
    assert cfg.keep_masked_in_baseline is True and cfg.drop_endings == frozenset()


def test_config_from_yaml_and_unknown_key_named() -> None:
    text = "eps_high: 0.3\nmask_endings: [timeout, max_steps]\nadv_estimator: grpo\n"
    cfg = GRPOConfig.from_dict(yaml.safe_load(text))
    assert cfg.eps_high == 0.3 and cfg.mask_endings == {"timeout", "max_steps"}
    with pytest.raises(ValueError, match=r"algo\.clip_ratio_high: unknown key"):
        GRPOConfig.from_dict({"clip_ratio_high": 0.28}, where="algo")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"eps_low": 1.0}, "eps_low"),
        ({"eps_low": 0.3, "eps_high": 0.2}, r"eps_high \(0.2\) < eps_low \(0.3\)"),
        ({"loss_agg": "seq-mean-token-sum-norm"}, "loss_agg"),
        ({"loss_constant": 0}, "loss_constant"),
        ({"adv_estimator": "rloo"}, r"adv_estimator: Value error, unknown 'rloo'"),
        ({"kl_estimator": "full"}, "kl_estimator"),
        ({"kl_coef": -0.1}, "kl_coef"),
        ({"kl_coef": 0.001}, r"kl_coef: Value error, 0.001 > 0 asks for a KL-to-reference term"),
        ({"entropy_coef": 0.01}, r"entropy_coef: Value error, 0.01 > 0 asks for an entropy term"),
        (
            {"mask_endings": ["infra_error"]},
            r"mask_endings: Value error, cannot mask endings \['infra_error'\]",
        ),
        ({"mask_endings": "timeout"}, "not one string"),
        ({"drop_endings": ["submitted"]}, r"drop_endings: Value error, cannot drop endings"),
        ({"drop_endings": ["timeout"]}, r"both masked and dropped: \['timeout'\]"),
    ],
)
def test_invalid_values_are_refused_by_name(data, message) -> None:
    with pytest.raises(ValueError, match=message):
        GRPOConfig.from_dict(data)


def test_config_is_frozen_and_round_trips() -> None:
    cfg = GRPOConfig(eps_high=0.3)
    with pytest.raises(Exception, match="frozen"):
        cfg.eps_high = 0.4  # type: ignore[misc]
    dumped = cfg.model_dump(mode="json")
    assert GRPOConfig.from_dict(dumped) == cfg
    assert sorted(dumped["mask_endings"]) == ["max_context", "max_steps", "timeout"]
