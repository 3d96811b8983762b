"""The report of `deepswe-reproduce tts`: report.build_report over the test pool (Best@k with the
baselines, every score's AUC against theirs, the gains over the best baseline, EF calibration
and reliability.png), then what only this pipeline knows: the pool's composition by kind and
what each verifier said of each kind, how often each selector picks a proven-wrong survivor (a
wrong fix the graded tests pass) where the pool holds one, the judge (base, data, held-out loss; train projects
disjoint from test projects), the execution-based tests (kept per task, agreement with the
hidden tests), the stand-ins used and the seconds of every stage."""

from __future__ import annotations

import json
import statistics
from collections import Counter
from pathlib import Path

from deepswe.eval.store import atomic_write_json
from deepswe.reproduce.tts.eb_report import eb_markdown, eb_summary
from deepswe.reproduce.tts.mixture import read_mixture
from deepswe.verify.recorded import Recorded
from deepswe.verify.report import build_report
from deepswe.verify.run_pools import load_run_pools
from deepswe.verify.select import METHODS, SelectionStatus, select
from deepswe.verify.tts_config import TTSConfig

SCORES = ("ef", "regression", "reproduction", "changes_code", "smallest")


def mixture_summary(out: Path, split: str, seed: int) -> dict:
    """Per kind: candidates, resolved, substitutes (standing in for which kind), and how often
    the grader said what the construction predicted."""
    table = read_mixture(out / f"pool-{split}")
    kinds: dict[str, Counter] = {}
    for rows in table.values():
        for r in rows:
            c = kinds.setdefault(r["kind"], Counter())
            c["candidates"] += 1
            c["resolved"] += bool(r["resolved"])
            c["missing"] += r["status"] != "graded"
            if r.get("planned", r["kind"]) != r["kind"]:
                c[f"in place of {r['planned']}"] += 1
            if r.get("expect") is not None and r["resolved"] is not None:
                c["as predicted"] += r["expect"] == r["resolved"]
                c["predicted"] += 1
    return {
        "tasks": sorted(table),
        "per_kind": {k: dict(v) for k, v in sorted(kinds.items())},
        "numbering": "run k of a task = the k-th slot of a shuffle seeded by "
        f"(tts.seed={seed}, instance id); pool-{split}/mixture.json lists each run's kind",
    }


def scores_by_kind(pools: Recorded, mixture: dict[str, list[dict]]) -> dict[str, dict]:
    """Per kind: the mean of each score over its candidates that have it."""
    kind = {(iid, r["run"]): r["kind"] for iid, rows in mixture.items() for r in rows}
    got: dict[str, dict[str, list[float]]] = {}
    for iid, pool in pools.scores.items():
        for s in pool:
            for name in SCORES:
                v = getattr(s, name)
                if v is not None:
                    got.setdefault(kind[(iid, s.run)], {}).setdefault(name, []).append(v)
    return {k: {n: statistics.fmean(v) for n, v in d.items()} for k, d in sorted(got.items())}


def projects(dataset_tasks: list[str]) -> list[str]:
    """Repositories of instance ids `owner__name-id` (swe-mini's form)."""
    return sorted({i.rsplit("-", 1)[0] for i in dataset_tasks})


def judge_facts(out: Path, cfg: TTSConfig, mixtures: dict) -> dict:
    test_p = projects(mixtures.get("test", {}).get("tasks", []))
    train_p = projects(mixtures.get("train", {}).get("tasks", []))
    split = {
        "test_projects": test_p,
        "train_projects": train_p,
        "disjoint": not set(test_p) & set(train_p),
    }
    if cfg.judge.base_url:
        return {"served": cfg.judge.base_url, "model": cfg.judge.model, **split}
    folder = out / "judge" / "model"
    metrics = (
        json.loads((folder / "metrics.json").read_text())
        if (folder / "metrics.json").is_file()
        else {}
    )
    import yaml

    trained = (
        yaml.safe_load((folder / "config.yaml").read_text())
        if (folder / "config.yaml").is_file()
        else {}
    )
    keep = (
        "heldout_loss_before",
        "heldout_loss_after",
        "train_loss",
        "steps",
        "train_rows",
        "heldout_rows",
        "heldout_tasks",
    )
    return {
        "base_model": trained.get("model"),
        "config": cfg.judge.config,
        **{k: metrics.get(k) for k in keep},
        **split,
    }


