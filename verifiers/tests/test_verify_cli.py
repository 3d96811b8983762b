"""deepswe-verify end to end: recorded rollouts or an eval run in, report and predictions out."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from deepswe.env.trajectory import Trajectory
from deepswe.eval.store import EpisodeRecord, EpisodeStatus, RunStore
from deepswe.verify.cli import app
from deepswe.verify.select import METHODS
from deepswe.verify.store import VerdictStore
from deepswe.verify.types import Verdict, VerdictStatus

_spec = importlib.util.spec_from_file_location(
    "verify_recorded_shapes", Path(__file__).with_name("test_verify_recorded.py")
)
shapes = importlib.util.module_from_spec(_spec)  # the R2E record writer, shared
_spec.loader.exec_module(shapes)  # type: ignore[union-attr]

runner = CliRunner()


def test_select_recorded_writes_report_and_predictions(tmp_path: Path) -> None:
    traj = shapes.write_runs(tmp_path / "traj")
    out = tmp_path / "tts"
    res = runner.invoke(app, ["select", "--recorded", str(traj), "--out", str(out)])
    assert res.exit_code == 0, res.output
    report = json.loads((out / "report.json").read_text())
    assert (report["tasks"], report["candidates"], len(report["skipped"])) == (2, 5, 1)
    assert report["pass@1"]["mean"] == pytest.approx((1 / 3 + 1 / 2) / 2)
    assert {c["method"] for c in report["curves"]} == {"pass@k", *METHODS}
    assert (out / "best_at_k.png").stat().st_size > 0
    hybrid = [
        json.loads(x) for x in (out / "predictions" / "hybrid-curve.jsonl").read_text().splitlines()
    ]
    assert {p["instance_id"]: p["model_patch"] for p in hybrid} == {"a": "pa2", "b": "pb1"}
    assert hybrid[0]["model_name_or_path"] == "deepswe-verify+hybrid-curve"
    assert "| hybrid |" in res.output

    shown = runner.invoke(app, ["report", str(out)])
    assert shown.exit_code == 0 and shown.output.startswith("# Selection report")


def test_select_run_reads_candidates_and_verdicts(tmp_path: Path) -> None:
    """An eval run folder: graded episodes are candidates, stored verdicts their scores; a
    candidate whose judge was unreachable has no EF score and EF says which."""
    run = tmp_path / "runs" / "eval-1"
    store, verdicts = RunStore(run), VerdictStore(run)
    for k, (ok, ef) in enumerate([(False, 0.9), (True, 0.7), (False, None)]):
        store.save(
            EpisodeRecord(
                instance_id="t1",
                run=k,
                repo="a/b",
                status=EpisodeStatus.GRADED,
                outcome="resolved" if ok else "unresolved",
                trajectory=Trajectory(
                    instance_id="t1",
                    policy="p",
                    messages=[],
                    ending="submitted",
                    patch=f"patch-{k}",
                ),
            )
        )
        status = VerdictStatus.SCORED if ef is not None else VerdictStatus.UNREACHABLE
        verdicts.save(Verdict(verifier="ef", instance_id="t1", run=k, status=status, score=ef))
        verdicts.save(
            Verdict(verifier="regression", instance_id="t1", run=k, status="scored", score=k)
        )
    out = tmp_path / "tts"
    res = runner.invoke(app, ["select", "--run", str(run), "--out", str(out)])
    assert res.exit_code == 0, res.output
    report = json.loads((out / "report.json").read_text())
    assert report["selections"]["ef"]["statuses"] == {"missing_scores": 1}
    assert report["selections"]["eb"]["statuses"] == {"selected": 1}
    assert any("ef: no score for 1 unreachable" in n for n in report["notes"])
    eb = json.loads((out / "predictions" / "eb.jsonl").read_text())
    assert eb["model_patch"] == "patch-2"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["select", "--out", "o"], "exactly one of --recorded"),
        (["select", "--out", "o", "--recorded", "nowhere"], "nowhere: no such file"),
        (["select", "--out", "o", "--run", "nowhere"], "not an evaluation run folder"),
        (["select", "--out", "o", "--recorded", "x", "--counting", "all"], "--counting"),
        (["report", "nowhere"], "no report.json"),
        (["score", "--run", "nowhere", "--verifier", "regression"], "nowhere: no graded"),
    ],
)
def test_bad_input_exits_2_with_a_message(tmp_path: Path, args, message) -> None:
    res = runner.invoke(app, args)
    assert res.exit_code == 2
    assert message in res.output


def test_bad_record_names_file_and_field(tmp_path: Path) -> None:
    bad = shapes.r2e_record("a", "p", 1.0, 0.5, (1, 0), [1])
    bad["reward"] = "yes"
    (tmp_path / "r.json").write_text(json.dumps(bad))
    res = runner.invoke(app, ["select", "--recorded", str(tmp_path), "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "r.json: field reward" in res.output
    assert not (tmp_path / "o").exists()  # nothing half-written


def test_corrupt_verdict_is_named(tmp_path: Path) -> None:
    run = tmp_path / "eval-1"
    RunStore(run).save(
        EpisodeRecord(
            instance_id="t1",
            run=0,
            repo="a/b",
            status=EpisodeStatus.GRADED,
            outcome="resolved",
            trajectory=Trajectory(
                instance_id="t1", policy="p", messages=[], ending="submitted", patch="p"
            ),
        )
    )
    bad = run / "verdicts" / "ef" / "t1" / "run-0.json"
    bad.parent.mkdir(parents=True)
    bad.write_text('{"verifier": "ef", "instance_id": "t1", "run": 0, "status": "scored"}')
    res = runner.invoke(app, ["select", "--run", str(run), "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and f"{bad}" in res.output


def test_console_script_runs(tmp_path: Path) -> None:
    """The installed entry point, as a user runs it."""
    traj = shapes.write_runs(tmp_path / "traj")
    exe = Path(sys.executable).with_name("deepswe-verify")
    cmd = (
        [str(exe)] if exe.exists() else [sys.executable, "-m", "typer", "deepswe.verify.cli", "run"]
    )
    proc = subprocess.run(
        [*cmd, "select", "--recorded", str(traj), "--out", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "o" / "predictions" / "hybrid.jsonl").is_file()


def test_score_names_what_is_missing(tmp_path: Path) -> None:
    run = tmp_path / "eval-1"
    RunStore(run).save(
        EpisodeRecord(
            instance_id="t1",
            run=0,
            repo="a/b",
            status=EpisodeStatus.GRADED,
            outcome="resolved",
            trajectory=Trajectory(
                instance_id="t1", policy="p", messages=[], ending="submitted", patch="p"
            ),
        )
    )
    for args, message in [
        (["--verifier", "ef"], "needs --judge-path, or --judge-url"),
        (["--verifier", "ef", "--judge-url", "http://x/v1"], "--judge-model"),
        (["--verifier", "bogus"], "one of ef, regression, reproduction"),
        (["--verifier", "reproduction", "--writer", "agent"], "--writer-url"),
    ]:
        res = runner.invoke(app, ["score", "--run", str(run), *args])
        assert res.exit_code == 2 and message in res.output, (args, res.output)
    assert not (run / "verdicts").exists()  # nothing scored, nothing written


@pytest.mark.parametrize("verifier", ["ef", "reproduction"])
def test_score_checks_its_endpoint_before_the_first_candidate(
    tmp_path: Path, models_endpoint, monkeypatch, verifier: str
) -> None:
    """A served judge (ef) or test-writing agent (reproduction) is asked for its models first:
    a wrong name exits 2 with one line naming what is served, before any verdict is stored.
    (The root conftest's test server: a real HTTP server, not vLLM.)"""
    url = models_endpoint.serve({"judge-lora": "/models/judge"})
    monkeypatch.setenv("OPENAI_API_KEY", models_endpoint.key)
    run = tmp_path / "run"
    if verifier == "ef":
        args = ["--judge-url", url, "--judge-model", "judge", "--judge-tokenizer", "unused"]
    else:
        args = ["--writer", "agent", "--writer-url", url, "--writer-model", "judge"]
    res = runner.invoke(app, ["score", "--run", str(run), "--verifier", verifier, *args])
    assert res.exit_code == 2, res.output
    assert f"model 'judge' is not served at {url}; it serves: judge-lora" in res.output
    assert not run.exists()
