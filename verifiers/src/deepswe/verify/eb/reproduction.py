"""Reproduction runs: each candidate against every kept reproduction test of its task.

    fresh sandbox per (patch, test) -> the patch applied as grading applies it
    -> test_issue.py written over whatever the patch left at that path -> `python test_issue.py`
    test score = 1 iff a line of its output is exactly "Issue resolved" (whitespace around it
    aside), else 0; reproduction score = sum over the task's kept tests

R2E-Gym's `reproduction_test_scores` sum per-test results in the same way (its DeepSWE TTS
reproduction notes), but a test counted whenever the output contained the substring "resolved"
anywhere, so "Issue resolved? No" or "unresolved" scored too. Here only the whole line counts.

Outcomes:
- SCORED: the sum; a patch that does not apply scores 0 on every test (detail and
  `extra.apply_failed` say so), as in the regression verifier. A test that times out scores 0.
- NOT_APPLICABLE: no test of the task was kept (none written, none reproducing the issue).
- UNREACHABLE: image, sandbox or engine failed; a resume retries.

Runs are cached on disk by (task, patch sha256, test sha256): identical patches run once.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

from deepswe.data.task import Task
from deepswe.env.episode import INFRA_EXCEPTIONS
from deepswe.verify.eb.common import (
    JsonCache,
    Log,
    SandboxPlan,
    apply_patch,
    ensure_images,
    fresh_sandbox,
    patch_sha,
    run_pool,
)
from deepswe.verify.eb.testgen import (
    RESOLVED,
    IssueTest,
    IssueTestStatus,
    load_tests,
    output_lines,
    run_issue_test,
)
from deepswe.verify.store import VerdictStore
from deepswe.verify.types import Candidate, Verdict, VerdictStatus

VERIFIER = "reproduction"


def says_resolved(output: str) -> bool:
    """A test says the issue is resolved: one of its output lines is exactly RESOLVED."""
    return RESOLVED in output_lines(output)


def run_one(image: str, patch: str, test: IssueTest, plan: SandboxPlan) -> dict:
    """One (patch, test) run: {"applied", "resolved", "timed_out", "tail", "seconds"}."""
    started = time.monotonic()
    with fresh_sandbox(image, plan) as sandbox:
        applied, _ = apply_patch(sandbox, patch)
        r = run_issue_test(sandbox, test.source) if applied else None
    return {
        "applied": applied,
        "resolved": bool(r is not None and not r.timed_out and says_resolved(r.stdout)),
        "timed_out": bool(r is not None and r.timed_out),
        "tail": r.stdout[-500:] if r is not None else "",
        "seconds": time.monotonic() - started,
    }


def _verdict(c: Candidate, results: list[dict], tests: list[IssueTest]) -> Verdict:
    seconds = sum(r["seconds"] for r in results)
    base = {"verifier": VERIFIER, "instance_id": c.instance_id, "run": c.run, "seconds": seconds}
    if not all(r["applied"] for r in results):
        return Verdict(
            **base,
            status=VerdictStatus.SCORED,
            score=0.0,
            detail="the patch did not apply",
            extra={"apply_failed": True},
        )
    per_test = [int(r["resolved"]) for r in results]
    return Verdict(
        **base,
        status=VerdictStatus.SCORED,
        score=float(sum(per_test)),
        detail=f"{sum(per_test)}/{len(tests)} kept tests print {RESOLVED!r}",
        extra={
            "per_test": per_test,
            "tests": [t.index for t in tests],
            "patch_sha": patch_sha(c.patch)[:12],
        },
    )


def score_reproduction(
    pools: dict[str, list[Candidate]],
    tasks: dict[str, Task],
    store: VerdictStore,
    *,
    plan: SandboxPlan | None = None,
    log: Log = print,
) -> dict[tuple[str, int], Verdict]:
    """Reproduction verdicts for every candidate not yet done in `store`, saved as they finish.

    The tests are those `generate_tests` stored beside the same store; a pool whose task has
    no stored tests is refused (ValueError) rather than scored NOT_APPLICABLE by omission.
    """
    plan = plan or SandboxPlan()
    done = store.done(VERIFIER)
    todo = [c for pool in pools.values() for c in pool if (c.instance_id, c.run) not in done]
    ids = sorted({c.instance_id for c in todo})
    if missing := [i for i in ids if i not in tasks]:
        raise ValueError(f"reproduction: no Task for {len(missing)} pools, e.g. {missing[:3]}")
    stored = {i: load_tests(store, tasks[i]) for i in ids}
    if unwritten := [i for i, t in stored.items() if t is None]:
        raise ValueError(
            f"reproduction: no tests written for {len(unwritten)} tasks (run generate_tests "
            f"first), e.g. {unwritten[:3]}"
        )
    kept = {i: [t for t in stored[i] or [] if t.status is IssueTestStatus.KEPT] for i in ids}
    cache = JsonCache(Path(store.root).parent / "eb" / VERIFIER)
    out: dict[tuple[str, int], Verdict] = {}

    def save(v: Verdict) -> None:
        store.save(v)
        out[(v.instance_id, v.run)] = v

    for c in todo:
        if not kept[c.instance_id]:
            why = "; ".join(sorted({t.reason for t in stored[c.instance_id] or []}))
            save(
                Verdict(
                    verifier=VERIFIER,
                    instance_id=c.instance_id,
                    run=c.run,
                    status=VerdictStatus.NOT_APPLICABLE,
                    detail=f"no kept reproduction test ({why or 'none written'})",
                )
            )
    todo = [c for c in todo if kept[c.instance_id]]
    images = ensure_images([tasks[i] for i in ids if kept[i]], log)
    jobs: dict[tuple[str, str], list[Candidate]] = {}
    for c in todo:
        jobs.setdefault((c.instance_id, patch_sha(c.patch)), []).append(c)

    def job(key: tuple[str, str]) -> None:
        i, group = key[0], jobs[key]
        task, image, tests = tasks[i], images[i], kept[i]
        if not isinstance(image, str):
            for c in group:
                save(
                    Verdict(
                        verifier=VERIFIER,
                        instance_id=i,
                        run=c.run,
                        status=VerdictStatus.UNREACHABLE,
                        detail=f"no image: {image}",
                    )
                )
            return
        results = []
        for t in tests:
            ckey = f"{key[1]}-{hashlib.sha256(t.source.encode()).hexdigest()[:16]}"
            hit = cache.get(task, ckey)
            if hit is None:
                try:
                    hit = run_one(image, group[0].patch, t, plan)
                except INFRA_EXCEPTIONS as exc:
                    for c in group:
                        save(
                            Verdict(
                                verifier=VERIFIER,
                                instance_id=i,
                                run=c.run,
                                status=VerdictStatus.UNREACHABLE,
                                detail=f"{type(exc).__name__}: {exc}",
                            )
                        )
                    return
                cache.put(task, ckey, hit)
            results.append(hit)
            if not hit["applied"]:  # no test can run on a patch that does not apply
                break
        for c in group:
            save(_verdict(c, results, tests))

    run_pool(list(jobs), job, plan.workers, log, "reproduction runs")
    return out
