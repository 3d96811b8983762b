"""swe-toy: deterministic, held-out by project and function name, one fix text throughout.
(Gold resolving and the empty patch not are checked in Docker by the reproduce report's test,
which grades swe-toy tasks with both policies.)"""

from __future__ import annotations

import subprocess

import pytest
from typer.testing import CliRunner

from deepswe.data.cli import app
from deepswe.data.datasets import load_tasks
from deepswe.data.swetoy import BUGGY, FIXED, make_task, write_dataset


def test_the_same_sizes_and_seed_give_the_same_rows_and_commits(tmp_path):
    a = write_dataset(tmp_path / "a", 3, 2)
    b = write_dataset(tmp_path / "b", 3, 2)
    for split in ("train", "test"):
        rows_a = [t.model_dump(exclude={"environment"}) for t in load_tasks(a[split])]
        rows_b = [t.model_dump(exclude={"environment"}) for t in load_tasks(b[split])]
        assert rows_a == rows_b and len(rows_a) == {"train": 3, "test": 2}[split]
    other = make_task(tmp_path / "c", "train", 0, seed=1)
    assert other.base_commit != load_tasks(a["train"])[0].base_commit


def test_splits_share_no_project_or_function_and_every_fix_is_the_same_line(tmp_path):
    paths = write_dataset(tmp_path, 12, 12)
    train, test = load_tasks(paths["train"]), load_tasks(paths["test"])
    names = {
        s: {t.hidden.fail_to_pass[0].split("::test_")[1] for t in ts}
        for s, ts in (("train", train), ("test", test))
    }
    assert not names["train"] & names["test"] and len(names["test"]) > 3
    assert not {t.repo for t in train} & {t.repo for t in test}
    for t in train + test:
        minus = [ln for ln in t.gold_patch.splitlines() if ln.startswith("-    ")]
        plus = [ln for ln in t.gold_patch.splitlines() if ln.startswith("+    ")]
        assert (minus, plus) == ([f"-    {BUGGY}"], [f"+    {FIXED}"])
        ops = subprocess.run(
            ["git", "-C", t.environment.source, "show", f"{t.base_commit}:ops.py"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert ops.count(BUGGY) == 1  # the scripted fix's old text is unique in the file
        assert t.hidden.graded_files == [t.hidden.fail_to_pass[0].split("::")[0]]
        assert "test_" not in t.problem_statement  # the statement never names the hidden test


def test_an_existing_dataset_is_kept_and_other_sizes_remake_it(tmp_path):
    write_dataset(tmp_path, 2, 1)
    stamp = (tmp_path / "MADE").stat().st_mtime_ns
    write_dataset(tmp_path, 2, 1)
    assert (tmp_path / "MADE").stat().st_mtime_ns == stamp
    write_dataset(tmp_path, 3, 1)
    assert len(load_tasks(tmp_path / "train.jsonl")) == 3


def test_cli_writes_both_splits_and_refuses_a_bad_split(tmp_path):
    r = CliRunner().invoke(
        app, ["swe-toy", "--out", str(tmp_path / "t"), "--train", "2", "--test", "1"]
    )
    assert r.exit_code == 0, r.output
    assert "2 train and 1 test tasks" in r.output
    with pytest.raises(ValueError, match="split must be one of"):
        make_task(tmp_path, "dev", 0)
