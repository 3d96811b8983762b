"""The scores' part of a selection report: each verifier's AUC beside the baselines', what it
adds over the best baseline (AUC and Best@k), and the EF judge's calibration with its
reliability plot (reliability.png). Written into report.json under "scores", "gains" and
"calibration", and as report.md sections, by report.build_report."""

from __future__ import annotations

from pathlib import Path

from deepswe.verify.auc import Point, score_table
from deepswe.verify.calibration import calibration_report, plot_reliability
from deepswe.verify.gains import best_at_k_gains
from deepswe.verify.types import Scores

# score name in the report -> how it is read from Scores
VERIFIER_SCORES = ("ef", "regression", "reproduction")
BASELINE_SCORES = ("random", "changes-code", "smallest")
READ = {
    "ef": lambda s: s.ef,
    "regression": lambda s: s.regression,
    "reproduction": lambda s: s.reproduction,
    "random": lambda s: 0.0,  # a constant: every pair tied, AUC 1/2 exactly
    "changes-code": lambda s: s.changes_code,
    "smallest": lambda s: s.smallest,
    "oracle": lambda s: float(s.resolved),  # the ceiling: AUC 1 by construction
}


def points_of(pools: dict[str, list[Scores]], name: str) -> list[Point]:
    """(task, score, resolved) of every candidate that has score `name`."""
    read = READ[name]
    return [
        (iid, float(v), s.resolved)
        for iid, pool in sorted(pools.items())
        for s in pool
        if (v := read(s)) is not None
    ]


def score_sections(
    pools: dict[str, list[Scores]], out: Path, ks: list[int], bootstrap: int = 1000, seed: int = 0
) -> dict:
    """{"scores": AUC table and gains, "gains": Best@k gains, "calibration": EF's or None}."""
    named = {n: pts for n in READ if (pts := points_of(pools, n))}
    table = score_table(
        named,
        [v for v in VERIFIER_SCORES if v in named],
        [b for b in BASELINE_SCORES if b in named],
        bootstrap,
        seed,
    )
    ef = named.get("ef", [])
    calibration = None
    if ef and all(0.0 <= s <= 1.0 for _, s, _ in ef):
        calibration = calibration_report(ef, bootstrap, seed)
        calibration["plot"] = plot_reliability(calibration, out / "reliability.png").name
    return {"scores": table, "gains": best_at_k_gains(pools, ks), "calibration": calibration}


def _f(x: float | None, nd: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{nd}f}"


def _ci(b: dict | None) -> str:
    return "n/a" if not b else f"[{_f(b['ci95'][0])}, {_f(b['ci95'][1])}]"


def scores_markdown(sections: dict) -> list[str]:
    table = sections["scores"]
    lines = [
        "## Scores against the baselines",
        "",
        "| score | kind | AUC pooled | 95% (tasks) | AUC within task | 95% (tasks) | candidates |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, r in table["scores"].items():
        kind = (
            "verifier" if name in VERIFIER_SCORES else "ceiling" if name == "oracle" else "baseline"
        )
        lines.append(
            f"| {name} | {kind} | {_f(r.get('auc'))} | {_ci(r.get('bootstrap'))} | "
            f"{_f(r.get('within_task_auc'))} | {_ci(r.get('within_task_bootstrap'))} | "
            f"{r['candidates']} ({r['positives']} resolved) |"
        )
    lines += ["", table["how"] + ".", ""]
    label = {"within_task_auc": "within-task AUC", "auc": "pooled AUC"}
    for name, g in table["gains"].items():
        for measure, d in g.items():
            lines.append(
                f"- {name}: {label[measure]} {d['gain']:+.3f} over the best baseline "
                f"({d['best_baseline']}), 95% {_ci(d['bootstrap'])}"
            )
    gains = sections["gains"]["rows"]
    if gains:
        ks = sorted({r["k"] for r in gains})
        lines += [
            "",
            "Best@k gain over the best baseline (points; ± SE of paired per-task "
            "differences; the baseline named per k):",
            "",
            "| method | " + " | ".join(f"k={k}" for k in ks) + " |",
            "|---|" + "---|" * len(ks),
        ]
        base = {r["k"]: r["best_baseline"] for r in gains}
        lines.append("| (best baseline) | " + " | ".join(base[k] for k in ks) + " |")
        for m in dict.fromkeys(r["method"] for r in gains):
            cells = {r["k"]: r for r in gains if r["method"] == m}
            lines.append(
                f"| {m} | "
                + " | ".join(
                    f"{100 * cells[k]['gain']:+.1f} ± {100 * (cells[k]['stderr'] or 0):.1f}"
                    if k in cells
                    else "n/a"
                    for k in ks
                )
                + " |"
            )
    cal = sections["calibration"]
    if cal:
        b = cal.get("bootstrap")
        lines += [
            "",
            "## EF calibration",
            "",
            f"ECE {_f(cal['ece'])} (task bootstrap 95% {_ci(b)}), MCE {_f(cal.get('mce'))}, "
            f"Brier {_f(cal.get('brier'))}; mean P(YES) {_f(cal.get('mean_score'))} against a "
            f"resolved share of {_f(cal.get('resolved_share'))}, over {cal['candidates']} "
            f"candidates. Binning: {cal['binning']}. Plot: {cal.get('plot')}.",
            "",
            "| bin | candidates | mean P(YES) | resolved share |",
            "|---|---|---|---|",
        ]
        for r in cal["bins"]:
            if r["n"]:
                lines.append(
                    f"| [{r['lo']:.1f}, {r['hi']:.1f}) | {r['n']} | {_f(r['conf'])} | "
                    f"{_f(r['acc'])} |"
                )
    return lines + [""]
