"""Regression runs: how many of the repository's tests that pass at the base commit still pass
with a candidate's patch.

    base run    fresh sandbox, no patch, the task's test command, per-test statuses (its parser)
    candidate   fresh sandbox, the patch applied as grading applies it, test files restored,
                the same command; score = base-passing tests that are PASSED again

R2E-Gym's `regression_pass_count` (src/r2egym/agenthub/trajectory/trajectory.py) counts the
tests a log parser reads as PASSED in the output of a regression script run on the candidate;
we count PASSED the same way (not XFAIL), restricted to the tests that pass at the base commit,
so a test broken before the agent came cannot move the score. The hidden test patch is never
applied: the regression verifier sees only tests the repository already has.

A candidate cannot rewrite the tests it is scored by: before the command runs, every graded
path (`deepswe.env.hidden_tests.graded_paths`) and every file holding a base-passing test (pytest ids
`path.py::name`) is put back from the start snapshot, as the reward run restores graded files.

Outcomes:
- SCORED: the count; a patch that does not apply scores 0 (detail and `extra.apply_failed`
  say so). It is the candidate's fault and selection needs a number: such a patch cannot be
  the fix. A test run that times out is scored from what its log holds.
- UNREACHABLE: image, sandbox or engine failed (base run or candidate run); a resume retries.
- ERROR: the base run itself timed out (the task's command cannot give a baseline).
- NOT_APPLICABLE: no test passes at the base commit (e.g. R2E-Gym tasks, whose tests are
  all hidden files), or the task has no test command.

Runs are cached on disk by (task, sha256 of the patch): identical patches run once, and a
resumed scorer reuses every finished run. Infrastructure failures are never cached.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from deepswe.data.task import HiddenTests, Task
from deepswe.env.episode import INFRA_EXCEPTIONS
from deepswe.env.grading import TestStatus, get_parser
from deepswe.env.hidden_tests import graded_paths, hidden_tests_script, write_restore_list
from deepswe.verify.eb.common import (
    WORKDIR,
    JsonCache,
    Log,
    SandboxPlan,
    apply_patch,
    ensure_images,
    fresh_sandbox,
    patch_sha,
    run_pool,
)
from deepswe.verify.store import VerdictStore
from deepswe.verify.types import Candidate, Verdict, VerdictStatus

VERIFIER = "regression"
BASE_KEY = "base"


@dataclass
class TestRun:
    """One run of a task's test command: per-test statuses, or the infra failure that ended it."""

    __test__ = False

    statuses: dict[str, str] = field(default_factory=dict)
    applied: bool = True
    timed_out: bool = False
    seconds: float = 0.0
    cached: bool = False
    infra: str = ""


def restored_paths(task: Task, base_passing: set[str]) -> list[str]:
    """Files put back from the start snapshot before a candidate's tests run."""
    files = {t.split("::", 1)[0] for t in base_passing if "::" in t}
    return sorted(set(graded_paths(task)) | {f for f in files if f.endswith(".py")})


def _graded_only(task: Task, paths: list[str]) -> Task:
    # The reward run's own restore, without its test patch: graded files only.
    return task.model_copy(update={"hidden": HiddenTests(graded_files=paths)})


def _restore_script(task: Task, paths: list[str]) -> str:
    return hidden_tests_script(_graded_only(task, paths))


def run_tests(task: Task, image: str, patch: str, restore: list[str], plan: SandboxPlan) -> TestRun:
    """The task's test command in a fresh sandbox with `patch` applied and `restore` put back."""
    started = time.monotonic()
    try:
        with fresh_sandbox(image, plan) as sandbox:
            applied, _ = apply_patch(sandbox, patch)
            if not applied:
                return TestRun(applied=False, seconds=time.monotonic() - started)
            script = _restore_script(task, restore) if patch.strip() else ""
            if script:
                write_restore_list(sandbox, _graded_only(task, restore))  # what it reads
                r = sandbox.run(script, cwd=WORKDIR, timeout=120)
                if r.exit_code != 0:
                    return TestRun(infra=f"restoring test files failed: {r.output[-300:]}")
            spec = task.test_spec
            r = sandbox.run(f"{spec.command} 2>&1", cwd=WORKDIR, timeout=spec.timeout_s)
    except INFRA_EXCEPTIONS as exc:
        return TestRun(infra=f"{type(exc).__name__}: {exc}", seconds=time.monotonic() - started)
    statuses = get_parser(spec.log_parser)(r.stdout, task)
    return TestRun(
        statuses={k: TestStatus(v).value for k, v in statuses.items()},
        timed_out=r.timed_out,
        seconds=time.monotonic() - started,
    )


def cached_run(
    cache: JsonCache, task: Task, image: str, patch: str, restore: list[str], plan: SandboxPlan
) -> TestRun:
    """`run_tests` through the cache: the base run under BASE_KEY, candidates under their sha."""
    key = patch_sha(patch) if patch.strip() else BASE_KEY
    hit = cache.get(task, key)
    if hit is not None:
        return TestRun(
            **{k: hit[k] for k in ("statuses", "applied", "timed_out", "seconds")}, cached=True
        )
    run = run_tests(task, image, patch, restore, plan)
    if not run.infra:
        cache.put(
            task, key, {k: getattr(run, k) for k in ("statuses", "applied", "timed_out", "seconds")}
        )
    return run


