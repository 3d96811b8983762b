"""`deepswe-reproduce tts`: hybrid test-time scaling end to end, stage by stage, resumable.

    candidates  per split: the model's episodes (deepswe-eval run) and the scripted kinds, made
                from each task's gold patch and base code (tts/kinds.py, tts/plan.py) and graded
                as submitted patches by the real grader (tts/grading.py); merged into one pool
                per split (tts/mixture.py)
    judge       judge SFT rows from the TRAIN pool (ef.judge_data), `deepswe-train judge` in a
                subprocess (verify never imports train); skipped when a served judge is given
    ef          the judge's P(YES) for every TEST candidate, into the pool's VerdictStore
    eb          regression verdicts, reproduction tests (the scripted stand-in writer on the
                tiny profile, named so in the report) and reproduction verdicts
    report      report.build_report over the test pool, plus the judge's AUC with its
                uncertainty (auc.py), the mixture and the seconds of every stage

Layout of --out: config.json (the resolved tts and eval sections; a resume with other values is
refused naming them), stages.json (reproduce's stage runner, deepswe.reproduce.pipeline: each
stage's status, attempts and seconds), candidates/<split>/model/ (an eval run
folder), candidates/<split>/made/ (plan.json and the graded scripted candidates), pool-<split>/
(merged run folders: episodes/, mixture.json, verdicts/, eb/), judge/{data.jsonl,model/}, and
the report files. Each stage skips what is already on disk.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from deepswe.eval.audit_manifest import Survivor
from deepswe.eval.config import EvalConfig
from deepswe.eval.health import HealthError, load_manifest
from deepswe.eval.store import atomic_write_json
from deepswe.reproduce.pipeline import Stage, StageFailed, StageResult, read_state, run_pipeline
from deepswe.reproduce.tts.context import Ctx, Log, TTSError, cli_bin, relay, with_issues
from deepswe.reproduce.tts.grading import grade_plan
from deepswe.reproduce.tts.judge_stage import make_tts_judge, served_judge, stage_judge
from deepswe.reproduce.tts.mixture import merge_pools, pick_tasks, slot
from deepswe.reproduce.tts.plan import PlanError, make_plan, proven_wrong
from deepswe.verify.store import VerdictStore, candidates_from_run
from deepswe.verify.tts_config import TTSConfig
from deepswe.verify.types import VerdictStatus

# The stages run_pipeline records, in order, with their line; the report is made after them on
# every run, from what is on disk.
STAGES = {
    "candidates": "the model's episodes and the scripted kinds, graded, merged per split",
    "judge": "the EF judge trained on the train pool (skipped with a served judge)",
    "ef": "the judge's P(YES) for every test candidate",
    "eb": "regression and reproduction verdicts",
}
STANDIN = (
    "eb: reproduction tests by the SCRIPTED STAND-IN writer (the issue's own snippet as a "
    "test, no model), not a test-writing agent"
)
OPERATIONAL = {"workers", "eb.workers", "max_infra_errors"}  # may change on resume


def model_available(eval_cfg: EvalConfig) -> tuple[bool, str]:
    """Whether the eval policy can run here: its model folder exists, or its endpoint is set."""
    p = eval_cfg.policy
    if p.name == "openai":
        return bool(p.base_url), f"endpoint {p.base_url or '(no base_url set)'}"
    if "path" in p.args:
        return Path(p.args["path"]).exists(), f"model folder {p.args['path']}"
    return p.name not in ("gold", "gold-patch", "empty", "replay"), f"policy {p.name}"


def kind_counts(ctx: Ctx, split: str) -> dict[str, int]:
    counts = (ctx.cfg.test_mixture if split == "test" else ctx.cfg.train_mixture).counts()
    ok, what = model_available(ctx.eval_cfg)
    if counts["model"] and not ok:
        if ctx.cfg.require_model:
            raise TTSError(f"tts.require_model: {what} is not there; run `make train` first")
        note = (
            f"{split}: {counts['model']} model episodes per task planned, none run: {what} absent"
        )
        if note not in ctx.notes:
            ctx.notes.append(note)
        counts["model"] = 0
    return counts


def eval_run(ctx: Ctx, split: str, n: int, run_dir: Path) -> None:
    """deepswe-eval run of the eval policy over the split's tasks (resumable: the same folder)."""
    pick = ctx.cfg.test if split == "test" else ctx.cfg.train
    cmd = [
        cli_bin("deepswe-eval"),
        "run",
        "--config",
        str(ctx.profile),
        "--out",
        str(run_dir),
        "--dataset",
        pick.dataset,
    ]
    for t in ctx.tasks[split]:
        cmd += ["--ids", t.instance_id]
    # the pipeline's own values come last: an override applied later wins
    cmd += [*ctx.eval_overrides, f"eval.runs={n}", f"eval.workers={ctx.cfg.workers}"]
    ctx.log(f"tts candidates: {split}/model: {n} per task x {len(ctx.tasks[split])} tasks")
    code = relay(cmd, ctx.log)
    if code != 0:
        raise TTSError(
            f"deepswe-eval run for {split}/model exited {code} "
            f"({run_dir}); run the same command again to resume it"
        )


