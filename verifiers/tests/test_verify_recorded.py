"""Recorded R2E-Gym/DeepSWE rollouts in, pools and a known selection out.

The records are written here in the exact shape of R2E-Gym's `Trajectory` dump (the keys of
tests/data/r2e-gym/*.json), small; the real fixtures are read when present.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from deepswe.verify.recorded import RecordedError, load_recorded, regression_pass_count
from deepswe.verify.select import select

FIXTURES = Path(os.environ["DEEPSWE_R2E_FIXTURES"])


def swebench_row(iid: str) -> dict:
    """A SWE-bench Verified row as R2E-Gym's SWE-Bench-Verified dataset carries it (ds)."""
    return {
        "instance_id": iid,
        "repo": "psf/requests",
        "base_commit": "0" * 40,
        "problem_statement": f"bug in {iid}",
        "patch": "",
        "test_patch": "",
        "FAIL_TO_PASS": '["tests/test_a.py::test_bug"]',
        "PASS_TO_PASS": "[]",
        "version": "2.0",
        "docker_image": f"slimshetty/swebench-verified:sweb.eval.x86_64.{iid}",
    }


def regression_log(passed: int, failed: int) -> str:
    lines = [f"PASSED tests/test_a.py::test_p{i}" for i in range(passed)]
    lines += [f"FAILED tests/test_a.py::test_f{i} - assert 'PASSED' == 'x'" for i in range(failed)]
    return "\n".join([">>>>> Start Test Output", *lines, ">>>>> End Test Output", ""])


def r2e_record(iid: str, patch: str, reward, prob, reg, repro, exp: str = "deepswe") -> dict:
    """One trajectory with every key R2E-Gym's runner writes."""
    ds = swebench_row(iid)
    return {
        "trajectory_steps": [],
        "problem_statement": ds["problem_statement"],
        "docker_image": ds["docker_image"],
        "exp_name": exp,
        "env_args": {"ds": ds, "repo_path": None, "docker_image": ds["docker_image"]},
        "agent_args": {"system_prompt": "You are a programming agent"},
        "ds": None,
        "max_steps": 100,
        "max_steps_absolute": 100,
        "max_token_limit": 65536,
        "max_llm_time": 7200,
        "max_exec_time": 90,
        "max_total_time": 50000,
        "exit_reason": "agent",
        "output_patch": patch,
        "reward": reward,
        "reward_calc_time": 3.0,
        "test_output": None,
        "custom_test_outputs": {},
        "regression_test_output": None if reg is None else regression_log(*reg),
        "verifier_prob": prob,
        "reproduction_test_scores": repro,
    }


# Task "b": three runs, the third without a reward, no reproduction tests at all.
# Task "a" across three runs (DeepSWE's traj/<exp>_run_<i>.jsonl, one line per task):
#   run_1: EF 0.9, 3 regression passes, repro [0, 0], wrong
#   run_2: EF 0.8, 5 passes, repro [1, 0], right
#   run_10: EF 0.2, 5 passes, repro [2, 0], wrong: its test printed "resolved" twice
RUNS = {
    "run_1": [("a", "pa1", 0.0, 0.9, (3, 2), [0, 0]), ("b", "pb1", 1.0, 0.7, (2, 0), [])],
    "run_2": [("a", "pa2", 1.0, 0.8, (5, 0), [1, 0]), ("b", "pb2", 0.0, 0.6, (2, 0), [])],
    "run_10": [("a", "pa3", 0.0, 0.2, (5, 0), [2, 0]), ("b", "pb3", None, 0.9, (2, 0), [])],
}