def passing(run: TestRun) -> set[str]:
    return {t for t, s in run.statuses.items() if s == TestStatus.PASSED.value}


def verdict(c: Candidate, base: TestRun | None, run: TestRun | None, why: str = "") -> Verdict:
    """The regression verdict on `c` from its task's base run and its own run."""

    def v(status: VerdictStatus, detail: str, score: float | None = None, **extra) -> Verdict:
        seconds = run.seconds if run is not None else 0.0
        return Verdict(
            verifier=VERIFIER,
            instance_id=c.instance_id,
            run=c.run,
            status=status,
            score=score,
            detail=detail,
            seconds=seconds,
            extra=extra,
        )

    if base is None or run is None:
        return v(VerdictStatus.UNREACHABLE, why)
    if base.infra:
        return v(VerdictStatus.UNREACHABLE, f"base run: {base.infra}")
    if base.timed_out:
        return v(VerdictStatus.ERROR, "the test command timed out at the base commit")
    wanted = passing(base)
    if not wanted:
        return v(VerdictStatus.NOT_APPLICABLE, "no test passes at the base commit")
    if run.infra:
        return v(VerdictStatus.UNREACHABLE, run.infra)
    sha = patch_sha(c.patch)[:12]
    if not run.applied:
        return v(
            VerdictStatus.SCORED,
            "the patch did not apply",
            0.0,
            apply_failed=True,
            base_passing=len(wanted),
            patch_sha=sha,
            cached=run.cached,
        )
    kept = wanted & passing(run)
    broken = sorted(wanted - kept)
    detail = f"{len(kept)}/{len(wanted)} tests passing at base still pass"
    if run.timed_out:
        detail += " (the test run timed out)"
    return v(
        VerdictStatus.SCORED,
        detail,
        float(len(kept)),
        base_passing=len(wanted),
        broken=broken[:20],
        patch_sha=sha,
        cached=run.cached,
    )


def score_regression(
    pools: dict[str, list[Candidate]],
    tasks: dict[str, Task],
    store: VerdictStore,
    *,
    plan: SandboxPlan | None = None,
    log: Log = print,
) -> dict[tuple[str, int], Verdict]:
    """Regression verdicts for every candidate not yet done in `store`, saved as they finish.

    `tasks` maps instance_id -> Task with its test command filled in (SWE-bench tasks prepared
    by deepswe.env.recipes.swebench.environment). Returns the verdicts written by this call.
    """
    plan = plan or SandboxPlan()
    done = store.done(VERIFIER)
    todo = [c for pool in pools.values() for c in pool if (c.instance_id, c.run) not in done]
    missing = sorted({c.instance_id for c in todo} - set(tasks))
    if missing:
        raise ValueError(f"regression: no Task for {len(missing)} pools, e.g. {missing[:3]}")
    cache = JsonCache(Path(store.root).parent / "eb" / VERIFIER)
    out: dict[tuple[str, int], Verdict] = {}

    def save(v: Verdict) -> None:
        store.save(v)
        out[(v.instance_id, v.run)] = v

    ids = sorted({c.instance_id for c in todo})
    no_cmd = {i for i in ids if not tasks[i].test_spec.command.strip()}
    for c in todo:
        if c.instance_id in no_cmd:
            save(
                Verdict(
                    verifier=VERIFIER,
                    instance_id=c.instance_id,
                    run=c.run,
                    status=VerdictStatus.NOT_APPLICABLE,
                    detail="the task has no test command",
                )
            )
    todo = [c for c in todo if c.instance_id not in no_cmd]
    images = ensure_images([tasks[i] for i in ids if i not in no_cmd], log)
    ready = [i for i in images if isinstance(images[i], str)]

    def base_job(i: str) -> TestRun:
        return cached_run(cache, tasks[i], str(images[i]), "", [], plan)

    base = dict(run_pool(ready, base_job, plan.workers, log, "regression base runs"))
    jobs: dict[tuple[str, str], list[Candidate]] = {}
    for c in todo:
        if c.instance_id not in base:
            save(verdict(c, None, None, f"no image: {images[c.instance_id]}"))
        elif (
            base[c.instance_id].infra
            or base[c.instance_id].timed_out
            or not passing(base[c.instance_id])
        ):
            save(verdict(c, base[c.instance_id], base[c.instance_id]))
        else:
            jobs.setdefault((c.instance_id, patch_sha(c.patch)), []).append(c)

    def cand_job(key: tuple[str, str]) -> TestRun:
        i, group = key[0], jobs[key]
        b = base[i]
        run = cached_run(
            cache,
            tasks[i],
            str(images[i]),
            group[0].patch,
            restored_paths(tasks[i], passing(b)),
            plan,
        )
        for c in group:
            save(verdict(c, b, run))
        return run

    run_pool(list(jobs), cand_job, plan.workers, log, "regression candidate runs")
    return out
