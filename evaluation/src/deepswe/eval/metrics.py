"""Metrics of a run folder: resolved rates, Pass@1 (mean and spread over runs), unbiased pass@k,
Best@k, per-repository rates, endings, steps, tokens and time.

Conventions (each number in metrics.json carries a `how` saying the same):
- the denominator of every rate is the number of tasks, as in SWE-bench's leaderboard: an
  infra error or unsupported environment is not resolved, but it is counted as what it is
  (`counts`), never as unresolved;
- pass@k uses n = runs per task and c = resolved runs of that task.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict

from deepswe.eval.estimators import best_at_k, pass_at_k
from deepswe.eval.store import EpisodeRecord, EpisodeStatus


def _dist(values: list[float]) -> dict:
    if not values:
        return {"n": 0}
    s = sorted(values)
    q = statistics.quantiles(s, n=10, method="inclusive") if len(s) > 1 else [s[0]] * 9
    return {
        "n": len(s),
        "min": s[0],
        "median": statistics.median(s),
        "mean": statistics.fmean(s),
        "p90": q[8],
        "max": s[-1],
    }


def compute_metrics(records: list[EpisodeRecord], instance_ids: list[str], runs: int) -> dict:
    """Everything the report shows, from the stored records alone."""
    ids = list(instance_ids)
    by_task: dict[str, list[EpisodeRecord]] = defaultdict(list)
    for r in records:
        if r.instance_id in set(ids):
            by_task[r.instance_id].append(r)
    n_tasks = len(ids)
    expected = n_tasks * runs
    stored = sum(len(v) for v in by_task.values())
    counts = Counter(
        (r.outcome.value if r.status is EpisodeStatus.GRADED and r.outcome else r.status.value)
        for v in by_task.values()
        for r in v
    )
    per_run = []
    for k in range(runs):
        res = sum(1 for t in ids for r in by_task[t] if r.run == k and r.resolved)
        per_run.append(res / n_tasks if n_tasks else 0.0)
    unsupported = {
        t for t in ids if any(r.status is EpisodeStatus.UNSUPPORTED_ENV for r in by_task[t])
    }
    n_supported = n_tasks - len(unsupported)
    per_run_supported = (
        [
            sum(
                1
                for t in ids
                if t not in unsupported
                for r in by_task[t]
                if r.run == k and r.resolved
            )
            / n_supported
            for k in range(runs)
        ]
        if n_supported
        else []
    )
    not_graded = sorted(
        {
            (r.instance_id, r.status.value, r.reason.splitlines()[0] if r.reason else "")
            for v in by_task.values()
            for r in v
            if r.status is not EpisodeStatus.GRADED
        }
    )
    complete = stored == expected
    ks = list(range(1, runs + 1))
    pak = {}
    if complete and n_tasks:
        for k in ks:
            pak[str(k)] = statistics.fmean(
                pass_at_k(runs, sum(r.resolved for r in by_task[t]), k) for t in ids
            )
    best = None
    if (
        complete
        and n_tasks
        and all(r.verifier_score is not None for v in by_task.values() for r in v)
    ):
        best = {
            str(k): statistics.fmean(
                best_at_k([(r.verifier_score, r.resolved) for r in by_task[t]], k) for t in ids
            )
            for k in ks
        }
    repos: dict[str, list[EpisodeRecord]] = defaultdict(list)
    for v in by_task.values():
        for r in v:
            repos[r.repo].append(r)
    trajs = [r.trajectory for v in by_task.values() for r in v if r.trajectory]
    endings = Counter(t.ending.value for t in trajs)
    wall = [r.finished_at - r.started_at for v in by_task.values() for r in v if r.trajectory]
    started = [r.started_at for v in by_task.values() for r in v]
    finished = [r.finished_at for v in by_task.values() for r in v]
    grades = [t.grade for t in trajs if t.grade is not None]
    touching = [g for g in grades if g.test_infra]
    gated = {
        tier: [g for g in grades if any(f.tier == tier for f in g.static_gate)] for tier in (1, 2)
    }
    return {
        "tasks": n_tasks,
        "runs": runs,
        "episodes_expected": expected,
        "episodes_stored": stored,
        "complete": complete,
        "counts": dict(sorted(counts.items())),
        "counts_how": "stored episodes by grader outcome; infra_error (after retries) and "
        "unsupported_env are their own rows; the rows add up to episodes_stored",
        "resolved_rate_per_run": per_run,
        "resolved_rate_how": "resolved tasks of run k / all tasks (errors count as not resolved)",
        "pass@1_mean": statistics.fmean(per_run) if per_run else 0.0,
        "pass@1_std": statistics.stdev(per_run) if len(per_run) > 1 else 0.0,
        "pass@1_how": "mean over runs of the per-run resolved rate; std = sample std (n-1) over runs",
        "supported_tasks": n_supported,
        "pass@1_supported_mean": statistics.fmean(per_run_supported) if per_run_supported else None,
        "pass@1_supported_how": "as pass@1, over the tasks an environment serves (unsupported_env left out)",
        "not_graded": [
            {"instance_id": i, "status": st, "reason": why} for i, st, why in not_graded
        ],
        "pass@k": pak,
        "pass@k_how": "unbiased estimator 1 - C(n-c,k)/C(n,k) per task (Chen et al. 2021), "
        "n = runs, c = resolved runs, averaged over tasks; empty until every episode is stored",
        "best@k": best,
        "best@k_how": "expected resolved share of the verifier's top-scored run among k random "
        "runs; null when episodes carry no verifier score",
        "per_repo": {
            repo: {
                "tasks": len({r.instance_id for r in rs}),
                "episodes": len(rs),
                "resolved": sum(r.resolved for r in rs),
                "resolved_rate": sum(r.resolved for r in rs) / len(rs),
            }
            for repo, rs in sorted(repos.items())
        },
        "per_repo_how": "resolved episodes / stored episodes of the repository, all runs pooled",
        "endings": dict(sorted(endings.items())),
        "endings_how": "why the agent loop stopped, over episodes that ran (not unsupported_env)",
        "steps": _dist([len(t.steps) for t in trajs]),
        "prompt_tokens": _dist([t.prompt_tokens for t in trajs]),
        "completion_tokens": _dist([t.completion_tokens for t in trajs]),
        "tokens_how": "per episode, summed over its model calls as the server reported them "
        "(0 for scripted policies)",
        "episode_seconds": _dist(wall),
        "episode_seconds_how": "wall-clock seconds per stored episode, retries and grading included",
        "grade_seconds": _dist([t.grade_seconds for t in trajs]),
        "grading_rules": dict(sorted(Counter(g.rules for g in grades).items())),
        "test_infra": {
            "episodes": len(touching),
            "resolved": sum(g.resolved for g in touching),
            "restored": sum(any(c.restored for c in g.test_infra) for g in touching),
            "why": dict(sorted(Counter(c.why for g in touching for c in g.test_infra).items())),
        },
        "test_infra_how": "graded episodes whose patch changed test infrastructure (conftest.py, "
        "pytest configuration, interpreter start-up files, package metadata, a module shadowing "
        "an installed one; the gold patch's own files aside); restored = put back before the "
        "tests ran (strict rules), else graded as the patch left it and only flagged",
        "static_gate": {
            f"tier{tier}": {
                "episodes": len(gs),
                "resolved": sum(g.resolved for g in gs),
                "rules": dict(
                    sorted(
                        Counter(f.rule for g in gs for f in g.static_gate if f.tier == tier).items()
                    )
                ),
            }
            for tier, gs in gated.items()
        },
        "static_gate_how": "graded episodes whose patch adds, to any file but the graded ones, a line "
        "that reaches "
        "for the test machinery (tier 1: never resolved under strict rules unless the task's gold "
        "does the same) or looks like it (tier 2: flagged only); episodes the grader found "
        "tampering with the test run are counts['tampered']",
        "run_wall_seconds": (max(finished) - min(started)) if started else 0.0,
        "run_wall_how": "last episode end - first episode start (resumes included, gaps too)",
    }
