"""Advantages (loo, grpo) against naive float64 loops, their properties, and the registry."""

from __future__ import annotations

import math
import statistics

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from deepswe.train.algos import (
    advantage_estimator,
    expand_to_tokens,
    group_index,
    grpo_advantages,
    loo_advantages,
)


def naive_loo(rewards: list[float], groups: list, base: list[bool]) -> list[float]:
    out = []
    for i, r in enumerate(rewards):
        others = [
            rewards[j] for j in range(len(rewards)) if j != i and groups[j] == groups[i] and base[j]
        ]
        out.append(r - (sum(others) / len(others) if others else 0.0))
    return out


def naive_grpo(
    rewards: list[float], groups: list, base: list[bool], eps: float = 1e-6
) -> list[float]:
    out = []
    for i, r in enumerate(rewards):
        members = [rewards[j] for j in range(len(rewards)) if groups[j] == groups[i] and base[j]]
        if len(members) >= 2:
            mean, std = statistics.fmean(members), statistics.stdev(members)
        else:
            mean, std = 0.0, 1.0
        out.append((r - mean) / (std + eps))
    return out


def random_batch(seed: int, n_groups: int, max_size: int):
    """Unequal group sizes including singletons, groups interleaved, rewards in [-1, 2]."""
    g = torch.Generator().manual_seed(seed)
    sizes = torch.randint(1, max_size + 1, (n_groups,), generator=g).tolist()
    sizes[0] = 1  # always one group of one
    groups = [k for k, s in enumerate(sizes) for _ in range(s)]
    perm = torch.randperm(len(groups), generator=g).tolist()
    groups = [groups[p] for p in perm]
    rewards = (torch.rand(len(groups), generator=g, dtype=torch.float64) * 3 - 1).tolist()
    base = (torch.rand(len(groups), generator=g) < 0.8).tolist()
    return rewards, groups, base


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("shape", [(1, 1), (3, 4), (10, 8), (40, 16)])
@pytest.mark.parametrize("with_mask", [False, True])
def test_loo_and_grpo_match_naive_loops(seed: int, shape: tuple[int, int], with_mask: bool) -> None:
    rewards, groups, base = random_batch(seed, *shape)
    if not with_mask:
        base = [True] * len(rewards)
    r = torch.tensor(rewards, dtype=torch.float64)
    bm = torch.tensor(base) if with_mask else None
    got_loo = loo_advantages(r, torch.tensor(groups), bm)
    got_grpo = grpo_advantages(r, torch.tensor(groups), bm)
    assert got_loo.dtype == torch.float64 and got_loo.shape == (len(rewards),)
    torch.testing.assert_close(
        got_loo, torch.tensor(naive_loo(rewards, groups, base), dtype=torch.float64)
    )
    torch.testing.assert_close(
        got_grpo, torch.tensor(naive_grpo(rewards, groups, base), dtype=torch.float64)
    )


@settings(max_examples=60, deadline=None)
@given(
    data=st.lists(
        st.tuples(st.sampled_from(["a", "b", "c", "task-7"]), st.floats(-5, 5), st.booleans()),
        min_size=1,
        max_size=24,
    )
)
def test_string_group_ids_and_float32_match_naive(data) -> None:
    groups = [d[0] for d in data]
    rewards = [d[1] for d in data]
    base = [d[2] for d in data]
    r32 = torch.tensor(rewards, dtype=torch.float32)
    rewards32 = r32.double().tolist()  # the reference sees the same rounded inputs
    got = loo_advantages(r32, groups, torch.tensor(base))
    assert got.dtype == torch.float32
    want = torch.tensor(naive_loo(rewards32, groups, base), dtype=torch.float32)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    got_g = grpo_advantages(r32, groups, torch.tensor(base)).double()
    want_g = torch.tensor(naive_grpo(rewards32, groups, base), dtype=torch.float64)
    # grpo divides by std + 1e-6: near-equal rewards amplify float32 rounding, so compare loosely.
    torch.testing.assert_close(got_g, want_g, atol=1e-3, rtol=1e-3)


@settings(max_examples=50, deadline=None)
@given(value=st.floats(-10, 10), size=st.integers(1, 16), n_groups=st.integers(1, 4))
def test_equal_rewards_in_a_group_give_zero_advantage(
    value: float, size: int, n_groups: int
) -> None:
    groups = [k for k in range(n_groups) for _ in range(size)]
    rewards = torch.tensor(
        [value + k for k in range(n_groups) for _ in range(size)], dtype=torch.float64
    )
    loo = loo_advantages(rewards, groups)
    grpo = grpo_advantages(rewards, groups)
    if size == 1:  # a group of one has baseline 0
        torch.testing.assert_close(loo, rewards)
    else:
        assert loo.abs().max().item() < 1e-12
        assert grpo.abs().max().item() < 1e-6


