"""deepswe-reproduce tts: the tts: section's validation, the merged pools' numbering, the
judge's AUC, and the whole pipeline on two real swe-mini tasks (docker, slow)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from deepswe.env.grading.outcomes import Outcome
from deepswe.env.trajectory import Ending, Trajectory
from deepswe.eval.config import ConfigError, EvalConfig
from deepswe.eval.store import EpisodeRecord, EpisodeStatus, RunStore
from deepswe.reproduce.cli import app
from deepswe.reproduce.tts.mixture import merge_pools, pick_tasks, shuffled, slot
from deepswe.reproduce.tts.pipeline import model_available
from deepswe.verify.tts_config import TaskPick, load_tts_config

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "configs" / "tiny.yaml"


# --- config ----------------------------------------------------------------------------------
def test_tiny_profile_measures_30_tasks_with_hard_negatives_and_a_disjoint_judge():
    tts, ev = load_tts_config(TINY)
    assert (tts.test.dataset, tts.train.dataset) == ("swe-mini:test", "swe-mini:train")
    assert tts.test.per_repo * 3 >= 30  # swe-mini:test has 3 projects
    m = tts.test_mixture
    # every hard kind of the issue is in the pool; the comment-only fix is one kind among many
    assert min(m.partial, m.misedit, m.wrong_place, m.regression, m.right) >= 1
    assert m.comment <= 1 and m.model >= 1 and tts.eb.writer == "scripted-standin"
    # the eval section is read beside it (its policy makes the model's candidates); its dataset
    # is the tiny profile's held-out swe-toy, not what TTS selects on
    assert ev.dataset == "runs/data/swe-toy/test.jsonl"


def test_make_reproduce_runs_the_same_section_smaller():
    """The reproduce section's tts_overrides (its stage's 20-minute budget) apply to this section
    as they are: a stage that cannot load its config would fail only after training."""
    import yaml

    overrides = yaml.safe_load(TINY.read_text())["reproduce"]["tts_overrides"]
    small, _ = load_tts_config(TINY, overrides)
    big, _ = load_tts_config(TINY)
    assert small.test.per_repo == 1 and small.test_mixture == big.test_mixture


@pytest.mark.parametrize(
    ("override", "named"),
    [
        ("tts.test_mixture.rigth=1", "tts.test_mixture.rigth: unknown key"),
        ("tts.test_mixture.wrong=1", "tts.test_mixture.wrong: unknown key"),  # the old kind
        ("tts.eb.workers=0", "tts.eb.workers"),
        ("tts.judge.format=r2e", "tts.judge.format"),  # ours | r2e-gym
        ("tts.test_mixture={}", "tts.test_mixture"),  # no candidate at all
        ("eval.runs=0", "eval.runs"),
        ("model.path=x", "want tts.<key>=value or eval.<key>=value"),
    ],
)
def test_bad_settings_are_refused_naming_the_key(override, named):
    with pytest.raises(ConfigError, match=named.replace("[", r"\[").replace("<", "<")):
        load_tts_config(TINY, [override])


def test_the_deepswe_32b_judge_reads_r2e_gyms_prompt_and_the_tiny_judge_ours():
    """The published verifier was trained on R2E-Gym's verifier input (ef.r2e_input), counted by
    the tokenizer R2E-Gym counts with; the judges trained here learn our prompt (ef.render)."""
    big, _ = load_tts_config(ROOT / "configs" / "deepswe-32b.yaml")
    assert (big.judge.format, big.judge.max_prompt_tokens) == ("r2e-gym", 65536)
    assert big.judge.tokenizer == "Qwen/Qwen2.5-Coder-32B-Instruct"
    tiny, _ = load_tts_config(TINY)
    assert tiny.judge.format == "ours"


def test_r2e_gyms_format_without_a_served_verifier_is_refused_before_anything_is_written(
    tmp_path,
):
    out = tmp_path / "o"
    res = CliRunner().invoke(
        app, ["tts", "--config", str(TINY), "--out", str(out), "tts.judge.format=r2e-gym"]
    )
    assert res.exit_code == 2 and "needs that verifier served (tts.judge.base_url)" in res.output
    assert not out.exists()


def test_bad_override_exits_2_with_the_key(tmp_path):
    res = CliRunner().invoke(
        app,
        [
            "tts",
            "--config",
            str(TINY),
            "--out",
            str(tmp_path / "o"),
            "tts.judge.max_prompt_tokens=-1",
        ],
    )
    assert res.exit_code == 2 and "tts.judge.max_prompt_tokens" in res.output
    assert not (tmp_path / "o").exists()  # nothing written for a config that does not load


def test_the_model_kind_runs_only_where_its_model_is():
    local = EvalConfig(policy={"name": "x:Policy", "args": {"path": "/nonexistent/final"}})
    assert model_available(local) == (False, "model folder /nonexistent/final")
    assert model_available(EvalConfig(policy={"name": "openai", "base_url": "http://h/v1"}))[0]


# --- mixture ---------------------------------------------------------------------------------
def _record(iid: str, run: int, resolved: bool) -> EpisodeRecord:
    traj = Trajectory(
        instance_id=iid,
        policy="t",
        messages=[],
        steps=[],
        ending=Ending.SUBMITTED,
        patch=f"patch {run} {resolved}",
    )
    outcome = Outcome.RESOLVED if resolved else Outcome.UNRESOLVED
    return EpisodeRecord(
        instance_id=iid,
        run=run,
        repo="r",
        status=EpisodeStatus.GRADED,
        outcome=outcome,
        trajectory=traj,
    )


def test_merge_renumbers_every_slot_once_seeded_per_task(tmp_path):
    for run in range(3):
        RunStore(tmp_path / "made").save(_record("a-1", run, run == 0))
    RunStore(tmp_path / "model").save(_record("a-1", 0, False))
    slots = {
        "a-1": [
            slot("right", tmp_path / "made", 0, detail="the gold patch", expect=True),
            slot("misedit", tmp_path / "made", 1, planned="partial"),
            slot("comment", tmp_path / "made", 2, expect=False),
            slot("model", tmp_path / "model", 0),
            slot("model", tmp_path / "model", 1),
        ]
    }  # never run: missing
    table = merge_pools(slots, tmp_path / "pool", seed=3)
    rows = table["a-1"]
    assert [r["run"] for r in rows] == list(range(5))
    assert sorted((r["kind"], r["source_run"]) for r in rows) == sorted(
        (s["kind"], s["source_run"]) for s in slots["a-1"]
    )
    merged = {r.run: r for r in RunStore(tmp_path / "pool").records()}
    for r in rows:
        if r["kind"] == "model" and r["source_run"] == 1:
            assert r["status"] == "missing" and r["run"] not in merged
        else:
            assert merged[r["run"]].resolved == (r["kind"] == "right") == r["resolved"]
            assert merged[r["run"]].trajectory.patch.startswith(f"patch {r['source_run']}")
    assert next(r for r in rows if r["kind"] == "misedit")["planned"] == "partial"
    assert json.loads((tmp_path / "pool" / "mixture.json").read_text()) == table
    firsts = {shuffled(f"t-{i}", slots["a-1"], 0)[0]["kind"] for i in range(40)}
    assert len(firsts) > 1  # run 0 is not always the same kind
    assert shuffled("a-1", slots["a-1"], 3) == shuffled("a-1", slots["a-1"], 3)  # a resume: same


def test_pick_tasks_takes_the_stated_subset():
    from deepswe.data.datasets import load_tasks

    real = load_tasks("swe-mini:test")[0]  # the committed release: any task serves as a shape
    tasks = [
        real.model_copy(update={"instance_id": f"{r}__{r}-{i}", "repo": f"pypi/{r}"})
        for r in "ba"
        for i in (2, 0, 1)
    ]
    got = pick_tasks(tasks, TaskPick(dataset="d", per_repo=2, repos=["pypi/b"]))
    assert [t.instance_id for t in got] == ["b__b-0", "b__b-1"]
    assert len(pick_tasks(tasks, TaskPick(dataset="d", per_repo=None))) == 6
    with pytest.raises(ValueError, match="c__c-0"):
        pick_tasks(tasks, TaskPick(dataset="d", ids=["c__c-0"]))


# --- end to end ------------------------------------------------------------------------------
@pytest.mark.docker
@pytest.mark.slow
def test_tts_end_to_end_on_two_swe_mini_tasks(tmp_path):
    """Real candidates of the hard kinds, grader, judge training (subprocess), EF/EB verdicts and
    the report (baselines, AUCs, calibration, EB's kept tests), on two swe-mini:test tasks; then
    a resume redoes nothing and a changed mixture is refused."""
    from deepswe.data.loaders import load_jsonl
    from deepswe.data.swemini.manifest import TASKS, load_manifest
    from deepswe.data.swemini.sources import fetch

    train_models = pytest.importorskip("deepswe.train.models", reason="needs deepswe-train")
    # What `make data` does, for the four projects the profile's subsets use (a fresh CI machine
    # has none): the pipeline reads swe-mini from the default cache.
    names = ("isodate", "webcolors", "addict", "inflection")
    manifest = load_manifest()
    manifest = manifest.model_copy(update={"projects": [manifest.project(n) for n in names]})
    rows = [r for r in load_jsonl(TASKS) if r.repo.split("/")[-1] in names]
    fetch(manifest, rows, log=lambda _: None, rebuild=False)
    judge_base = train_models.build_test_model(tmp_path / "judge-base")
    out = tmp_path / "tts"
    args = [
        "tts",
        "--config",
        str(TINY),
        "--out",
        str(out),
        "tts.test.ids=[isodate__isodate-2184d719, webcolors__webcolors-023eae96]",
        "tts.train.per_repo=1",
        "tts.train.repos=[pypi/addict, pypi/inflection]",
        "tts.test_mixture={right: 1, wrong_place: 1, regression: 1, comment: 1}",
        "tts.train_mixture={right: 1, wrong_place: 1}",
        f"tts.judge.base_models=[{judge_base}]",
        "tts.auc_bootstrap=100",
        "tts.judge.overrides=[epochs=2, batch_size=1, heldout_fraction=0.5]",
    ]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    report = json.loads((out / "report.json").read_text())
    assert (report["tasks"], report["candidates"]) == (2, 8)
    kinds = report["tts"]["mixture"]["test"]["per_kind"]
    assert kinds["right"] == {
        "candidates": 2,
        "resolved": 2,
        "missing": 0,
        "as predicted": 2,
        "predicted": 2,
    }
    assert all(kinds[k]["resolved"] == 0 for k in ("wrong_place", "regression", "comment"))
    assert report["pass@1"]["mean"] == pytest.approx(0.25)
    scores = report["scores"]["scores"]
    # the one-line rule no longer separates the pool: only the comment changes no code
    assert scores["changes-code"]["auc"] == pytest.approx(1 / 3 + 0.5 * 2 / 3)
    assert scores["ef"]["candidates"] == 8 and scores["ef"]["auc"] is not None
    assert "ef" in report["scores"]["gains"] and report["gains"]["rows"]
    assert {"changes-code", "smallest", "random", "oracle"} <= {
        c["method"] for c in report["curves"]
    }
    assert report["calibration"]["ece"] is not None and (out / "reliability.png").is_file()
    assert report["tts"]["eb"]["tasks"] == 2 and report["tts"]["eb"]["agreement"]["pairs"] >= 0
    assert report["tts"]["judge"]["disjoint"] is True
    assert any("STAND-IN" in n for n in report["tts"]["notes"])
    assert set(report["tts"]["stage_seconds"]) == {"candidates", "judge", "ef", "eb"}
    md = (out / "report.md").read_text()
    assert "Test-time scaling run" in md and "changes-code (baseline)" in md and "ECE" in md

    again = CliRunner().invoke(app, args)  # a resume: every stage done, report rewritten
    assert again.exit_code == 0 and "candidates: done before" in again.output
    changed = CliRunner().invoke(app, [*args, "tts.test_mixture.comment=3"])
    assert changed.exit_code == 2 and "tts.test_mixture.comment" in changed.output


def test_a_served_judge_is_checked_before_anything_runs_or_is_written(
    tmp_path, models_endpoint, monkeypatch
):
    """Regression (#23): a wrong tts.judge.model surfaced only in the ef stage, after every
    candidate had run, as a store of ERROR verdicts."""
    url = models_endpoint.serve({"judge-lora": "/models/judge"})
    monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong")
    out = tmp_path / "o"
    judge = [f"tts.judge.base_url={url}", "tts.judge.model=judge-lora", "tts.judge.tokenizer=t"]
    res = CliRunner().invoke(app, ["tts", "--config", str(TINY), "--out", str(out), *judge])
    assert res.exit_code == 2, res.output
    assert f"the key in $OPENAI_API_KEY was refused by {url} (HTTP 401" in res.output
    monkeypatch.setenv("OPENAI_API_KEY", models_endpoint.key)
    res = CliRunner().invoke(
        app,
        [
            "tts",
            "--config",
            str(TINY),
            "--out",
            str(out),
            *judge[:1],
            "tts.judge.model=judge",
            *judge[2:],
        ],
    )
    assert res.exit_code == 2, res.output
    assert f"model 'judge' is not served at {url}; it serves: judge-lora" in res.output
    assert not out.exists()


def test_the_report_says_how_often_each_selector_picks_a_proven_wrong_survivor():
    """Where a pool holds a survivor (the grader resolves it), a selector that ranks by the tests
    alone cannot tell it from the right fix; the report says how often each picks one."""
    from deepswe.reproduce.tts.report import survivor_picks
    from deepswe.verify.recorded import Recorded
    from deepswe.verify.types import Scores

    pool = [
        Scores(run=0, resolved=True, ef=0.9, changes_code=1, smallest=0.5),  # right
        Scores(run=1, resolved=True, ef=0.2, changes_code=1, smallest=0.9),  # survivor
        Scores(run=2, resolved=False, ef=0.1, changes_code=1, smallest=0.1),  # wrong
    ]
    mixture = {"t": [{"run": 0, "kind": "right"}, {"run": 1, "kind": "survivor"}]}
    mixture["t"].append({"run": 2, "kind": "misedit"})
    picks = survivor_picks(Recorded(scores={"t": pool}), mixture)
    per = picks["per_method"]
    assert picks["tasks"] == ["t"]
    assert per["ef"] == {"tasks": 1, "picks_survivor": 0.0}  # the judge ranks it low
    assert per["smallest"]["picks_survivor"] == 1.0  # the smallest patch is the survivor
    assert per["oracle"]["picks_survivor"] == 0.5  # resolved either way: the grader is fooled
    assert per["random"]["picks_survivor"] == pytest.approx(1 / 3)
    assert survivor_picks(Recorded(scores={"t": pool}), {"t": []})["tasks"] == []
