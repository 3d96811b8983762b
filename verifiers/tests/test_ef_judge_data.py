"""Judge SFT data: train-split tasks only, one positive and one negative per mixed task, capped
single-outcome tasks, seeded choices, a file that reads back."""

from __future__ import annotations

import pytest

from deepswe.env.trajectory import Ending, Step, Trajectory
from deepswe.verify.ef.judge_data import build_judge_rows, read_rows, task_splits, write_rows
from deepswe.verify.types import Candidate


def count(messages) -> int:  # a stand-in token counter: 4 characters a token
    return sum(len(m["content"]) for m in messages) // 4


def cand(iid: str, run: int, resolved: bool | None) -> Candidate:
    traj = Trajectory(
        instance_id=iid,
        policy="t",
        messages=[],
        ending=Ending.SUBMITTED,
        steps=[Step(index=0, assistant=f"try {run}\n<function=finish>\n</function>")],
    )
    return Candidate(
        instance_id=iid,
        run=run,
        patch=f"patch {run}",
        resolved=resolved,
        problem_statement=f"issue of {iid}",
        trajectory=traj,
    )


def pools() -> dict[str, list[Candidate]]:
    mixed = {f"mixed-{t}": [cand(f"mixed-{t}", k, k % 3 == 0) for k in range(6)] for t in range(3)}
    fail = {f"fail-{t}": [cand(f"fail-{t}", k, False) for k in range(4)] for t in range(5)}
    win = {"win-0": [cand("win-0", k, True) for k in range(4)]}
    return {**mixed, **fail, **win}


def test_one_positive_one_negative_per_mixed_task_and_capped_single_outcome_tasks():
    p = pools()
    splits = dict.fromkeys(p, "train")
    rows = build_judge_rows(p, splits, count, 10**6, single_outcome_cap=2, seed=1, log=print)
    by_task: dict[str, list[str]] = {}
    for r in rows:
        by_task.setdefault(r.instance_id, []).append(r.label)
        assert r.messages[-1]["content"] == f"<judgement>{r.label}</judgement>"
        assert [m["role"] for m in r.messages] == ["system", "user", "assistant"]
        truth = next(c for c in p[r.instance_id] if c.run == r.run).resolved
        assert r.label == ("YES" if truth else "NO")
    assert all(sorted(by_task[f"mixed-{t}"]) == ["NO", "YES"] for t in range(3))
    singles = [t for t in by_task if not t.startswith("mixed")]
    assert len(singles) == 2 and all(len(by_task[t]) == 1 for t in singles)
    again = build_judge_rows(p, splits, count, 10**6, single_outcome_cap=2, seed=1, log=print)
    assert again == rows  # seeded
    fewer = {k: v for k, v in p.items() if k != "fail-4"}
    smaller = build_judge_rows(fewer, splits, count, 10**6, single_outcome_cap=0, seed=1)
    assert [r for r in rows if r.instance_id.startswith("mixed")] == smaller  # per-task seeds


def test_test_split_tasks_are_refused_by_name():
    p = pools()
    splits: dict[str, str | None] = dict.fromkeys(p, "train")
    splits["fail-3"], splits["win-0"] = "test", None
    with pytest.raises(
        ValueError,
        match=r"train-split tasks only; 2 are not: fail-3 \(test\), "
        r"win-0 \(split unknown\)",
    ):
        build_judge_rows(p, splits, count, 10**6)


def test_swe_mini_splits_come_from_the_dataset():
    train, test = task_splits("swe-mini:train"), task_splits("swe-mini:test")
    assert train and test and set(train.values()) == {"train"} and set(test.values()) == {"test"}
    both = task_splits("swe-mini")
    assert {i: s for i, s in both.items() if s == "test"} == test


def test_rows_round_trip_through_the_file(tmp_path):
    p = pools()
    rows = build_judge_rows(p, dict.fromkeys(p, "train"), count, 10**6, log=lambda _: None)
    assert read_rows(write_rows(rows, tmp_path / "judge.jsonl")) == rows
    (tmp_path / "bad.jsonl").write_text('{"instance_id": "x"}\n')
    with pytest.raises(ValueError, match="bad.jsonl:1: not a judge-data row"):
        read_rows(tmp_path / "bad.jsonl")
