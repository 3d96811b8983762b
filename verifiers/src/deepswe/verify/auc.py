"""The judge's ROC AUC on graded candidates, with two measures of its uncertainty.

AUC = P(score of a resolved candidate > score of an unresolved one), ties counted 1/2 (the
Mann-Whitney statistic), over every candidate of every task pooled.

- Hanley & McNeil (1982, Radiology 143:29) standard error: assumes independent candidates.
  Ours are not (a task's gold episodes are identical, its candidates share an issue), so it
  understates the spread; it is given because it is the usual one.
- A task-level (cluster) bootstrap: tasks resampled with replacement, AUC recomputed, the
  2.5/97.5 percentiles and the standard deviation reported; resamples with a single class are
  dropped and counted. This is the one to read.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

Point = tuple[str, float, bool]  # (instance_id, judge score, resolved)


def auc(points: Sequence[Point]) -> float | None:
    """Mann-Whitney AUC, ties 1/2; None without both classes."""
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


def hanley_mcneil_se(a: float, n_pos: int, n_neg: int) -> float:
    q1, q2 = a / (2 - a), 2 * a * a / (1 + a)
    var = (a * (1 - a) + (n_pos - 1) * (q1 - a * a) + (n_neg - 1) * (q2 - a * a)) / (n_pos * n_neg)
    return math.sqrt(max(var, 0.0))


def auc_report(points: Sequence[Point], bootstrap: int = 2000, seed: int = 0) -> dict:
    """AUC with its Hanley-McNeil SE and a task-level bootstrap interval, or why there is none."""
    n_pos = sum(1 for p in points if p[2])
    n_neg = len(points) - n_pos
    tasks = sorted({p[0] for p in points})
    out: dict = {"candidates": len(points), "positives": n_pos, "negatives": n_neg,
                 "tasks": len(tasks), "auc": auc(points)}  # fmt: skip
    if out["auc"] is None:
        out["why"] = "undefined: the scored candidates are all resolved or all unresolved"
        return out
    out["hanley_mcneil_se"] = hanley_mcneil_se(out["auc"], n_pos, n_neg)
    by_task = {t: [p for p in points if p[0] == t] for t in tasks}
    rng, values, single = random.Random(seed), [], 0
    for _ in range(bootstrap):
        sample = [p for t in rng.choices(tasks, k=len(tasks)) for p in by_task[t]]
        a = auc(sample)
        if a is None:
            single += 1
        else:
            values.append(a)
    if values:
        values.sort()
        mean = sum(values) / len(values)
        out["bootstrap"] = {
            "resamples": bootstrap, "single_class_dropped": single,
            "se": math.sqrt(sum((v - mean) ** 2 for v in values) / max(len(values) - 1, 1)),
            "ci95": [values[int(0.025 * (len(values) - 1))], values[int(0.975 * (len(values) - 1))]],
        }  # fmt: skip
    out["how"] = ("Mann-Whitney AUC over all scored test-split candidates (ties 1/2); "
                  "Hanley-McNeil SE assumes independent candidates; the task-level bootstrap "
                  "(tasks resampled) is the honest interval")  # fmt: skip
    return out
