"""Scoring candidates with the execution-free judge, into the verdict store.

    judge = make_judge(path=...) or make_judge(endpoint=...)   # LocalJudge or EndpointJudge (HTTP)
    score_candidates(candidates, judge, VerdictStore(run_root), budget=DEFAULT_BUDGETS[fmt], fmt=fmt)

Each candidate is rendered in the judge's prompt format (condensed to the budget), judged, and
stored as one Verdict "ef" the moment it is done; a resumed call skips `store.done("ef")`
(UNREACHABLE is not done: asked again). Formats: "ours" (render.py, the judges we train) and
"r2e-gym" (r2e_input.py: R2E-Gym's verifier input, what DeepSWE's published verifier was
trained on). Work runs on a thread pool and every verdict is built from its own candidate, so
scores cannot land on the wrong candidate. The reference zipped scores back onto trajectories in
completion order, which pairs them wrongly whenever requests finish out of order (issue 11).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Literal, Protocol

from deepswe.verify.ef.answer import Judgement
from deepswe.verify.ef.endpoint import EndpointJudgeConfig
from deepswe.verify.ef.r2e_input import from_trajectory, render_r2e
from deepswe.verify.ef.render import (
    JudgePrompt,
    Messages,
    RenderStatus,
    judge_steps,
    render_prompt,
    task_text,
)
from deepswe.verify.store import VerdictStore
from deepswe.verify.types import Candidate, Verdict, VerdictStatus

# R2E-Gym trains its 14B verifier with cutoff_len 32768 (train/train_r2egym_14B_verifier.yaml);
# 16 tokens of it are kept for the reply.
DEFAULT_BUDGET = 32768 - 16
EFFormat = Literal["ours", "r2e-gym"]
EF_FORMATS: tuple[EFFormat, ...] = ("ours", "r2e-gym")
# Each format's budget: ours, the whole chat's tokens; r2e-gym, R2E-Gym's max_tokens (the
# default of traj2verifier_data and run_ef_verifier.py), condensing the user text above
# max_tokens - system and target tokens - 500.
DEFAULT_BUDGETS: dict[str, int] = {"ours": DEFAULT_BUDGET, "r2e-gym": 65536}


class JudgeTokens(Protocol):
    """A judge's token counts (deepswe.verify.ef.tokens.ChatTokens)."""

    def __call__(self, messages: Messages) -> int: ...

    def count_text(self, text: str, add_special_tokens: bool = True) -> int: ...


class Judge(Protocol):
    name: str
    count_tokens: JudgeTokens

    def judge(self, messages: Messages) -> Judgement: ...


def make_judge(
    path: str | Path | None = None, endpoint: EndpointJudgeConfig | None = None
) -> Judge:
    """The one judge factory: a LocalJudge on the HF folder `path` (a merged LoRA), or an
    EndpointJudge on a served model. ValueError unless exactly one is given."""
    if (path is None) == (endpoint is None):
        raise ValueError("a judge is a model folder (path) or a served model (endpoint): give one")
    if endpoint is not None:
        from deepswe.verify.ef.endpoint import EndpointJudge

        return EndpointJudge(endpoint)
    from deepswe.verify.ef.local import LocalJudge

    return LocalJudge(path)


def candidate_prompt(candidate: Candidate, judge: Judge, budget: int, fmt: EFFormat) -> JudgePrompt:
    """The judge's chat for one candidate in format `fmt`, condensed to `budget`."""
    traj = candidate.trajectory
    problem = task_text(candidate.problem_statement, traj)
    if fmt == "r2e-gym":
        r2e = from_trajectory(problem, traj, candidate.patch)
        return render_r2e(r2e, judge.count_tokens.count_text, budget)
    steps = judge_steps(traj) if traj is not None else []
    return render_prompt(problem, steps, candidate.patch, judge.count_tokens, budget)


def judge_candidate(
    candidate: Candidate, judge: Judge, budget: int, fmt: EFFormat = "ours"
) -> Verdict:
    """One candidate's EF verdict: render, condense to `budget` tokens, judge. Ours refuses a
    prompt still too long; R2E-Gym's format sends it, as R2E-Gym does (the server may refuse)."""
    t0 = time.monotonic()
    prompt = candidate_prompt(candidate, judge, budget, fmt)
    facts = {
        "prompt_tokens": prompt.tokens,
        "condensed": prompt.condensed,
        "judge": judge.name,
        "format": fmt,
    }
    if prompt.status is RenderStatus.TOO_LONG and fmt == "ours":
        j = Judgement(
            VerdictStatus.ERROR,
            detail=f"too_long: {prompt.tokens} tokens > budget {budget} with every thought "
            "but the first condensed",
        )
    else:
        j = judge.judge(prompt.messages)
    return Verdict(
        verifier="ef",
        instance_id=candidate.instance_id,
        run=candidate.run,
        status=j.status,
        score=j.score,
        detail=j.detail,
        seconds=time.monotonic() - t0,
        extra={**facts, **j.extra, "render": prompt.status.value},
    )


def score_candidates(
    candidates: Sequence[Candidate],
    judge: Judge,
    store: VerdictStore,
    *,
    budget: int = DEFAULT_BUDGET,
    fmt: EFFormat = "ours",
    workers: int = 4,
    log: Callable[[str], None] = print,
) -> list[Verdict]:
    """Judge every candidate not yet done in `store`, `workers` at a time, saving each verdict
    as it completes; returns the new verdicts in the candidates' order."""
    done = store.done("ef")
    todo = [c for c in candidates if (c.instance_id, c.run) not in done]
    log(
        f"ef: {len(todo)} to judge, {len(candidates) - len(todo)} already done ({judge.name}, "
        f"{fmt} format)"
    )
    out: dict[tuple[str, int], Verdict] = {}
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(judge_candidate, c, judge, budget, fmt): c for c in todo}
        for n, fut in enumerate(as_completed(futures), 1):
            c, v = futures[fut], fut.result()
            store.save(v)
            out[(c.instance_id, c.run)] = v
            shown = f"{v.score:.3f}" if v.score is not None else f"{v.status.value} {v.detail[:80]}"
            log(f"ef {n}/{len(todo)} {c.instance_id} run {c.run}: {shown} ({v.seconds:.1f}s)")
    return [out[(c.instance_id, c.run)] for c in todo]
