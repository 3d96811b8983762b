"""Step metrics over a real RolloutBatch (collate) and real compact filtering: reward means leave
infra_error rows out and count them."""

from __future__ import annotations

from deepswe.env.trajectory import Ending
from deepswe.train.algos import compact_filter
from deepswe.train.metrics import reward_metrics, step_metrics
from deepswe.train.metrics_log import progress_line
from deepswe.train.rollout import TokenSequence, collate

INFRA = Ending.INFRA_ERROR.value
DONE = Ending.SUBMITTED.value


def batch(rows: list[tuple[float | None, int]]):
    """One row per (reward, group); reward None is an infra_error rollout, filled with 0 as
    Trainer.to_batch fills it, with no tokens (its sandbox never started)."""
    seqs = []
    for reward, _ in rows:
        seq = TokenSequence()
        if reward is not None:
            seq.add([1, 2], sampled=False)
            seq.add([3], sampled=True, logprobs=[-0.5])
        seqs.append(seq)
    rewards = [0.0 if r is None else r for r, _ in rows]
    endings = [INFRA if r is None else DONE for r, _ in rows]
    return collate(seqs, rewards, [g for _, g in rows], endings, pad_id=0)


def record(b):
    counts = compact_filter(b.endings, b.rewards, b.loss_mask).counts
    return step_metrics(1, b, counts, None, 0.0, {"step": 1.0})


def test_infra_rows_are_left_out_of_the_reward_mean_and_counted():
    """Regression (#23): infra_error rows entered reward/mean as 0 (here 2/8 = 0.25 instead of
    2/3), and a group whose every rollout failed on infrastructure counted as solved by none."""
    b = batch([(1.0, 0), (0.0, 0), (None, 0), (1.0, 0), (None, 1), (None, 1), (None, 1), (None, 1)])
    r = record(b)
    assert r["reward/mean"] == 2 / 3 and r["reward/infra_rows"] == 5
    assert (r["groups/partial"], r["groups/solve_all"], r["groups/solve_none"]) == (1, 0, 0)
    assert r["filter/dropped"] == 5 and r["filter/trained"] == 3  # the filter agrees
    assert "reward 0.667" in progress_line(r) and "5 infra_error" in progress_line(r)


def test_a_batch_without_infra_rows_is_averaged_over_all_of_them():
    r = reward_metrics(batch([(1.0, 0), (0.0, 0), (0.0, 1), (0.0, 1)]))
    assert r == {
        "reward/infra_rows": 0.0,
        "reward/mean": 0.25,
        "groups/solve_all": 0.0,
        "groups/solve_none": 1.0,
        "groups/partial": 1.0,
    }


def test_a_step_where_every_rollout_failed_on_infrastructure_has_no_reward():
    r = record(batch([(None, 0), (None, 0)]))
    assert "reward/mean" not in r and r["reward/infra_rows"] == 2
    assert r["groups/solve_none"] == r["groups/solve_all"] == r["groups/partial"] == 0
    assert "no reward (every rollout infra_error)" in progress_line(r)


def test_rows_that_attack_the_reward_are_counted_apart():
    """The grader's tampered verdicts and the static gate's flags, per step: a policy learning
    to attack the reward shows here before it shows in reward/mean."""
    from types import SimpleNamespace

    from deepswe.env.grading.outcomes import GateFlag, GradeResult, Outcome
    from deepswe.train.metrics import integrity_metrics

    flag = {"rule": "r", "path": "p.py", "line": 1, "text": "x"}
    grades = [
        GradeResult(outcome=Outcome.TAMPERED, parser="pytest", reason="canary"),
        GradeResult(
            outcome=Outcome.UNRESOLVED,
            parser="pytest",
            reason="gate",
            static_gate=[GateFlag(tier=1, **flag), GateFlag(tier=2, **flag)],
        ),
        GradeResult(outcome=Outcome.RESOLVED, parser="pytest", reason="ok"),
        None,  # an infra_error row has no grade
    ]
    rows = [SimpleNamespace(grade=g) for g in grades]
    assert integrity_metrics(rows) == {
        "reward/tampered_rows": 1.0,
        "reward/gate_tier1_rows": 1.0,
        "reward/gate_tier2_rows": 1.0,
    }


def test_the_wall_clock_limits_that_fired_are_counted_per_step():
    """Issue #44: a limit that fires under load and not on a quiet machine makes a seeded run
    depend on the machine; each step says how many fired (limits/*)."""
    from deepswe.env.grading.outcomes import GradeResult, Outcome
    from deepswe.env.trajectory import Ending, Step, Trajectory
    from deepswe.train.metrics import timing_metrics

    def traj(ending, timed_out=(), outcome=None):
        steps = [Step(index=i, assistant="", action_timed_out=t) for i, t in enumerate(timed_out)]
        grade = GradeResult(outcome=outcome, parser="pytest", reason="r") if outcome else None
        return Trajectory(
            instance_id="t", policy="p", messages=[], ending=ending, steps=steps, grade=grade
        )

    rows = [
        traj(Ending.SUBMITTED, (False, True, True), Outcome.RESOLVED),
        traj(Ending.TIMEOUT, (False,), Outcome.UNRESOLVED),
        traj(Ending.SUBMITTED, (), Outcome.TEST_TIMEOUT),
        traj(Ending.INFRA_ERROR),
    ]
    assert timing_metrics(rows) == {
        "limits/action_timeouts": 2.0,
        "limits/episode_timeouts": 1.0,
        "limits/test_timeouts": 1.0,
        "limits/fired": 4.0,
    }
    assert timing_metrics([traj(Ending.SUBMITTED, (False,), Outcome.RESOLVED)])["limits/fired"] == 0
