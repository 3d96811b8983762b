"""The report of `deepswe-verify tts`: report.build_report over the test pool, then what only
this pipeline knows: how the candidates were mixed, the judge (base, held-out loss, AUC on the
test split with its uncertainty), the stand-ins used, and the seconds of every stage."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from deepswe.eval.store import atomic_write_json
from deepswe.verify.auc import auc_report
from deepswe.verify.report import build_report
from deepswe.verify.run_pools import load_run_pools
from deepswe.verify.store import VerdictStore
from deepswe.verify.tts.config import TTSConfig
from deepswe.verify.tts.mixture import read_mixture
from deepswe.verify.types import VerdictStatus


def mixture_summary(out: Path, split: str, seed: int) -> dict:
    """Per kind: candidates, resolved; and the numbering rule."""
    table = read_mixture(out / f"pool-{split}")
    kinds: dict[str, Counter] = {}
    for rows in table.values():
        for r in rows:
            c = kinds.setdefault(r["kind"], Counter())
            c["candidates"] += 1
            c["resolved"] += bool(r["resolved"])
            c["missing"] += r["status"] != "graded"
    return {
        "tasks": sorted(table),
        "per_kind": {k: dict(v) for k, v in kinds.items()},
        "numbering": "run k of a task = the k-th (kind, source run) of a shuffle seeded by "
        f"(tts.seed={seed}, instance id); pool-{split}/mixture.json lists each",
    }


def judge_facts(out: Path, cfg: TTSConfig) -> dict:
    if cfg.judge.base_url:
        return {"served": cfg.judge.base_url, "model": cfg.judge.model}
    folder = out / "judge" / "model"
    metrics = json.loads((folder / "metrics.json").read_text()) if (folder / "metrics.json").is_file() else {}  # fmt: skip
    import yaml

    trained = yaml.safe_load((folder / "config.yaml").read_text()) if (folder / "config.yaml").is_file() else {}  # fmt: skip
    keep = ("heldout_loss_before", "heldout_loss_after", "train_loss", "steps", "train_rows",
            "heldout_rows", "heldout_tasks")  # fmt: skip
    return {"base_model": trained.get("model"), "config": cfg.judge.config,
            **{k: metrics.get(k) for k in keep}}  # fmt: skip


def ef_auc(pool: Path, cfg: TTSConfig) -> dict:
    pools = load_run_pools(pool)
    verdicts = VerdictStore(pool).load("ef")
    points = []
    for iid, scores in pools.scores.items():
        for s in scores:
            v = verdicts.get((iid, s.run))
            if v is not None and v.status is VerdictStatus.SCORED and v.score is not None:
                points.append((iid, v.score, s.resolved))
    return auc_report(points, cfg.auc_bootstrap, cfg.seed)


def write_tts_report(
    out: Path, profile: Path, cfg: TTSConfig, splits: list[str], notes: list[str], stages: dict
) -> dict:
    """report.build_report over out/pool-test, then the tts facts into report.json/report.md."""
    pool = out / "pool-test"
    report = build_report(load_run_pools(pool), out, source=f"tts:{pool}",
                          model_name=f"deepswe-verify-tts-{profile.stem}")  # fmt: skip
    report["tts"] = {
        "profile": str(profile),
        "mixture": {s: mixture_summary(out, s, cfg.seed) for s in splits},
        "judge": judge_facts(out, cfg),
        "auc": ef_auc(pool, cfg),
        "eb_writer": cfg.eb.writer,
        "notes": notes,
        "stage_seconds": {k: v["seconds"] for k, v in stages.items() if k != "report"},
        "stage_seconds_how": "wall seconds, summed over resumes; the report's own in stages.json",
    }
    atomic_write_json(out / "report.json", report)
    md = (out / "report.md").read_text(encoding="utf-8")
    (out / "report.md").write_text(md + tts_markdown(report["tts"]), encoding="utf-8")
    return report


def _f(x: float | None, nd: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{nd}f}"


def tts_markdown(t: dict) -> str:
    lines = [
        "## Test-time scaling run (`deepswe-verify tts`)",
        "",
        f"Profile `{t['profile']}`.",
        "",
    ]
    for split, m in t["mixture"].items():
        kinds = ", ".join(f"{k} {v.get('candidates', 0)} ({v.get('resolved', 0)} resolved)"
                          for k, v in m["per_kind"].items())  # fmt: skip
        lines.append(f"- {split} candidates, {len(m['tasks'])} tasks: {kinds}. {m['numbering']}.")
    a, j = t["auc"], t["judge"]
    if a.get("auc") is None:
        lines.append(f"- judge AUC on test candidates: {a.get('why', 'n/a')}")
    else:
        b = a.get("bootstrap") or {}
        ci = b.get("ci95") or [None, None]
        lines.append(
            f"- judge AUC on {a['candidates']} test candidates ({a['positives']} resolved, "
            f"{a['tasks']} tasks): {_f(a['auc'])} ± {_f(a['hanley_mcneil_se'])} (Hanley-McNeil "
            f"SE); task bootstrap SE {_f(b.get('se'))}, 95% [{_f(ci[0])}, {_f(ci[1])}] "
            f"({b.get('resamples', 0)} resamples, {b.get('dropped', 0)} one-class dropped)"
        )
    if "served" in j:
        lines.append(f"- judge: served at {j['served']} ({j['model']})")
    else:
        lines.append(
            f"- judge: LoRA on `{j.get('base_model')}` ({j.get('train_rows')} train rows, "
            f"{j.get('steps')} steps); held-out loss {_f(j.get('heldout_loss_before'))} -> "
            f"{_f(j.get('heldout_loss_after'))} nats/token"
        )
    lines.append(f"- reproduction tests: {t['eb_writer']}")
    for note in t["notes"]:
        lines.append(f"- note: {note}")
    secs = ", ".join(f"{k} {v:.0f}s" for k, v in t["stage_seconds"].items())
    lines += [f"- seconds per stage: {secs}", ""]
    return "\n".join(lines)
