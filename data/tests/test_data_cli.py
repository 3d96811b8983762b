"""The deepswe-data CLI, run through typer's CliRunner on real files."""

from __future__ import annotations

import json
import os
from pathlib import Path

from typer.testing import CliRunner

from deepswe.data.cli import app
from deepswe.data.loaders import load_jsonl

FIXTURES = Path(os.environ["DEEPSWE_R2E_FIXTURES"])
runner = CliRunner()


def mini_row(iid: str, repo: str = "local/tinycalc") -> dict:
    return {
        "instance_id": iid,
        "repo": repo,
        "base_commit": "4b825dc6",
        "problem_statement": "divide(1, 0) returns inf.",
        "patch": "diff --git a/ops.py b/ops.py\n",
        "test_patch": "",
        "FAIL_TO_PASS": ["tests/test_ops.py::test_divide_by_zero"],
        "PASS_TO_PASS": [],
        "environment": {"source": "/srv/tinycalc"},
    }


def tasks_file(tmp_path: Path, n: int = 3) -> Path:
    """A Task JSONL made by the convert verb itself."""
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps(mini_row(f"t-{i}")) + "\n" for i in range(n)))
    out = tmp_path / "tasks.jsonl"
    result = runner.invoke(app, ["convert", str(rows), "--to", str(out)])
    assert result.exit_code == 0, result.output
    return out


def test_show_prints_a_row_per_task_with_counts() -> None:
    result = runner.invoke(app, ["show", str(FIXTURES), "--limit", "2"], env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    assert "5 tasks (showing 2)" in result.output
    assert "aiohttp_0813710e" in result.output and "orange3_2d9617bd" not in result.output
    line = next(x for x in result.output.splitlines() if "aiohttp_216e0828" in x)
    assert [c.strip() for c in line.split("│")[3:7]] == ["r2e-gym", "2", "17", "yes"]


def test_convert_round_trips_r2e_fixtures(tmp_path: Path) -> None:
    out = tmp_path / "r2e.jsonl"
    result = runner.invoke(app, ["convert", str(FIXTURES), "--to", str(out)])
    assert result.exit_code == 0, result.output
    assert "wrote 5 tasks" in result.output
    again = tmp_path / "again.jsonl"
    assert runner.invoke(app, ["convert", str(out), "--to", str(again)]).exit_code == 0
    assert again.read_bytes() == out.read_bytes()
    assert [t.instance_id for t in load_jsonl(out)][0] == "aiohttp_0813710e"
    assert not list(tmp_path.glob(".*.tmp")), "temp file left behind"


def test_validate_names_line_and_field_of_a_broken_row_and_writes_nothing(tmp_path: Path) -> None:
    good = tasks_file(tmp_path)
    lines = good.read_text().splitlines()
    broken = json.loads(lines[2])
    broken["hidden"]["fail_to_pass"] = "tests/test_ops.py::test_divide_by_zero"  # a str, not a list
    lines[2] = json.dumps(broken)
    bad = tmp_path / "tasks-bad.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    before = sorted(p.name for p in tmp_path.iterdir())

    result = runner.invoke(app, ["validate", str(bad)])
    assert result.exit_code == 1
    assert f"{bad}:3: hidden.fail_to_pass: Input should be a valid list" in result.output
    assert "1 bad row(s), 2 good" in result.output
    assert "Traceback" not in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == before

    ok = runner.invoke(app, ["validate", str(good)])
    assert ok.exit_code == 0 and "3 tasks OK" in ok.output


def test_convert_of_a_broken_file_leaves_the_existing_output_untouched(tmp_path: Path) -> None:
    out = tasks_file(tmp_path)
    old = out.read_bytes()
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(mini_row("x")) + "\n{not json\n")
    result = runner.invoke(app, ["convert", str(bad), "--to", str(out)])
    assert result.exit_code == 1
    assert f"{bad}:2: invalid JSON" in result.output and "Traceback" not in result.output
    assert out.read_bytes() == old


def test_missing_file_and_bad_json_are_messages_not_tracebacks(tmp_path: Path) -> None:
    missing = runner.invoke(app, ["show", str(tmp_path / "nope.jsonl")])
    assert missing.exit_code == 1 and "no such file or directory" in missing.output
    assert isinstance(missing.exception, SystemExit)  # a clean exit, not an uncaught error
    broken = tmp_path / "broken.json"
    broken.write_text('{"instance_id": ')
    result = runner.invoke(app, ["validate", str(broken)])
    assert result.exit_code == 1 and "invalid JSON" in result.output
    assert isinstance(result.exception, SystemExit)


def test_decontaminate_drops_eval_repos_and_reports_counts(tmp_path: Path) -> None:
    rows = tmp_path / "train.jsonl"
    train = [
        mini_row("s1", "sympy"),
        mini_row("s2", "sympy"),
        mini_row("f1", "Flask"),
        mini_row("k1", "local/keep"),
    ]
    rows.write_text("".join(json.dumps(r) + "\n" for r in train))
    out = tmp_path / "clean.jsonl"
    result = runner.invoke(app, ["decontaminate", str(rows), "--to", str(out)])
    assert result.exit_code == 0, result.output
    assert "dropped 3 of 4 tasks" in result.output
    assert [t.instance_id for t in load_jsonl(out)] == ["k1"]

    evals = tmp_path / "eval.jsonl"
    evals.write_text(json.dumps(mini_row("e1", "pallets/flask")) + "\n")
    result = runner.invoke(
        app, ["decontaminate", str(rows), "--to", str(out), "--eval", str(evals)]
    )
    assert result.exit_code == 0, result.output
    assert "dropped 1 of 4 tasks" in result.output
    assert [t.instance_id for t in load_jsonl(out)] == ["s1", "s2", "k1"]
