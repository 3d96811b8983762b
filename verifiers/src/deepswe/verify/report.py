"""The selection report of one set of pools: report.json, report.md, best_at_k.png,
selections.jsonl and predictions/<method>.jsonl (SWE-bench's prediction format); beside the
curves, every score's AUC against the baselines', what each verifier adds over the best
baseline, and the EF judge's calibration with reliability.png (report_scores.py).

Every number says how it was measured (exact or sampled, tasks counted, tasks excluded and
why). Predictions are each method's pick from a task's whole pool (`Selection.chosen`: the
lowest run among the tied; for "random" that is run 0, an exchangeable draw). The oracle's
file reads the ground truth: it is the ceiling, not a submission.
"""

from __future__ import annotations

import json
from pathlib import Path

from deepswe.eval.store import atomic_write_json
from deepswe.verify.curves import Curve, all_curves
from deepswe.verify.recorded import Recorded
from deepswe.verify.report_scores import score_sections, scores_markdown
from deepswe.verify.select import BASELINE_METHODS, METHODS, select

# DeepSWE blog (Agentica, "DeepSWE: Training a Fully Open-sourced, State-of-the-Art Coding Agent
# by Scaling RL", 2025), SWE-Bench-Verified, percent.
REFERENCE = {
    "pass@1": 42.2,
    "ef best@8": 47.0,
    "hybrid best@8": 57.9,
    "hybrid best@16": 59.0,
}
SHOWN_K = (1, 2, 4, 8, 16)


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}"


def shown_ks(n_max: int) -> list[int]:
    """The k of the report's tables: SHOWN_K below the largest pool, then the largest pool."""
    return [k for k in SHOWN_K if k < n_max] + ([n_max] if n_max else [])


def _at(curve: Curve, k: int) -> dict | None:
    return next((p.model_dump() for p in curve.points if p.k == k), None)


def build_report(
    pools: Recorded,
    out: Path | str,
    *,
    source: str,
    model_name: str = "deepswe-verify",
    samples: int | None = None,
    seed: int = 0,
    bootstrap: int = 1000,
) -> dict:
    """Compute the curves, selections and score measures of `pools` (AUC and ECE intervals
    from `bootstrap` task resamples); write every file under `out`."""
    out = Path(out)
    (out / "predictions").mkdir(parents=True, exist_ok=True)
    curves = all_curves(pools.scores, samples=samples, seed=seed)
    by_name = {c.method: c for c in curves}
    sizes = [len(p) for p in pools.scores.values()]
    n_max = max(sizes, default=0)
    selections = _write_selections(pools, out, model_name)
    report = {
        "source": source,
        "tasks": len(pools.scores),
        "candidates": sum(sizes),
        "pool_sizes": {str(n): sizes.count(n) for n in sorted(set(sizes))},
        "records_read": pools.records,
        "skipped": [s.model_dump() for s in pools.skipped],
        "skipped_how": "rollouts that are not candidates (no reward or grade): never unresolved",
        "notes": pools.notes,
        "pass@1": _at(by_name["pass@k"], 1),
        "pass@N": _at(by_name["pass@k"], n_max),
        "pass_how": "unbiased pass@k (Chen et al. 2021), mean over tasks; stderr over tasks",
        "curves": [c.model_dump() for c in curves],
        "curves_how": "Best@k = expected resolved share of the pick from k of a task's N "
        "candidates (uniform k-subsets, ties shared); tasks with N < k use all N (short_tasks); "
        "a method's tasks are those where it can run (excluded lists the others and why)",
        "selections": selections,
        "selections_how": "each method on each task's whole pool; predictions/<method>.jsonl "
        "holds the chosen patches (instance_id, model_name_or_path, model_patch)",
        "reference": REFERENCE,
        "reference_how": "DeepSWE blog, SWE-Bench-Verified, 16 rollouts per task",
        **score_sections(pools.scores, out, shown_ks(n_max), bootstrap, seed),
    }
    atomic_write_json(out / "report.json", report)
    (out / "report.md").write_text(render_markdown(report), encoding="utf-8")
    _plot(curves, out)
    return report