def survivors_of(ctx: Ctx, split: str) -> dict[str, list[Survivor]]:
    """The split's tasks' proven-wrong survivors from `tts.strength`, the count said in a note."""
    try:
        found = proven_wrong(load_manifest(ctx.cfg.strength))
    except HealthError as exc:
        raise TTSError(f"tts.strength: {exc}") from None
    ids = [t.instance_id for t in ctx.tasks[split]]
    have = [i for i in ids if i in found]
    note = (
        f"{split}: survivor candidates from {ctx.cfg.strength}: {len(have)} of {len(ids)} tasks "
        f"have a proven-wrong survivor ({', '.join(have) or 'none'}); the others get hard kinds"
    )
    if note not in ctx.notes:
        ctx.notes.append(note)
    return {i: found[i] for i in have}


def stage_candidates(ctx: Ctx) -> None:
    for split in ctx.tasks:  # no train split when the judge is served (nothing to train)
        counts = kind_counts(ctx, split)
        folder = ctx.out / "candidates" / split
        slots: dict[str, list[dict]] = {t.instance_id: [] for t in ctx.tasks[split]}
        if counts["model"]:
            eval_run(ctx, split, counts["model"], folder / "model")
            for rows in slots.values():
                rows += [
                    slot("model", folder / "model", j, detail="an episode of the eval policy")
                    for j in range(counts["model"])
                ]
        made = {k: n for k, n in counts.items() if k != "model" and n}
        if made:
            try:
                plan = make_plan(
                    ctx.tasks[split],
                    made,
                    ctx.dataset[split],
                    ctx.cfg.seed,
                    folder / "made" / "plan.json",
                    ctx.log,
                    survivors_of(ctx, split) if made.get("survivor") else None,
                )
            except PlanError as exc:
                raise TTSError(f"candidates: {exc}") from None
            tasks = {t.instance_id: t for t in ctx.tasks[split]}
            grade_plan(plan, tasks, ctx.eval_cfg, folder / "made", ctx.cfg.workers, ctx.log)
            for iid, planned in plan.items():
                slots[iid] += [
                    slot(p.kind, folder / "made", p.run, p.planned, p.detail, p.expect)
                    for p in planned
                ]
        table = merge_pools(slots, ctx.pool(split), ctx.cfg.seed)
        rows = [r for rs in table.values() for r in rs]
        graded = [r for r in rows if r["status"] == "graded"]
        ctx.log(
            f"tts candidates: {split} pool: {len(table)} tasks, {len(graded)} graded, "
            f"{sum(bool(r['resolved']) for r in graded)} resolved"
        )
        if failed := [r for r in rows if r["status"] != "graded"]:
            raise TTSError(
                f"candidates: {len(failed)} {split} candidates not graded (infra "
                f"errors, e.g. {failed[0]['source']} run {failed[0]['source_run']}); "
                "run again to retry them"
            )


def check_endpoints(ctx: Ctx, stages: dict) -> None:
    """Ask each endpoint a stage still to run will use for its models, before the first stage:
    a wrong URL, key or model name stops the run in a second, with one line, not after hours
    of candidates (deepswe-eval run checks the policy's again before its episodes)."""
    from deepswe.env.policies.endpoint import EndpointError, check_endpoint, check_policy_endpoint

    todo = {name for name in STAGES if stages.get(name, {}).get("status") != "done"}
    policy_used = (
        "candidates" in todo
        and any(kind_counts(ctx, s)["model"] for s in ctx.tasks)
        or "eb" in todo
        and ctx.cfg.eb.writer == "agent"
    )
    try:
        if ctx.cfg.judge.base_url and "ef" in todo:
            check_endpoint(served_judge(ctx))
        if policy_used:
            check_policy_endpoint(ctx.eval_cfg.policy)
    except EndpointError as exc:
        raise TTSError(str(exc)) from None


def stage_ef(ctx: Ctx) -> None:
    from deepswe.verify.ef.score import score_candidates

    cands = with_issues(ctx.pool("test"), ctx.tasks["test"])
    store = VerdictStore(ctx.pool("test"))
    if not [c for c in cands if (c.instance_id, c.run) not in store.done("ef")]:
        return
    score_candidates(
        cands,
        make_tts_judge(ctx),
        store,
        budget=ctx.cfg.judge.max_prompt_tokens,
        fmt=ctx.cfg.judge.format,
        workers=1,
        log=ctx.log,
    )


