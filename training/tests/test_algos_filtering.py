"""Compact filtering semantics, and how it feeds the leave-one-out baseline."""

from __future__ import annotations

from enum import Enum

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from deepswe.train.algos import ENDINGS, compact_filter, loo_advantages

CUT_OFF = {"max_context", "max_steps", "timeout"}


class Ending(str, Enum):  # what an agent loop's ending enum looks like
    SUBMITTED = "submitted"
    MAX_STEPS = "max_steps"
    INFRA_ERROR = "infra_error"


def test_reference_semantics_row_by_row() -> None:
    endings = [
        "submitted",
        "max_steps",
        "max_context",
        "timeout",
        "agent_error",
        "infra_error",
        "submitted",
    ]
    rewards = torch.tensor([1.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0])
    mask = torch.ones(7, 4, dtype=torch.bool)
    mask[:, 3] = False  # padding stays padding
    res = compact_filter(endings, rewards, mask)
    assert res.rewards.tolist() == [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    trained = res.loss_mask.any(dim=1).tolist()
    # cut-off rows and the infra row are not trained on; agent_error (the model's fault) is
    assert trained == [True, False, False, False, True, False, True]
    assert torch.equal(res.loss_mask[0], mask[0])
    # masked rows still count in the baseline (reference); the infra row never does
    assert res.baseline_mask.tolist() == [True, True, True, True, True, False, True]
    assert res.keep_rows.tolist() == [True] * 5 + [False, True]
    c = res.counts
    assert (c.masked, c.dropped, c.trained) == (3, 1, 3)
    assert c.by_ending == {
        "submitted": 2,
        "max_steps": 1,
        "max_context": 1,
        "timeout": 1,
        "agent_error": 1,
        "infra_error": 1,
    }
    d = c.as_dict()
    assert d["filter/masked"] == 3.0 and d["filter/ending/infra_error"] == 1.0


def test_switch_removes_masked_rows_from_the_baseline() -> None:
    endings = ["submitted", "submitted", "max_steps", "max_steps"]
    rewards = torch.tensor([1.0, 0.0, 0.0, 0.0])
    res = compact_filter(endings, rewards, torch.ones(4, 2), keep_in_baseline=False)
    assert res.baseline_mask.tolist() == [True, True, False, False]
    adv = loo_advantages(res.rewards, [0, 0, 0, 0], res.baseline_mask)
    assert adv[:2].tolist() == [1.0, -1.0]  # only the two finished rows form the baseline
    kept = compact_filter(endings, rewards, torch.ones(4, 2))
    adv = loo_advantages(kept.rewards, [0, 0, 0, 0], kept.baseline_mask)
    assert adv[:2].tolist() == pytest.approx(
        [1.0, -1 / 3]
    )  # the two masked rows pull the baseline as zeros


def test_infra_error_rows_are_dropped_not_trained_as_failures() -> None:
    endings = ["submitted", "infra_error", "submitted", "infra_error"]
    rewards = torch.tensor([1.0, 0.0, 0.0, 0.0])
    group = torch.tensor([0, 0, 0, 0])
    res = compact_filter(endings, rewards, torch.ones(4, 3))
    rows = res.keep_rows
    adv = loo_advantages(res.rewards[rows], group[rows], res.baseline_mask[rows])
    assert adv.tolist() == [1.0, -1.0]  # as if the infra rows never happened
    # a caller that forgets to index with keep_rows still gets the same advantages for real rows
    adv_all = loo_advantages(res.rewards, group, res.baseline_mask)
    assert adv_all[rows].tolist() == [1.0, -1.0]
    assert not res.loss_mask[~rows].any()


def test_enum_endings_and_custom_mask_set() -> None:
    res = compact_filter(
        [Ending.SUBMITTED, Ending.MAX_STEPS, Ending.INFRA_ERROR], torch.ones(3), torch.ones(3, 1)
    )
    assert res.counts.by_ending["max_steps"] == 1 and res.keep_rows.tolist() == [True, True, False]
    res = compact_filter(
        ["agent_error", "timeout"], torch.ones(2), torch.ones(2, 1), mask_endings={"agent_error"}
    )
    assert res.loss_mask[:, 0].tolist() == [False, True]
    res = compact_filter(["timeout"], torch.ones(1), torch.ones(1, 1), mask_endings=())
    assert res.loss_mask.all() and res.rewards.tolist() == [1.0]


def test_drop_endings_drop_more_than_infra_error() -> None:
    """agent_error from an inference-endpoint failure can be dropped like infra_error."""
    endings = ["submitted", "agent_error", "max_steps", "infra_error"]
    res = compact_filter(endings, torch.ones(4), torch.ones(4, 2), drop_endings=["agent_error"])
    assert res.keep_rows.tolist() == [True, False, True, False]
    assert res.baseline_mask.tolist() == [True, False, True, False]
    assert (res.counts.masked, res.counts.dropped, res.counts.trained) == (1, 2, 1)
    with pytest.raises(ValueError, match=r"both masked and dropped: \['max_steps'\]"):
        compact_filter(endings, torch.ones(4), torch.ones(4, 2), drop_endings=["max_steps"])
    with pytest.raises(ValueError, match=r"cannot drop endings \['submitted'\]"):
        compact_filter(endings, torch.ones(4), torch.ones(4, 2), drop_endings=["submitted"])


def test_errors_name_the_row_and_the_value() -> None:
    with pytest.raises(ValueError, match=r"row 1: unknown episode ending 'error'"):
        compact_filter(["submitted", "error"], torch.ones(2), torch.ones(2, 1))
    with pytest.raises(ValueError, match=r"cannot mask endings \['infra_error', 'submitted'\]"):
        compact_filter(
            ["submitted"],
            torch.ones(1),
            torch.ones(1, 1),
            mask_endings={"submitted", "infra_error"},
        )
    with pytest.raises(ValueError, match="want B endings"):
        compact_filter(["submitted"], torch.ones(2), torch.ones(2, 1))


@settings(max_examples=80, deadline=None)
@given(
    rows=st.lists(
        st.tuples(st.sampled_from(ENDINGS), st.sampled_from([0.0, 1.0]), st.integers(0, 5)),
        min_size=1,
        max_size=20,
    ),
    keep=st.booleans(),
)
def test_filter_invariants(rows, keep: bool) -> None:
    endings = [r[0] for r in rows]
    rewards = torch.tensor([r[1] for r in rows])
    mask = torch.arange(5)[None, :] < torch.tensor([r[2] for r in rows])[:, None]
    res = compact_filter(endings, rewards, mask, keep_in_baseline=keep)
    c = res.counts
    assert sum(c.by_ending.values()) == len(rows) == c.masked + c.dropped + c.trained
    for i, e in enumerate(endings):
        untrained = e in CUT_OFF or e == "infra_error"
        assert res.keep_rows[i].item() == (e != "infra_error")
        if untrained:
            assert not res.loss_mask[i].any() and res.rewards[i].item() == 0.0
        else:  # submitted and agent_error rows are untouched
            assert (
                torch.equal(res.loss_mask[i], mask[i])
                and res.rewards[i].item() == rewards[i].item()
            )
        in_base = e != "infra_error" and (keep or e not in CUT_OFF)
        assert res.baseline_mask[i].item() == in_base
    assert res.loss_mask.dtype == torch.bool and res.loss_mask.shape == mask.shape


def test_endings_match_the_agent_loops_enum() -> None:
    """Drift guard: every Ending the agent loop can produce is known here, and nothing else."""
    from deepswe.env.trajectory import Ending as LoopEnding

    assert {e.value for e in LoopEnding} == set(ENDINGS)
    res = compact_filter(
        list(LoopEnding), torch.ones(len(LoopEnding)), torch.ones(len(LoopEnding), 1)
    )
    assert sum(res.counts.by_ending.values()) == len(LoopEnding)
