"""deepswe-verify tts: the tts: section's validation, the mixture's numbering and wrong fixes, the
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
from deepswe.verify.cli import app
from deepswe.verify.tts.config import TaskPick, load_tts_config
from deepswe.verify.tts.mixture import merge_pools, pick_tasks, plan_slots, wrong_fix_actions
from deepswe.verify.tts.pipeline import model_available

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "configs" / "tiny.yaml"
GOLD = """\
diff --git a/src/pkg/ops.py b/src/pkg/ops.py
--- a/src/pkg/ops.py
+++ b/src/pkg/ops.py
@@ -1,4 +1,4 @@
 def add(a, b):
     x = a
-    return x - b
+    return x + b
 # end of ops
"""


# --- config ----------------------------------------------------------------------------------
def test_tiny_profile_states_its_subset_and_a_mixture_of_8_with_the_model():
    tts, ev = load_tts_config(TINY)
    assert (tts.test.dataset, tts.train.dataset) == ("swe-mini:test", "swe-mini:train")
    m = tts.test_mixture
    # 8 a task with the trained model's 2 (make reproduce); 6 scripted ones without it
    assert m.model + m.right + m.wrong + m.empty >= 8 and tts.eb.writer == "scripted-standin"
    # the eval section is read beside it (its policy makes the model's candidates); its dataset
    # is the tiny profile's held-out swe-toy, not what TTS selects on
    assert ev.dataset == "runs/data/swe-toy/test.jsonl"


@pytest.mark.parametrize(
    ("override", "named"),
    [
        ("tts.test_mixture.rigth=1", "tts.test_mixture.rigth: unknown key"),
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
    res = CliRunner().invoke(app, ["tts", "--config", str(TINY), "--out", str(out),
                                   "tts.judge.format=r2e-gym"])  # fmt: skip
    assert res.exit_code == 2 and "needs that verifier served (tts.judge.base_url)" in res.output
    assert not out.exists()


def test_bad_override_exits_2_with_the_key(tmp_path):
    res = CliRunner().invoke(app, ["tts", "--config", str(TINY), "--out", str(tmp_path / "o"),
                                   "tts.judge.max_prompt_tokens=-1"])  # fmt: skip
    assert res.exit_code == 2 and "tts.judge.max_prompt_tokens" in res.output
    assert not (tmp_path / "o").exists()  # nothing written for a config that does not load


def test_the_model_kind_runs_only_where_its_model_is():
    local = EvalConfig(policy={"name": "x:Policy", "args": {"path": "/nonexistent/final"}})
    assert model_available(local) == (False, "model folder /nonexistent/final")
    assert model_available(EvalConfig(policy={"name": "openai", "base_url": "http://h/v1"}))[0]


# --- mixture ---------------------------------------------------------------------------------
def test_slots_number_every_candidate_once_seeded_per_task():
    counts = {"model": 2, "right": 2, "wrong": 3, "empty": 1}
    slots = plan_slots("a-1", counts, seed=0)
    assert sorted(slots) == sorted((k, j) for k, n in counts.items() for j in range(n))
    assert plan_slots("a-1", counts, seed=0) == slots  # deterministic: a resume renumbers nothing
    firsts = {plan_slots(f"t-{i}", counts, seed=0)[0][0] for i in range(40)}
    assert len(firsts) > 1  # run 0 is not always the same kind


def _record(iid: str, run: int, resolved: bool) -> EpisodeRecord:
    traj = Trajectory(instance_id=iid, policy="t", messages=[], steps=[], ending=Ending.SUBMITTED,
                      patch=f"patch {run} {resolved}")  # fmt: skip
    outcome = Outcome.RESOLVED if resolved else Outcome.UNRESOLVED
    return EpisodeRecord(instance_id=iid, run=run, repo="r", status=EpisodeStatus.GRADED,
                         outcome=outcome, trajectory=traj)  # fmt: skip


def test_merge_renumbers_each_kind_into_one_pool(tmp_path):
    for kind, resolved in (("right", True), ("wrong", False)):
        for run in range(2):
            RunStore(tmp_path / kind).save(_record("a-1", run, resolved))
    counts = {"right": 2, "wrong": 2, "empty": 1}  # the empty folder was never run: missing
    sources = {k: tmp_path / k for k in counts}
    table = merge_pools(sources, counts, ["a-1"], tmp_path / "pool", seed=3)
    rows = table["a-1"]
    assert [r["run"] for r in rows] == list(range(5))
    merged = {r.run: r for r in RunStore(tmp_path / "pool").records()}
    for r in rows:
        if r["kind"] == "empty":
            assert r["status"] == "missing" and r["run"] not in merged
        else:
            assert merged[r["run"]].resolved == (r["kind"] == "right") == r["resolved"]
            assert merged[r["run"]].trajectory.patch.startswith(f"patch {r['source_run']}")
    assert json.loads((tmp_path / "pool" / "mixture.json").read_text()) == table


def test_wrong_fixes_edit_the_buggy_hunk_and_keep_the_bug():
    news = set()
    for v in range(10):
        edit, finish = wrong_fix_actions(GOLD, v)
        assert "<function=finish>" in finish and "/testbed/src/pkg/ops.py" in edit
        old = edit.split("<parameter=old_str>")[1].split("</parameter>")[0]
        new = edit.split("<parameter=new_str>")[1].split("</parameter>")[0]
        assert "return x - b" in old and "return x - b" in new and "x + b" not in new
        assert new != old and "#" in new
        news.add(new)
    assert len(news) == 10  # ten distinct patches, not one repeated


def test_pick_tasks_takes_the_stated_subset():
    from deepswe.data.datasets import load_tasks

    real = load_tasks("swe-mini:test")[0]  # the committed release: any task serves as a shape
    tasks = [real.model_copy(update={"instance_id": f"{r}__{r}-{i}", "repo": f"pypi/{r}"})
             for r in "ba" for i in (2, 0, 1)]  # fmt: skip
    got = pick_tasks(tasks, TaskPick(dataset="d", per_repo=2, repos=["pypi/b"]))
    assert [t.instance_id for t in got] == ["b__b-0", "b__b-1"]
    assert len(pick_tasks(tasks, TaskPick(dataset="d", per_repo=None))) == 6
    with pytest.raises(ValueError, match="c__c-0"):
        pick_tasks(tasks, TaskPick(dataset="d", ids=["c__c-0"]))


# --- end to end ------------------------------------------------------------------------------
@pytest.mark.docker
@pytest.mark.slow
def test_tts_end_to_end_on_two_swe_mini_tasks(tmp_path):
    """Real episodes, grader, judge training (subprocess), EF/EB verdicts and the report, on two
    swe-mini:test tasks; then a resume redoes nothing and a changed mixture is refused."""
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
    args = ["tts", "--config", str(TINY), "--out", str(out),
            "tts.test.ids=[isodate__isodate-37c5172c, webcolors__webcolors-023eae96]",
            "tts.train.per_repo=1", "tts.train.repos=[pypi/addict, pypi/inflection]",
            "tts.test_mixture={right: 1, wrong: 2, empty: 1}", "tts.train_mixture={right: 1, wrong: 1}",
            f"tts.judge.base_models=[{judge_base}]", "tts.auc_bootstrap=100",
            "tts.judge.overrides=[epochs=2, batch_size=1, heldout_fraction=0.5]"]  # fmt: skip
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    report = json.loads((out / "report.json").read_text())
    assert (report["tasks"], report["candidates"]) == (2, 8)
    kinds = report["tts"]["mixture"]["test"]["per_kind"]
    assert kinds["right"] == {"candidates": 2, "resolved": 2, "missing": 0}
    assert kinds["wrong"]["resolved"] == kinds["empty"]["resolved"] == 0
    assert report["pass@1"]["mean"] == pytest.approx(0.25)
    assert report["tts"]["auc"]["candidates"] == 8 and report["tts"]["auc"]["auc"] is not None
    assert any("STAND-IN" in n for n in report["tts"]["notes"])
    assert set(report["tts"]["stage_seconds"]) == {"candidates", "judge", "ef", "eb"}
    assert "Test-time scaling run" in (out / "report.md").read_text()

    again = CliRunner().invoke(app, args)  # a resume: every stage done, report rewritten
    assert again.exit_code == 0 and "candidates: done before" in again.output
    changed = CliRunner().invoke(app, [*args, "tts.test_mixture.wrong=3"])
    assert changed.exit_code == 2 and "tts.test_mixture.wrong" in changed.output


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
    res = CliRunner().invoke(app, ["tts", "--config", str(TINY), "--out", str(out), *judge[:1],
                                   "tts.judge.model=judge", *judge[2:]])  # fmt: skip
    assert res.exit_code == 2, res.output
    assert f"model 'judge' is not served at {url}; it serves: judge-lora" in res.output
    assert not out.exists()
