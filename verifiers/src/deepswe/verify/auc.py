"""How well a score ranks resolved candidates above unresolved ones: ROC AUC, two ways, with
honest uncertainty, and what a verifier's AUC adds over the best baseline's.

- pooled AUC = P(score of a resolved candidate > score of an unresolved one), ties counted 1/2
  (the Mann-Whitney statistic), over every candidate of every task pooled: what "is this
  patch right?" asks, and the usual number for a judge;
- within-task AUC = the same probability over (resolved, unresolved) pairs of ONE task only,
  pairs of all tasks pooled: what selection asks (it only ever compares candidates of a task).
  Scores whose scale differs by task (a regression count) have a meaningless pooled AUC and a
  meaningful within-task one; tasks without both outcomes add no pair.

Uncertainty:
- Hanley & McNeil (1982, Radiology 143:29) standard error of the pooled AUC: it assumes
  independent candidates. Ours are not (a task's candidates share an issue, identical patches
  recur), so it understates the spread; it is given because it is the usual one.
- A task-level (cluster) bootstrap: tasks resampled with replacement, both AUCs recomputed,
  the 2.5/97.5 percentiles and the standard deviation reported; resamples with a single class
  (or no within-task pair) are dropped and counted. This is the one to read.
- Gains over the best baseline are paired: the same resampled tasks for both scores.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Mapping, Sequence

Point = tuple[str, float, bool]  # (instance_id, score, resolved)
HOW = (
    "Mann-Whitney AUC (ties 1/2): pooled over all scored candidates, and within-task over "
    "(resolved, unresolved) pairs of the same task; Hanley-McNeil SE assumes independent "
    "candidates; the task-level bootstrap (tasks resampled) is the honest interval"
)


def auc(points: Sequence[Point]) -> float | None:
    """Pooled Mann-Whitney AUC, ties 1/2; None without both classes."""
    pos = [s for _, s, y in points if y]
    neg = [s for _, s, y in points if not y]
    if not pos or not neg:
        return None
    ranked = sorted([(s, 1) for s in pos] + [(s, 0) for s in neg])
    rank_sum, i = 0.0, 0
    while i < len(ranked):  # average ranks over ties
        j = i
        while j < len(ranked) and ranked[j][0] == ranked[i][0]:
            j += 1
        mid = (i + 1 + j) / 2
        rank_sum += mid * sum(lab for _, lab in ranked[i:j])
        i = j
    n1, n0 = len(pos), len(neg)
    return (rank_sum - n1 * (n1 + 1) / 2) / (n1 * n0)


def task_pairs(points: Sequence[Point]) -> dict[str, tuple[float, int]]:
    """instance_id -> (wins, pairs): over the task's (resolved, unresolved) pairs, 1 when the
    resolved one scores higher, 1/2 on a tie."""
    by_task: dict[str, list[Point]] = {}
    for p in points:
        by_task.setdefault(p[0], []).append(p)
    out = {}
    for iid, pts in by_task.items():
        pos = [s for _, s, y in pts if y]
        neg = [s for _, s, y in pts if not y]
        wins = sum(1.0 if a > b else 0.5 if a == b else 0.0 for a in pos for b in neg)
        out[iid] = (wins, len(pos) * len(neg))
    return out


def within_task_auc(points: Sequence[Point]) -> float | None:
    """AUC over (resolved, unresolved) pairs of the same task; None without any such pair."""
    pairs = task_pairs(points)
    n = sum(p for _, p in pairs.values())
    return sum(w for w, _ in pairs.values()) / n if n else None


def hanley_mcneil_se(a: float, n_pos: int, n_neg: int) -> float:
    q1, q2 = a / (2 - a), 2 * a * a / (1 + a)
    var = (a * (1 - a) + (n_pos - 1) * (q1 - a * a) + (n_neg - 1) * (q2 - a * a)) / (n_pos * n_neg)
    return math.sqrt(max(var, 0.0))


def resamples(tasks: Sequence[str], n: int, seed: int) -> list[list[str]]:
    """`n` task lists drawn with replacement (seeded): the bootstrap's shared draws."""
    rng = random.Random(seed)
    return [rng.choices(list(tasks), k=len(tasks)) for _ in range(n)]