def write_tts_report(
    out: Path, profile: Path, cfg: TTSConfig, splits: list[str], notes: list[str], stages: dict
) -> dict:
    """report.build_report over out/pool-test, then the tts facts into report.json/report.md."""
    pool = out / "pool-test"
    pools = load_run_pools(pool)
    report = build_report(
        pools,
        out,
        source=f"tts:{pool}",
        bootstrap=cfg.auc_bootstrap,
        seed=cfg.seed,
        model_name=f"deepswe-verify-tts-{profile.stem}",
    )
    mixtures = {s: mixture_summary(out, s, cfg.seed) for s in splits}
    test_mixture = read_mixture(pool)
    report["tts"] = {
        "profile": str(profile),
        "mixture": mixtures,
        "scores_by_kind": scores_by_kind(pools, test_mixture),
        "survivor_picks": survivor_picks(pools, test_mixture),
        "judge": judge_facts(out, cfg, mixtures),
        "eb": eb_summary(pool, test_mixture),
        "eb_writer": cfg.eb.writer,
        "notes": notes,
        "stage_seconds": {k: v["seconds"] for k, v in stages.items() if "seconds" in v},
        "stage_seconds_how": "wall seconds of each stage's finishing attempt (stages.json, "
        "with its attempts); the report, made again on every run, is not timed here",
    }
    atomic_write_json(out / "report.json", report)
    md = (out / "report.md").read_text(encoding="utf-8")
    (out / "report.md").write_text(md + tts_markdown(report["tts"]), encoding="utf-8")
    return report


def _f(x: float | None, nd: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{nd}f}"


def survivor_picks(pools: Recorded, mixture: dict[str, list[dict]]) -> dict:
    """Per selection method, over the tasks whose pool holds a `survivor` candidate (a wrong fix
    the graded tests pass, so the grader resolves it): the expected share of its picks that are
    one (ties broken uniformly, as Best@k counts them), and how many tasks it decided."""
    survivor = {
        (iid, r["run"]) for iid, rows in mixture.items() for r in rows if r["kind"] == "survivor"
    }
    tasks = sorted({iid for iid, _ in survivor} & set(pools.scores))
    out: dict[str, dict] = {}
    for method in METHODS:
        shares = []
        for iid in tasks:
            sel = select(pools.scores[iid], method, iid)
            if sel.status is SelectionStatus.SELECTED and sel.survivors:
                hit = sum((iid, run) in survivor for run in sel.survivors)
                shares.append(hit / len(sel.survivors))
        out[method] = {
            "tasks": len(shares),
            "picks_survivor": statistics.fmean(shares) if shares else None,
        }
    return {"tasks": tasks, "per_method": out}


def composition_markdown(t: dict) -> list[str]:
    lines = ["## The pool", ""]
    for split, m in t["mixture"].items():
        lines += [f"{split}: {len(m['tasks'])} tasks. {m['numbering']}.", ""]
        lines += [
            "| kind | candidates | resolved | substitutes | graded as predicted |",
            "|---|---|---|---|---|",
        ]
        for kind, c in m["per_kind"].items():
            subs = ", ".join(f"{n} {k}" for k, n in c.items() if k.startswith("in place of"))
            pred = f"{c.get('as predicted', 0)}/{c['predicted']}" if c.get("predicted") else "-"
            lines.append(
                f"| {kind} | {c['candidates']} | {c.get('resolved', 0)} | {subs or '-'} | {pred} |"
            )
        lines.append("")
    by_kind = t["scores_by_kind"]
    if by_kind:
        lines += [
            "Mean score by kind (test pool):",
            "",
            "| kind | " + " | ".join(SCORES) + " |",
            "|---|" + "---|" * len(SCORES),
        ]
        for kind, d in by_kind.items():
            lines.append(f"| {kind} | " + " | ".join(_f(d.get(n), 2) for n in SCORES) + " |")
        lines.append("")
    picks = t.get("survivor_picks") or {}
    if picks.get("tasks"):
        lines += [
            f"Proven-wrong survivors (wrong fixes the graded tests pass, the grader resolves "
            f"them) are in the test pool of {len(picks['tasks'])} task(s); the share of each "
            "selector's picks that is one (ties broken uniformly), lower is better:",
            "",
            "| selector | tasks | picks a survivor |",
            "|---|---|---|",
        ]
        for method, d in picks["per_method"].items():
            lines.append(f"| {method} | {d['tasks']} | {_f(d['picks_survivor'], 2)} |")
        lines.append("")
    return lines


def tts_markdown(t: dict) -> str:
    lines = [
        "",
        "## Test-time scaling run (`deepswe-reproduce tts`)",
        "",
        f"Profile `{t['profile']}`.",
        "",
    ]
    lines += composition_markdown(t)
    j = t["judge"]
    lines += ["## The judge", ""]
    if "served" in j:
        lines.append(f"- served at {j['served']} ({j['model']})")
    else:
        lines.append(
            f"- LoRA on `{j.get('base_model')}` ({j.get('train_rows')} train rows, "
            f"{j.get('steps')} steps); held-out loss {_f(j.get('heldout_loss_before'))} -> "
            f"{_f(j.get('heldout_loss_after'))} nats/token"
        )
    lines.append(
        f"- trained on {', '.join(j['train_projects']) or 'nothing'}; tested on "
        f"{', '.join(j['test_projects'])}: projects "
        f"{'disjoint' if j['disjoint'] else 'SHARED'}"
    )
    lines += [""] + eb_markdown(t["eb"])
    lines.append(f"- reproduction tests: {t['eb_writer']}")
    for note in t["notes"]:
        lines.append(f"- note: {note}")
    secs = ", ".join(f"{k} {v:.0f}s" for k, v in t["stage_seconds"].items())
    lines += [f"- seconds per stage: {secs}", ""]
    return "\n".join(lines)
