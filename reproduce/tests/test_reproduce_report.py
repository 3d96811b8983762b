"""The report over real run folders: swe-toy tasks made here, images built, episodes run and
graded in Docker by the gold and empty policies (standing in for the trained model and its SFT
start), a train metrics.jsonl in the trainer's format, and the stage state the pipeline writes.
REPORT.md and report.html hold the headline table, the learning comparison, every outcome per
project, the stage table and links that resolve to the evaluation folders' viewers."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from deepswe.data.swetoy import write_dataset
from deepswe.reproduce.config import ReproduceConfig
from deepswe.reproduce.pipeline import Context, Stage, StageResult, run_pipeline
from deepswe.reproduce.report import outcome_counts, paired, write_report

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.docker


def _eval(out: Path, dataset: Path, policy: str, runs: int = 1) -> None:
    cmd = [
        sys.executable,
        "-m",
        "deepswe.eval.cli",
        "run",
        "--dataset",
        str(dataset),
        "--out",
        str(out),
        f"eval.policy.name={policy}",
        f"eval.runs={runs}",
        "eval.workers=2",
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory) -> tuple[Path, ReproduceConfig]:
    tmp = tmp_path_factory.mktemp("repro")
    paths = write_dataset(tmp / "swe-toy", n_train=1, n_test=2)
    out = tmp / "run"
    cfg = ReproduceConfig.model_validate(
        {
            "swe_toy": {"out": str(tmp / "swe-toy"), "train": 1, "test": 2},
            "learning": {"dataset": str(paths["test"]), "runs": 2},
        }
    )

    def evals(ctx: Context) -> StageResult:
        _eval(ctx.path("eval", "learning-sft"), paths["test"], "empty", runs=2)
        _eval(ctx.path("eval", "learning-trained"), paths["test"], "gold", runs=2)
        return StageResult(artifacts=[str(ctx.path("eval", "learning-trained"))])

    def train(ctx: Context) -> StageResult:
        (ctx.path("train")).mkdir(parents=True, exist_ok=True)
        rows = [
            {
                "step": s,
                "reward/mean": r,
                "filter/trained": 8 - m,
                "filter/masked": m,
                "time/step": 10.0,
                "time/generation_wall": 8.0,
                "time/generation_exposed": 8.0 - h,
                "time/update": 2.0,
                f"staleness/{min(s - 1, 1)}": 8.0,
            }
            for s, r, m, h in ((1, 0.25, 2, 0.0), (2, 0.5, 1, 2.0), (3, 0.875, 0, 2.0))
        ]
        ctx.path("train", "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        return StageResult(numbers={"steps": 3})

    ctx = Context(profile=ROOT / "configs" / "tiny.yaml", out=out, cfg=cfg, echo=lambda m: None)
    stages = [
        Stage("train", "a stand-in training record", train),
        Stage("evals", "gold and empty on held-out swe-toy", evals),
    ]
    run_pipeline(ctx, stages, setup_seconds=30)
    return out, cfg


def test_outcomes_and_pairs_are_read_from_the_episodes(run_folder):
    out, _ = run_folder
    counts = outcome_counts(out / "eval" / "learning-trained")
    assert dict(counts) == {"swe-toy (held-out)": {"resolved": 4}}
    assert outcome_counts(out / "eval" / "learning-sft")["swe-toy (held-out)"]["unresolved"] == 4
    assert paired(out / "eval" / "learning-sft", out / "eval" / "learning-trained") == {
        "pairs": 4,
        "only_trained": 4,
        "only_sft": 0,
        "both": 0,
    }


def test_report_md_and_html_hold_the_numbers_and_working_links(run_folder):
    out, cfg = run_folder
    paths = write_report(out, cfg)
    md = (out / "REPORT.md").read_text()
    assert "| Pass@1 (%) | 42.2 | 100.0 +- 0.0 held-out swe-toy" in md
    assert "Change: **+100.0 points**" in md and "by the trained model only 4" in md
    assert "| evals | gold and empty on held-out swe-toy | done |" in md
    assert "| setup |" in md and "not run" in md  # no TTS here: said so, not hidden
    # where a step's time went, read from the typed step records
    assert "| update | 2.0 | 6 |" in md and "| generation, start to end | 8.0 | 24 |" in md
    assert "generation hidden behind training: 4 of 24 s (17%)" in md
    assert "staleness (rows a lag): 0: 8, 1: 16" in md
    for png in ("reward.png", "pass_at_k.png", "outcomes.png"):
        assert (out / "plots" / png) in paths and (out / "plots" / png).stat().st_size > 1000
    # every relative link of the report resolves in the run folder
    for href in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", md):
        if not href.startswith("../"):
            assert (out / href).exists(), href
    assert re.search(r"eval/learning-trained/view\.html#swetoy__\w+-\d:0", md)

    page = (out / "report.html").read_text()
    assert page.count("data:image/png;base64,") == 3  # plots inlined: one file to share
    assert "http://" not in page and "https://" not in page and "<script" not in page
    assert "<td>100.0 +- 0.0 held-out swe-toy" in page


def test_the_report_of_a_failed_run_says_where_it_stopped(tmp_path):
    def broken(ctx: Context) -> StageResult:
        ctx.sh(sys.executable, "-c", "import sys; sys.exit('no Docker engine')")
        return StageResult()

    ctx = Context(
        profile=ROOT / "configs" / "tiny.yaml",
        out=tmp_path / "run",
        cfg=ReproduceConfig(),
        echo=lambda m: None,
    )
    with pytest.raises(Exception, match="no Docker engine"):
        run_pipeline(
            ctx, [Stage("preflight", "checks", broken)], after=lambda c: write_report(c.out, c.cfg)
        )
    md = (ctx.out / "REPORT.md").read_text()
    assert "Stopped at preflight" in md and "no Docker engine" in md
