"""`deepswe-verify score`: one verifier over every graded candidate of an eval run.

    deepswe-verify score --run runs/<ID> --verifier ef --judge-path runs/judge/merged
    deepswe-verify score --run runs/<ID> --verifier ef --judge-url http://h:8000/v1 \\
        --judge-model deepswe-verifier --judge-tokenizer Qwen/Qwen3-14B
    deepswe-verify score --run runs/<ID> --verifier regression
    deepswe-verify score --run runs/<ID> --verifier reproduction --writer scripted-standin

Verdicts go to <run>/verdicts/<verifier>/ (store.py); a rerun resumes. The tasks are the run
card's dataset, prepared as the eval run prepared them (SWE-bench environments included).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from deepswe.data.task import Task
from deepswe.eval.config import EvalConfig
from deepswe.verify.store import VerdictStore, candidates_from_run
from deepswe.verify.types import Verdict


class ScoreError(RuntimeError):
    """Bad input to `score`: the message names what to fix."""


def run_tasks(run_root: Path, ids: set[str]) -> dict[str, Task]:
    """The tasks `ids` of the run's dataset, prepared as `deepswe-eval run` prepared them."""
    from deepswe.data.datasets import load_tasks
    from deepswe.env.recipes.swebench.environment import needs_swebench_env, prepare_all

    card = run_root / "config.json"
    if not card.is_file():
        raise ScoreError(f"{card}: not an eval run folder (no run card)")
    cfg = EvalConfig.model_validate(json.loads(card.read_text())["eval"])
    tasks = [t for t in load_tasks(cfg.dataset) if t.instance_id in ids]
    if any(needs_swebench_env(t) for t in tasks):
        mirror = Path(cfg.repo_mirror) if cfg.repo_mirror else None
        tasks, _ = prepare_all(tasks, mode=cfg.swebench_env, mirror=mirror)
    return {t.instance_id: t for t in tasks}


def score_run(
    run_root: Path,
    verifier: str,
    *,
    judge=None,
    writer=None,
    workers: int = 2,
    budget: int | None = None,
    ef_format: str = "ours",
    log=print,
) -> dict[str, int]:
    """Score every graded candidate of the run with `verifier`; counts of verdict statuses."""
    pools = candidates_from_run(run_root)
    if not pools:
        raise ScoreError(f"{run_root}: no graded episodes to score")
    store = VerdictStore(run_root)
    if verifier == "ef":
        from deepswe.verify.ef.score import DEFAULT_BUDGETS, EF_FORMATS, score_candidates

        if judge is None:
            raise ScoreError("--verifier ef needs a judge: --judge-path or --judge-url")
        if ef_format not in EF_FORMATS:
            raise ScoreError(
                f"--judge-format must be one of {', '.join(EF_FORMATS)}, not {ef_format!r}"
            )
        tasks = run_tasks(run_root, set(pools))
        with_issues = candidates_from_run(run_root, tasks.values())
        score_candidates(
            [c for pool in with_issues.values() for c in pool],
            judge,
            store,
            budget=budget or DEFAULT_BUDGETS[ef_format],
            fmt=ef_format,  # type: ignore[arg-type]
            workers=workers,
            log=log,
        )
    elif verifier in ("regression", "reproduction"):
        from deepswe.verify.eb import (
            SandboxPlan,
            generate_tests,
            score_regression,
            score_reproduction,
        )

        tasks = run_tasks(run_root, set(pools))
        plan = SandboxPlan(workers=workers)
        if verifier == "regression":
            score_regression(pools, tasks, store, plan=plan, log=log)
        else:
            if writer is None:
                raise ScoreError("--verifier reproduction needs --writer")
            generate_tests(list(tasks.values()), store, writer, plan=plan, log=log)
            score_reproduction(pools, tasks, store, plan=plan, log=log)
    else:
        raise ScoreError(f"--verifier {verifier!r}: one of ef, regression, reproduction")
    return status_counts(store.load(verifier).values())


def status_counts(verdicts: Iterable[Verdict]) -> dict[str, int]:
    return dict(sorted(Counter(v.status.value for v in verdicts).items()))
