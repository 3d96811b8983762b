"""Step metrics: what one GRPO++ step did, as flat `section/name -> float` records.

Written by metrics_log.MetricsLog (runs/ID/metrics.jsonl, TensorBoard). Keys under `time/` are wall-clock
seconds; every other key is a deterministic function of the run's seed and config.

Reward metrics (`reward/mean`, `groups/*`) are over the rows whose reward means something:
infra_error rows (sandbox, endpoint or grading failures: nobody's answer, reward None, dropped
from the update) are left out and counted in `reward/infra_rows`. A step where every row is
infra_error has no `reward/mean`. `reward/tampered_rows` and `reward/gate_tier{1,2}_rows` count
the rows the grader caught attacking the reward (reward 0, kept in the update).

Keys under `limits/` count the wall-clock limits that fired in the step's episodes: a tool call
cut at `episode.action_timeout_s`, an episode at `wall_timeout_s`, a reward run at its test
timeout. They are not a function of the seed: a machine under load fires limits a quiet one does
not, and then the same seed need not give the same run. `limits/fired` is their sum; with
`reward/infra_rows` (a sandbox start or a grading that failed) it says whether a step's result
could depend on the machine (`timing_metrics`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from deepswe.train.algos import FilterCounts
from deepswe.train.algos.filtering import ALWAYS_DROPPED
from deepswe.train.backends import StepStats
from deepswe.train.rollout import RolloutBatch


def group_metrics(rewards: Sequence[float], groups: Sequence[int]) -> dict[str, float]:
    """Groups every rollout solved / none solved / some solved (GRPO learns only from the
    last: a group with equal rewards has zero advantages)."""
    by: dict[int, list[float]] = defaultdict(list)
    for r, g in zip(rewards, groups, strict=True):
        by[g].append(r)
    solved = [[r > 0 for r in rs] for rs in by.values()]
    return {
        "groups/solve_all": float(sum(all(s) for s in solved)),
        "groups/solve_none": float(sum(not any(s) for s in solved)),
        "groups/partial": float(sum(any(s) and not all(s) for s in solved)),
    }


def reward_metrics(batch: RolloutBatch) -> dict[str, float]:
    """reward/mean and the group counts over the batch's non-infra rows; reward/infra_rows.

    Regression (#23): infra_error rows entered the mean as reward 0 (to_batch fills their None
    with 0), so a step whose endpoint or sandboxes failed read as a model that got worse."""
    infra = [ending in ALWAYS_DROPPED for ending in batch.endings]
    scored = [
        (r, g)
        for r, g, bad in zip(batch.rewards.tolist(), batch.group_ids.tolist(), infra, strict=True)
        if not bad
    ]
    out: dict[str, float] = {"reward/infra_rows": float(sum(infra))}
    if scored:
        out["reward/mean"] = sum(r for r, _ in scored) / len(scored)
    out.update(group_metrics([r for r, _ in scored], [g for _, g in scored]))
    return out


def integrity_metrics(trajs: Sequence[Any]) -> dict[str, float]:
    """Rows the grader caught taking over the test process (outcome `tampered`) and rows whose
    patch the static gate flagged (tier 1: reaches for the test machinery; tier 2: looks like
    it): a policy learning to attack the reward shows here before it shows in reward/mean."""
    grades = [getattr(t, "grade", None) for t in trajs]
    gates = [{f.tier for f in g.static_gate} if g is not None else set() for g in grades]
    return {
        "reward/tampered_rows": float(
            sum(g is not None and g.outcome.value == "tampered" for g in grades)
        ),
        "reward/gate_tier1_rows": float(sum(1 in tiers for tiers in gates)),
        "reward/gate_tier2_rows": float(sum(2 in tiers for tiers in gates)),
    }


def timing_metrics(trajs: Sequence[Any]) -> dict[str, float]:
    """The wall-clock limits that fired in `trajs` (module doc)."""
    action = sum(bool(getattr(s, "action_timed_out", False)) for t in trajs for s in t.steps)
    episode = sum(getattr(t.ending, "value", t.ending) == "timeout" for t in trajs)
    grades = [getattr(t, "grade", None) for t in trajs]
    tests = sum(g is not None and g.outcome.value == "test_timeout" for g in grades)
    return {
        "limits/action_timeouts": float(action),
        "limits/episode_timeouts": float(episode),
        "limits/test_timeouts": float(tests),
        "limits/fired": float(action + episode + tests),
    }


def episode_seconds(trajs: Sequence[Any]) -> dict[str, float]:
    """The batch's episode seconds summed over episodes: waiting for replies, in tool calls,
    in the reward run (keys of `time/`, deepswe.train.step_record)."""
    return {
        "episodes_model": sum(s.model_seconds for t in trajs for s in t.steps),
        "episodes_tools": sum(s.tool_seconds for t in trajs for s in t.steps),
        "episodes_grading": sum(t.grade_seconds for t in trajs),
    }


def staleness_metrics(trajs: Sequence[Any], trained_from: int) -> dict[str, float]:
    """How many policy versions each trajectory lags the weights it trained (`trained_from`,
    optimizer steps done before this update): `staleness/max`, `staleness/mean` and a count
    per lag (`staleness/0`, `staleness/1`). A function of the config, not of timing."""
    lags = [trained_from - t.policy_version for t in trajs if t.policy_version is not None]
    out: dict[str, float] = {}
    if lags:
        out["staleness/max"] = float(max(lags))
        out["staleness/mean"] = sum(lags) / len(lags)
        for lag in sorted(set(lags)):
            out[f"staleness/{lag}"] = float(lags.count(lag))
    return out


def step_metrics(
    step: int,
    batch: RolloutBatch,
    counts: FilterCounts,
    stats: StepStats | None,
    logprob_diff: float,
    times: dict[str, float],
) -> dict[str, Any]:
    out: dict[str, Any] = {"step": step}
    out.update(reward_metrics(batch))
    out.update(counts.as_dict())
    out["tokens/total"] = float(batch.attention_mask.sum())
    out["tokens/response"] = float(batch.loss_mask.sum())
    out["tokens/trained"] = float(stats.trained_tokens if stats else 0)
    # Mean |log pi_engine - log pi_trainer| on sampled tokens: ~0 unless the engine and the
    # trainer disagree (precision, kernels, or stale weights).
    out["rollout/logprob_diff"] = logprob_diff
    if stats is not None:
        out.update(
            {
                "actor/loss": stats.loss,
                "actor/grad_norm": stats.grad_norm,
                "actor/skipped": float(stats.skipped),
                "actor/clipfrac": stats.clipfrac,
                "actor/approx_kl": stats.approx_kl,
                "actor/entropy": stats.entropy,
            }
        )
    out.update({f"time/{k}": v for k, v in times.items()})
    return out