def test_binary_rewards_all_equal_are_exactly_zero() -> None:
    """0/1 rewards (the SWE reward) are exact in float: equal groups give exactly 0, not ~1e-17."""
    r = torch.tensor([1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0])
    adv = loo_advantages(r, [0, 0, 0, 1, 1, 1, 1])
    assert torch.equal(adv, torch.zeros(7))


def test_loo_known_values_and_group_of_one() -> None:
    # group 0: rewards 1, 0, 0, 1 -> each row minus mean of the other three
    r = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0])
    adv = loo_advantages(r, ["t0", "t0", "t0", "t0", "solo"])
    torch.testing.assert_close(adv, torch.tensor([1 - 1 / 3, -2 / 3, -2 / 3, 1 - 1 / 3, 1.0]))
    # LOO advantage is GRPO's centred reward scaled by G/(G-1): no std division.
    centred = r[:4] - r[:4].mean()
    torch.testing.assert_close(adv[:4], centred * 4 / 3)


def test_rows_outside_the_baseline_use_all_baseline_rows() -> None:
    r = torch.tensor([1.0, 0.0, 0.0, 0.0])
    bm = torch.tensor([True, True, True, False])
    adv = loo_advantages(r, [0, 0, 0, 0], bm)
    # row 3 is not in the baseline: its baseline is the mean of rows 0-2; rows 0-2 ignore row 3.
    torch.testing.assert_close(adv, torch.tensor([1.0, -0.5, -0.5, -1 / 3]))
    # a row whose whole group is outside the baseline gets baseline 0
    adv = loo_advantages(torch.tensor([0.5, 0.25]), [0, 0], torch.tensor([False, False]))
    torch.testing.assert_close(adv, torch.tensor([0.5, 0.25]))


def test_integer_rewards_give_float_advantages() -> None:
    adv = loo_advantages(torch.tensor([1, 0]), [3, 3])
    assert adv.dtype == torch.get_default_dtype()
    torch.testing.assert_close(adv, torch.tensor([1.0, -1.0]))


def test_group_index_numbers_groups_densely() -> None:
    assert group_index(["x", "y", "x", "z"]).tolist() == [0, 1, 0, 2]
    assert group_index(torch.tensor([70, 3, 70])).tolist() == [1, 0, 1]
    assert group_index([]).numel() == 0


def test_shape_errors_are_clear() -> None:
    with pytest.raises(ValueError, match="group_ids has 2 entries, rewards 3"):
        loo_advantages(torch.zeros(3), [0, 1])
    with pytest.raises(ValueError, match="rewards must be 1-D"):
        loo_advantages(torch.zeros(3, 1), [0, 1, 2])
    with pytest.raises(ValueError, match="baseline_mask shape"):
        loo_advantages(torch.zeros(3), [0, 1, 2], torch.ones(2, dtype=torch.bool))


def test_expand_to_tokens_broadcasts_and_zeroes_masked() -> None:
    adv = torch.tensor([2.0, -1.0])
    mask = torch.tensor([[1, 1, 0], [0, 1, 1]])
    assert expand_to_tokens(adv, mask).tolist() == [[2.0, 2.0, 0.0], [0.0, -1.0, -1.0]]
    with pytest.raises(ValueError, match=r"want advantages \[B\]"):
        expand_to_tokens(adv, mask[:1])


def test_registry_resolves_names_and_user_plugins(tmp_path, monkeypatch) -> None:
    assert advantage_estimator("loo") is loo_advantages
    assert advantage_estimator("grpo") is grpo_advantages
    plugin = tmp_path / "my_adv_plugin.py"
    plugin.write_text(
        "def sign_adv(rewards, group_ids, baseline_mask=None):\n    return rewards.sign()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    fn = advantage_estimator("my_adv_plugin:sign_adv")
    assert fn(torch.tensor([-2.0, 3.0]), [0, 0]).tolist() == [-1.0, 1.0]
    with pytest.raises(
        ValueError, match=r"unknown advantage estimator 'rloo'; known: \['grpo', 'loo'\]"
    ):
        advantage_estimator("rloo")
    with pytest.raises(ValueError, match="cannot import"):
        advantage_estimator("my_adv_plugin:missing")


def test_grpo_single_member_group_is_unscaled() -> None:
    adv = grpo_advantages(torch.tensor([0.7]), [0], eps=0.0)
    assert math.isclose(adv.item(), 0.7, rel_tol=1e-6)