def _write_selections(pools: Recorded, out: Path, model_name: str) -> dict[str, dict]:
    summary: dict[str, dict] = {}
    lines = []
    for method in METHODS:
        counts: dict[str, int] = {}
        preds, expected = [], []
        for iid, scores in sorted(pools.scores.items()):
            sel = select(scores, method, iid)
            lines.append(sel.model_dump_json())
            counts[sel.status.value] = counts.get(sel.status.value, 0) + 1
            if sel.chosen is None or sel.expected_resolved is None:
                continue  # counted in statuses; no prediction for this task
            expected.append(sel.expected_resolved)
            patch = next(c.patch for c in pools.candidates[iid] if c.run == sel.chosen)
            preds.append(
                {
                    "instance_id": iid,
                    "model_name_or_path": f"{model_name}+{method}",
                    "model_patch": patch,
                }
            )
        text = "".join(json.dumps(p) + "\n" for p in preds)
        (out / "predictions" / f"{method}.jsonl").write_text(text, encoding="utf-8")
        summary[method] = {
            "statuses": counts,
            "expected_resolved_mean": sum(expected) / len(expected) if expected else None,
            "predictions": len(preds),
        }
    (out / "selections.jsonl").write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    return summary


def render_markdown(report: dict) -> str:
    """report.md from report.json's content."""
    curves = {c["method"]: c for c in report["curves"]}
    n_max = max((int(n) for n in report["pool_sizes"]), default=0)
    ks = shown_ks(n_max)
    lines = [
        "# Selection report",
        "",
        f"Source: `{report['source']}`. {report['tasks']} tasks, {report['candidates']} "
        f"candidates (pool sizes: {report['pool_sizes']}); {len(report['skipped'])} rollouts "
        "skipped (not candidates).",
        "",
        f"Pass@1 {_pct((report['pass@1'] or {}).get('mean'))}%, "
        f"Pass@{n_max} {_pct((report['pass@N'] or {}).get('mean'))}% ({report['pass_how']}).",
        "",
        "| method | " + " | ".join(f"k={k}" for k in ks) + " | tasks | how |",
        "|---|" + "---|" * len(ks) + "---|---|",
    ]
    for name, c in curves.items():
        pts = {p["k"]: p for p in c["points"]}
        cells = []
        for k in ks:
            p = pts.get(k)
            se = "" if not p or p["stderr"] is None else f" ± {100 * p['stderr']:.1f}"
            cells.append(f"{_pct(p['mean'])}{se}" if p else "n/a")
        tasks = c["points"][0]["tasks"] if c["points"] else 0
        how = c["how"].split(":")[0]  # "exact" or "sampled"; the full text is in report.json
        label = (
            f"{name} (baseline)"
            if name in BASELINE_METHODS
            else f"{name} (ceiling)"
            if name == "oracle"
            else name
        )
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {tasks} | {how} |")
    lines += ["", report["curves_how"] + ".", ""]
    for name, c in curves.items():
        if c["excluded"]:
            why = sorted(set(c["excluded"].values()))[:3]
            lines.append(f"- {name}: {len(c['excluded'])} task(s) excluded, e.g. {why}")
    for note in report["notes"][:20]:
        lines.append(f"- note: {note}")
    ref = ", ".join(f"{k} {v}%" for k, v in report["reference"].items())
    lines += ["", f"Reference ({report['reference_how']}): {ref}.", ""]
    if "scores" in report:
        lines += scores_markdown(report)
    return "\n".join(lines)


def _plot(curves: list[Curve], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=(6, 4))
    for c in curves:
        if not c.points:
            continue
        ks = [p.k for p in c.points]
        style = "k--" if c.method == "pass@k" else "o-"
        ax.plot(ks, [100 * p.mean for p in c.points], style, label=c.method, markersize=3)
    ax.set(xlabel="k (candidates per task)", ylabel="% of tasks resolved", ylim=(0, 100))
    ax.set_title("Best@k by selection method, Pass@k")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(fontsize=8, loc="lower right", ncol=2)
    fig.tight_layout()
    fig.savefig(out / "best_at_k.png", dpi=100)
    plt.close(fig)