def interval(values: list[float], drawn: int) -> dict | None:
    """SE and 95% percentile interval of bootstrap values; None when none survived."""
    if not values:
        return None
    values = sorted(values)
    se = statistics.stdev(values) if len(values) > 1 else 0.0
    lo, hi = values[int(0.025 * (len(values) - 1))], values[int(0.975 * (len(values) - 1))]
    return {"resamples": drawn, "dropped": drawn - len(values), "se": se, "ci95": [lo, hi]}


def _measures(points: Sequence[Point]) -> tuple[Callable, Callable]:
    """(pooled, within-task) AUC of a resample given as a task list, each None when undefined."""
    by_task: dict[str, list[Point]] = {}
    for p in points:
        by_task.setdefault(p[0], []).append(p)
    pairs = task_pairs(points)

    def pooled(sample: list[str]) -> float | None:
        return auc([p for t in sample for p in by_task.get(t, [])])

    def within(sample: list[str]) -> float | None:
        n = sum(pairs[t][1] for t in sample if t in pairs)
        return sum(pairs[t][0] for t in sample if t in pairs) / n if n else None

    return pooled, within


def auc_report(
    points: Sequence[Point],
    bootstrap: int = 2000,
    seed: int = 0,
    draws: list[list[str]] | None = None,
) -> dict:
    """Both AUCs with the pooled one's Hanley-McNeil SE and task-bootstrap intervals, or why
    there is none. `draws` (task lists) replaces the seeded resamples, to pair two scores."""
    n_pos = sum(1 for p in points if p[2])
    tasks = sorted({p[0] for p in points})
    out: dict = {
        "candidates": len(points),
        "positives": n_pos,
        "negatives": len(points) - n_pos,
        "tasks": len(tasks),
        "auc": auc(points),
        "within_task_auc": within_task_auc(points),
        "how": HOW,
    }
    out["within_task_pairs"] = sum(p for _, p in task_pairs(points).values())
    if out["auc"] is None:
        out["why"] = "undefined: the scored candidates are all resolved or all unresolved"
        return out
    out["hanley_mcneil_se"] = hanley_mcneil_se(out["auc"], n_pos, len(points) - n_pos)
    draws = draws if draws is not None else resamples(tasks, bootstrap, seed)
    pooled, within = _measures(points)
    for key, fn in (("bootstrap", pooled), ("within_task_bootstrap", within)):
        values = [v for d in draws if (v := fn(d)) is not None]
        out[key] = interval(values, len(draws))
    return out


def score_table(
    scores: Mapping[str, Sequence[Point]],
    verifiers: Sequence[str],
    baselines: Sequence[str],
    bootstrap: int = 2000,
    seed: int = 0,
) -> dict:
    """Every score's auc_report on shared task draws, and each verifier's within-task and pooled
    AUC minus the best baseline's (best by the same measure on all tasks), paired over draws."""
    tasks = sorted({p[0] for pts in scores.values() for p in pts})
    draws = resamples(tasks, bootstrap, seed)
    table = {name: auc_report(pts, draws=draws) for name, pts in scores.items()}
    gains: dict = {}
    for measure, key in (("within_task_auc", 1), ("auc", 0)):
        have = [b for b in baselines if table.get(b, {}).get(measure) is not None]
        if not have:
            continue
        best = max(have, key=lambda b: table[b][measure])
        for v in verifiers:
            if table.get(v, {}).get(measure) is None:
                continue
            mine, theirs = _measures(scores[v])[key], _measures(scores[best])[key]
            diffs = [
                a - b for d in draws if (a := mine(d)) is not None and (b := theirs(d)) is not None
            ]
            gains.setdefault(v, {})[measure] = {
                "best_baseline": best,
                "gain": table[v][measure] - table[best][measure],
                "bootstrap": interval(diffs, len(draws)),
            }
    return {
        "scores": table,
        "gains": gains,
        "how": HOW + "; gain = verifier minus the best "
        "baseline by that measure, its interval from the same task draws (paired)",
    }