def write_runs(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, rows in RUNS.items():
        lines = [json.dumps(r2e_record(*row)) for row in rows]
        (folder / f"deepswe_tts_{name}.jsonl").write_text("\n".join(lines) + "\n")
    return folder


def test_pools_scores_and_a_known_selection(tmp_path: Path) -> None:
    got = load_recorded(write_runs(tmp_path / "traj"))
    assert got.records == 6
    a = got.scores["a"]
    # natural file order: run_1, run_2, run_10 -> runs 0, 1, 2
    assert [c.patch for c in got.candidates["a"]] == ["pa1", "pa2", "pa3"]
    assert [(s.ef, s.regression, s.reproduction, s.resolved) for s in a] == [
        (0.9, 3.0, 0.0, False),
        (0.8, 5.0, 1.0, True),
        (0.2, 5.0, 1.0, False),
    ]
    assert select(a, "ef").chosen == 0
    # hybrid: top max(1, 3 // 2) = 1 by EF -> run 0 alone
    assert select(a, "hybrid").chosen == 0
    # hybrid-curve keeps max(3, 1) = all three; most passes {1, 2}; repro tie; EF -> run 1
    assert select(a, "hybrid-curve").chosen == 1
    # eb: {1, 2} tie on passes and (capped) reproduction -> shared pick
    assert select(a, "eb").expected_resolved == 0.5


def test_raw_sum_reproduces_the_reference_substring_count(tmp_path: Path) -> None:
    """The reference counts every 'resolved' substring: run 2's doubled word outranks run 1."""
    got = load_recorded(write_runs(tmp_path / "traj"), counting="raw-sum")
    assert [s.reproduction for s in got.scores["a"]] == [0.0, 1.0, 2.0]
    assert select(got.scores["a"], "eb").chosen == 2


def test_rollouts_without_reward_are_skipped_not_unresolved(tmp_path: Path) -> None:
    got = load_recorded(write_runs(tmp_path / "traj"))
    assert len(got.scores["b"]) == 2
    assert [(s.instance_id, s.reason) for s in got.skipped] == [("b", "no reward recorded")]
    assert got.skipped[0].where.endswith("deepswe_tts_run_10.jsonl:2")


def test_empty_reproduction_list_is_missing_and_the_rule_is_skipped(tmp_path: Path) -> None:
    got = load_recorded(write_runs(tmp_path / "traj"))
    assert all(s.reproduction is None for s in got.scores["b"])
    sel = select(got.scores["b"], "hybrid")
    assert sel.chosen == 0 and "reproduction" in sel.detail


def test_missing_verifier_prob_is_none_and_ef_says_so(tmp_path: Path) -> None:
    rec = r2e_record("c", "p", 1.0, None, (1, 0), [1])
    path = tmp_path / "one.json"
    path.write_text(json.dumps(rec))
    got = load_recorded(path)
    assert got.scores["c"][0].ef is None
    assert select(got.scores["c"], "ef").status.value == "missing_scores"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"reward": 0.5}, "field reward: expected 0 or 1"),
        ({"docker_image": None}, "field docker_image"),
        ({"verifier_prob": "high"}, "field verifier_prob"),
        ({"reproduction_test_scores": [1, "x"]}, "field reproduction_test_scores.1"),
    ],
)
def test_bad_fields_are_named_with_file_and_line(tmp_path: Path, change, message) -> None:
    good = r2e_record("a", "p", 1.0, 0.5, (1, 0), [1])
    bad = {**good, **change}
    path = tmp_path / "x.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(RecordedError, match=rf"x\.jsonl:2: {message}"):
        load_recorded(path)


def test_not_json_and_empty_folder_are_named(tmp_path: Path) -> None:
    (tmp_path / "t.jsonl").write_text("{not json\n")
    with pytest.raises(RecordedError, match=r"t\.jsonl:1: not JSON"):
        load_recorded(tmp_path / "t.jsonl")
    (tmp_path / "empty").mkdir()
    with pytest.raises(RecordedError, match="no .json or .jsonl"):
        load_recorded(tmp_path / "empty")


def need_fixtures() -> list[Path]:
    files = sorted(FIXTURES.glob("trajectory_*.json"))
    if len(files) != 5:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI: the five R2E-Gym fixtures are missing from {FIXTURES}")
        pytest.skip(f"needs the R2E-Gym fixtures in {FIXTURES} (or DEEPSWE_R2E_FIXTURES)")
    return files


def test_real_fixtures_load_as_five_tasks_without_rewards() -> None:
    """The shared files hold no reward or scores (their run kept rewards in a summary): every
    rollout is skipped by name, none becomes an unresolved candidate."""
    files = need_fixtures()
    got = load_recorded(FIXTURES)
    assert got.records == len(files) and got.scores == {}
    assert sorted(s.instance_id for s in got.skipped) == sorted(
        f.stem.removeprefix("trajectory_") for f in files
    )


def test_regression_count_on_a_real_r2e_log() -> None:
    """A fixture's own gold-commit pytest log, read as a regression run: 19 tests PASSED, as its
    expected_output_json lists; the old commit's log passes fewer."""
    need_fixtures()
    from deepswe.data.loaders import row_to_task

    ds = json.loads((FIXTURES / "trajectory_aiohttp_216e0828.json").read_text())["env_args"]["ds"]
    task = row_to_task(ds)
    runs = json.loads(ds["execution_result_content"])
    expected = json.loads(ds["expected_output_json"])
    assert regression_pass_count(runs["new_commit_res_stdout"], task) == 19 == len(expected)
    assert regression_pass_count(runs["old_commit_res_stdout"], task) < 19