def stage_eb(ctx: Ctx) -> None:
    from deepswe.verify.eb import (
        SandboxPlan,
        generate_tests,
        make_writer,
        score_regression,
        score_reproduction,
    )

    tasks = {t.instance_id: t for t in ctx.tasks["test"]}
    pools = candidates_from_run(ctx.pool("test"))
    store = VerdictStore(ctx.pool("test"))
    plan = SandboxPlan(
        backend=ctx.eval_cfg.sandbox_backend,
        limits=ctx.eval_cfg.sandbox,
        workers=ctx.cfg.eb.workers,
    )
    score_regression(pools, tasks, store, plan=plan, log=ctx.log)
    episodes = ctx.pool("test") / "eb" / "testgen-episodes"
    writer = make_writer(ctx.cfg.eb.writer, ctx.eval_cfg.policy, ctx.eval_cfg.episode, episodes)
    generate_tests(
        list(tasks.values()), store, writer, n=ctx.cfg.eb.tests_per_task, plan=plan, log=ctx.log
    )
    score_reproduction(pools, tasks, store, plan=plan, log=ctx.log)
    for verifier in ("regression", "reproduction"):
        bad = [v for v in store.load(verifier).values() if v.status is VerdictStatus.UNREACHABLE]
        if bad:
            raise TTSError(
                f"eb: {len(bad)} {verifier} verdicts unreachable (sandbox failures); "
                "run again to retry them"
            )


def stage_report(ctx: Ctx, stages: dict) -> dict:
    from deepswe.reproduce.tts.report import write_tts_report

    return write_tts_report(ctx.out, ctx.profile, ctx.cfg, list(ctx.tasks), ctx.notes, stages)


def check_resume(out: Path, resolved: dict) -> None:
    """Refuse a resume whose resolved config differs (operational fields aside), naming keys."""
    path = out / "config.json"
    if not path.is_file():
        return
    old = json.loads(path.read_text(encoding="utf-8"))

    def flat(d: dict, pre: str = "") -> dict:
        out: dict = {}
        for k, v in d.items():
            out.update(flat(v, f"{pre}{k}.") if isinstance(v, dict) else {f"{pre}{k}": v})
        return out

    a, b = flat(old), flat(resolved)
    diff = sorted(
        k
        for k in set(a) | set(b)
        if a.get(k) != b.get(k) and k.split(".", 1)[-1] not in OPERATIONAL
    )
    if diff:
        raise TTSError(
            f"{out}: a run with other settings is there ({', '.join(diff[:8])}); "
            "use another --out or the same settings"
        )


def run_tts(
    profile: Path,
    out: Path,
    cfg: TTSConfig,
    eval_cfg: EvalConfig,
    eval_overrides: list[str],
    log: Log = print,
) -> dict:
    """Every stage not yet done, in order; returns report.json's content."""
    from deepswe.data.datasets import load_tasks

    if cfg.judge.format == "r2e-gym" and not cfg.judge.base_url:
        raise TTSError(
            "tts.judge.format r2e-gym is the published verifier's prompt and needs "
            "that verifier served (tts.judge.base_url); a judge trained here learns "
            "our format: set tts.judge.format=ours"
        )
    resolved = {"tts": cfg.model_dump(mode="json"), "eval": eval_cfg.model_dump(mode="json")}
    check_resume(out, resolved)
    ctx = Ctx(profile, out, cfg, eval_cfg, eval_overrides, log)
    picks = (
        [("test", cfg.test)] if cfg.judge.base_url else [("train", cfg.train), ("test", cfg.test)]
    )
    for split, pick in picks:
        try:
            ctx.dataset[split] = load_tasks(pick.dataset)
            ctx.tasks[split] = pick_tasks(ctx.dataset[split], pick)
        except ValueError as exc:
            raise TTSError(str(exc)) from None
        log(f"tts: {split} tasks ({pick.dataset}): {[t.instance_id for t in ctx.tasks[split]]}")
    stages = read_state(out)["stages"]
    for split in ctx.tasks:
        kind_counts(ctx, split)  # the notes, on every resume too
    if cfg.eb.writer == "scripted-standin":
        ctx.notes.append(STANDIN)
    check_endpoints(ctx, stages)  # before anything is written
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out / "config.json", resolved)
    runners = {"candidates": stage_candidates, "judge": stage_judge, "ef": stage_ef, "eb": stage_eb}

    def step(run):
        def stage(c: Ctx) -> StageResult:
            run(c)
            return StageResult()

        return stage

    plan = [Stage(name, what, step(runners[name])) for name, what in STAGES.items()]
    try:
        run_pipeline(ctx, plan)
    except StageFailed as exc:  # the stage's own reason, as deepswe-reproduce tts says it
        raise TTSError(str(exc.__cause__ or exc)) from None
    t0 = time.monotonic()  # the report is made again on every run, from what is on disk
    report = stage_report(ctx, read_state(out)["stages"])
    log(f"tts report: {out}/report.md ({time.monotonic() - t0:.1f}s)")
    return report
