"""The pipeline's bookkeeping: stages in order, done ones skipped on a rerun, a failure recorded
with its reason and the report still written, FRESH starting over, and the profile's
`reproduce:` section validated by field name. Stages here are small real functions writing
real files and running real commands."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from deepswe.eval.config import ConfigError
from deepswe.reproduce.config import ReproduceConfig, load_reproduce_config
from deepswe.reproduce.pipeline import Context, Stage, StageFailed, StageResult, run_pipeline

ROOT = Path(__file__).resolve().parents[2]


def ctx_for(tmp_path: Path, lines: list[str] | None = None) -> Context:
    sink = lines if lines is not None else []
    return Context(
        profile=ROOT / "configs" / "tiny.yaml",
        out=tmp_path / "run",
        cfg=ReproduceConfig(),
        echo=sink.append,
    )


def counting_stage(name: str, calls: list[str], fail: bool = False) -> Stage:
    def run(ctx: Context) -> StageResult:
        calls.append(name)
        ctx.sh(sys.executable, "-c", f"print('hello from {name}')")
        if fail:
            ctx.sh(sys.executable, "-c", "import sys; print('the cause'); sys.exit(4)")
        (ctx.out / f"{name}.txt").write_text(name)
        return StageResult(artifacts=[f"{name}.txt"], numbers={"n": len(calls)})

    return Stage(name, f"stage {name}", run)


def test_stages_run_in_order_and_a_rerun_skips_the_done_ones(tmp_path):
    calls: list[str] = []
    ctx = ctx_for(tmp_path)
    stages = [counting_stage(n, calls) for n in ("a", "b", "c")]
    reports = []
    state = run_pipeline(ctx, stages, setup_seconds=12.5, after=lambda c: reports.append(1))
    assert calls == ["a", "b", "c"] and reports == [1]
    assert [state["stages"][n]["status"] for n in "abc"] == ["done"] * 3
    assert state["setup_seconds"] == 12.5 and "finished" in state
    rec = json.loads((ctx.out / "stages.json").read_text())["stages"]["b"]
    assert rec["commands"] == [f"{Path(sys.executable).name} -c print('hello from b')"]
    assert rec["numbers"] == {"n": 2} and rec["artifacts"] == ["b.txt"]
    assert "hello from b" in (ctx.out / "logs" / "b.log").read_text()

    run_pipeline(ctx, stages)  # nothing left to do
    assert calls == ["a", "b", "c"]


def test_a_failed_stage_stops_the_run_says_why_and_the_rerun_continues_there(tmp_path):
    calls: list[str] = []
    ctx = ctx_for(tmp_path)
    reports = []
    stages = [
        counting_stage("a", calls),
        counting_stage("b", calls, fail=True),
        counting_stage("c", calls),
    ]
    with pytest.raises(StageFailed, match=r"exited 4 .*\n.*the cause"):
        run_pipeline(ctx, stages, after=lambda c: reports.append(1))
    assert calls == ["a", "b"] and reports == [1]  # c never started; the report was written
    state = json.loads((ctx.out / "stages.json").read_text())
    assert (
        state["stages"]["b"]["status"] == "failed" and "exited 4" in state["stages"]["b"]["error"]
    )
    assert "c" not in state["stages"]

    stages[1] = counting_stage("b", calls)  # fixed
    run_pipeline(ctx, stages)
    assert calls == ["a", "b", "b", "c"]  # a not rerun
    assert json.loads((ctx.out / "stages.json").read_text())["stages"]["b"]["attempts"] == 2


def test_an_exception_in_a_stage_becomes_a_stage_failure_naming_it(tmp_path):
    def broken(ctx: Context) -> StageResult:
        raise FileNotFoundError("no such model")

    with pytest.raises(StageFailed, match="stage x: FileNotFoundError: no such model"):
        run_pipeline(ctx_for(tmp_path), [Stage("x", "x", broken)])


def test_fresh_starts_over(tmp_path):
    calls: list[str] = []
    ctx = ctx_for(tmp_path)
    run_pipeline(ctx, [counting_stage("a", calls)])
    (ctx.out / "leftover").write_text("old")
    run_pipeline(ctx, [counting_stage("a", calls)], fresh=True)
    assert calls == ["a", "a"] and not (ctx.out / "leftover").exists()


def test_the_tiny_profiles_section_loads_and_errors_name_the_field(tmp_path):
    cfg = load_reproduce_config(ROOT / "configs" / "tiny.yaml")
    assert cfg.profile == "tiny" and cfg.learning.runs >= 1 and cfg.tts
    # the held-out set is the one the profile's eval: section evaluates
    assert cfg.learning.dataset == f"{cfg.swe_toy.out}/test.jsonl"
    with pytest.raises(ConfigError, match=r"reproduce\.learning\.runs"):
        load_reproduce_config(ROOT / "configs" / "tiny.yaml", ["reproduce.learning.runs=0"])
    with pytest.raises(ConfigError, match=r"reproduce\.swe_toy\.trian: unknown key"):
        load_reproduce_config(ROOT / "configs" / "tiny.yaml", ["reproduce.swe_toy.trian=3"])
    bad = tmp_path / "p.yaml"
    bad.write_text("reproduce: [1, 2]\n")
    with pytest.raises(ConfigError, match="must be a mapping"):
        load_reproduce_config(bad)


def test_the_32b_pipeline_stops_at_preflight_here_listing_every_missing_piece(
    tmp_path, monkeypatch
):
    """No GPU and no served endpoints on a CPU box: exit 1 before any work, each reason named,
    and the report says where the run stopped."""
    from typer.testing import CliRunner

    from deepswe.reproduce.cli import app

    monkeypatch.delenv("BASE_URL", raising=False)
    monkeypatch.delenv("JUDGE_URL", raising=False)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no nvidia-smi, whatever this machine has
    out = tmp_path / "run"
    r = CliRunner().invoke(
        app, ["run", "--config", str(ROOT / "configs" / "deepswe-32b.yaml"), "--out", str(out)]
    )
    assert r.exit_code == 1, r.output
    for reason in ("gpu: no nvidia-smi", "BASE_URL: unset", "JUDGE_URL: unset"):
        assert reason in r.output
    state = json.loads((out / "stages.json").read_text())
    assert state["order"] == ["preflight", "data", "train", "eval", "eval-tts"]
    assert state["stages"] == {"preflight": state["stages"]["preflight"]}  # nothing else started
    assert "Stopped at preflight" in (out / "REPORT.md").read_text()


def test_bad_overrides_exit_2_naming_the_key(tmp_path):
    from typer.testing import CliRunner

    from deepswe.reproduce.cli import app

    r = CliRunner().invoke(app, ["run", "--out", str(tmp_path / "r"), "reproduce.learning.rns=2"])
    assert r.exit_code == 2 and "reproduce.learning.rns: unknown key" in r.output
    assert not (tmp_path / "r").exists()


def test_a_state_of_another_shape_counts_as_nothing_done(tmp_path):
    """Test-time scaling's stages.json before it ran on this runner ({name: {done, seconds}}):
    its stages run again (each skips what is on disk), and the file takes the runner's shape."""
    calls: list[str] = []
    ctx = ctx_for(tmp_path)
    ctx.out.mkdir(parents=True)
    (ctx.out / "stages.json").write_text(json.dumps({"a": {"done": True, "seconds": 3.0}}))
    state = run_pipeline(ctx, [counting_stage("a", calls)])
    assert calls == ["a"] and state["stages"]["a"]["status"] == "done"
