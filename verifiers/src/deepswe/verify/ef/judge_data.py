"""Judge SFT data from graded episodes: one chat per row (system, user, assistant target).

DeepSWE's recipe (issue 11, after R2E-Gym's verifier data): label YES iff the grader resolved
the candidate (reward 1); from each task with both outcomes one positive and one negative, so
the judge cannot win by the base rate; tasks with one outcome only add one row each, at most
`single_outcome_cap` of them (ours: 50; the reference states no number). Choices are seeded per
task, so a task's rows do not change when other tasks are added.

Only train-split tasks are used: a judge fitted on test tasks would inflate every selection
curve measured on them. A pool with any task whose split is not "train" is refused, naming it.

Rows are written as JSON lines; deepswe-train judge reads them (training imports verify, never
the reverse).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from deepswe.data.task import Task
from deepswe.verify.ef.render import (
    Messages,
    RenderStatus,
    TokenCounter,
    judge_steps,
    judge_target,
    render_prompt,
    task_text,
)
from deepswe.verify.store import candidates_from_run
from deepswe.verify.types import Candidate

SINGLE_OUTCOME_CAP = 50


class JudgeRow(BaseModel):
    """One training chat: `messages` = system, user, assistant target."""

    model_config = ConfigDict(extra="forbid")

    instance_id: str
    run: int
    label: Literal["YES", "NO"]
    messages: Messages
    prompt_tokens: int
    condensed: int


def task_splits(dataset: str, tasks: Sequence[Task] | None = None) -> dict[str, str | None]:
    """instance_id -> split for the tasks of a dataset name or file: a name's `:split` suffix,
    else each task's metadata["split"] (swe-mini rows carry one), else None (unknown)."""
    from deepswe.data.datasets import load_tasks

    named = dataset.partition(":")[2] or None
    tasks = load_tasks(dataset) if tasks is None else tasks
    return {t.instance_id: named or t.metadata.get("split") for t in tasks}


def check_train_only(pools: Mapping[str, Sequence[Candidate]], splits: Mapping[str, str | None]):
    wrong = sorted(i for i in pools if splits.get(i) != "train")
    if wrong:
        shown = ", ".join(f"{i} ({splits.get(i) or 'split unknown'})" for i in wrong[:5])
        more = f" and {len(wrong) - 5} more" if len(wrong) > 5 else ""
        raise ValueError(
            f"judge data must come from train-split tasks only; {len(wrong)} are not: "
            f"{shown}{more}. Build it from an eval run over a train split (e.g. swe-mini:train)."
        )


def pick(pools: Mapping[str, Sequence[Candidate]], cap: int, seed: int) -> list[Candidate]:
    """One positive and one negative per mixed task; one candidate of at most `cap`
    single-outcome tasks."""
    mixed, single = [], []
    for iid in sorted(pools):
        graded = [c for c in pools[iid] if c.resolved is not None]
        rng = random.Random(f"{seed}:{iid}")
        pos, neg = [c for c in graded if c.resolved], [c for c in graded if not c.resolved]
        if pos and neg:
            mixed += [rng.choice(pos), rng.choice(neg)]
        elif graded:
            single.append(rng.choice(graded))
    random.Random(seed).shuffle(single)
    return mixed + sorted(single[:cap], key=lambda c: c.instance_id)


def build_judge_rows(
    pools: Mapping[str, Sequence[Candidate]],
    splits: Mapping[str, str | None],
    count: TokenCounter,
    budget: int,
    *,
    single_outcome_cap: int = SINGLE_OUTCOME_CAP,
    seed: int = 0,
    log: Callable[[str], None] = print,
) -> list[JudgeRow]:
    """The judge's training rows from graded candidate pools (train-split tasks only)."""
    check_train_only(pools, splits)
    rows, too_long = [], 0
    for c in pick(pools, single_outcome_cap, seed):
        steps = judge_steps(c.trajectory) if c.trajectory is not None else []
        problem = task_text(c.problem_statement, c.trajectory)
        prompt = render_prompt(problem, steps, c.patch, count, budget)
        if prompt.status is RenderStatus.TOO_LONG:
            too_long += 1
            continue
        target = judge_target(bool(c.resolved))
        rows.append(
            JudgeRow(
                instance_id=c.instance_id,
                run=c.run,
                label="YES" if c.resolved else "NO",
                messages=[*prompt.messages, target],
                prompt_tokens=prompt.tokens,
                condensed=prompt.condensed,
            )
        )
    yes = sum(r.label == "YES" for r in rows)
    log(
        f"judge data: {len(rows)} rows ({yes} YES, {len(rows) - yes} NO) from {len(pools)} tasks; "
        f"{too_long} over the {budget}-token budget left out"
    )
    return rows


def judge_data_from_run(
    run_root: Path | str,
    out: Path | str,
    count: TokenCounter,
    budget: int,
    *,
    single_outcome_cap: int = SINGLE_OUTCOME_CAP,
    seed: int = 0,
    log: Callable[[str], None] = print,
) -> list[JudgeRow]:
    """Judge data from an eval run's graded episodes (its run card names the dataset, whose
    splits are checked), written to `out` as JSON lines."""
    from deepswe.data.datasets import load_tasks
    from deepswe.eval.card import read_card
    from deepswe.eval.store import RunStore

    dataset = read_card(RunStore(run_root)).dataset
    tasks = load_tasks(dataset)
    splits, issues = (
        task_splits(dataset, tasks),
        {t.instance_id: t.problem_statement for t in tasks},
    )
    pools = {  # eval episodes carry no problem statement: the task's is the judge's issue
        iid: [c.model_copy(update={"problem_statement": issues.get(iid, "")}) for c in pool]
        for iid, pool in candidates_from_run(run_root).items()
    }
    rows = build_judge_rows(
        pools, splits, count, budget, single_outcome_cap=single_outcome_cap, seed=seed, log=log
    )
    write_rows(rows, out)
    return rows


def write_rows(rows: Sequence[JudgeRow], path: Path | str) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(json.dumps(r.model_dump(mode="json")) + "\n" for r in rows))
    tmp.replace(path)  # whole file or none
    return path


def read_rows(path: Path | str) -> list[JudgeRow]:
    """Rows of a judge-data file; a bad line is named by file and line number."""
    rows = []
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        if line.strip():
            try:
                rows.append(JudgeRow.model_validate_json(line))
            except ValueError as e:
                raise ValueError(f"{path}:{n}: not a judge-data row: {e}") from None
    return rows
