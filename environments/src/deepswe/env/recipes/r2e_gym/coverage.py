"""Which R2E-Gym rows this machine can build from source, by repository, and why the others not.

One line per repository of the rows at hand (a local file or folder of rows, or the Hub
dataset): its rows, the Pythons R2E-Gym's install used for them (the row's setup log when the
loader recorded it, else the script's first attempt), how many are eligible here and the
reasons the others are not. Nothing is downloaded or built; with `--repo-mirror` the clone,
the base commit and the submodules are checked too. Eligible is not built: bench/r2e_gym.py
is the proof for the rows it runs.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from deepswe.data.task import Task, TaskSource


@dataclass
class RepoCoverage:
    repo: str  # R2E-Gym's name
    github: str  # owner/name, the mirror's folder
    rows: int = 0
    eligible: int = 0
    pythons: Counter = field(default_factory=Counter)  # X.Y -> rows
    reasons: Counter = field(default_factory=Counter)  # why not -> rows


def row_verdict(task: Task, mirror: Path | None) -> tuple[str | None, str | None]:
    """(Python X.Y or None, None when eligible else why not) for one R2E-Gym row."""
    from deepswe.env.recipes.r2e_gym.environment import (
        R2EEnvError,
        R2EUnsupported,
        attempt_for,
        build_from_source,
        interpreter_for,
        recipe_of,
    )

    python = None
    try:
        attempt = attempt_for(task, recipe_of(task))
        python = attempt.python
        interpreter_for(task, python)
        if mirror is not None:
            build_from_source(task, mirror)
    except (R2EUnsupported, R2EEnvError) as exc:
        return python, _reason(str(exc), task.instance_id)
    return python, None


def _reason(message: str, instance_id: str) -> str:
    """The message without its row's id, cut to its first clause (a category to count)."""
    text = message.removeprefix(f"{instance_id}: ")
    return text.split("; set $")[0].split(" at /")[0][:120]


def coverage(tasks: list[Task], mirror: Path | None) -> list[RepoCoverage]:
    """One RepoCoverage per repository of the R2E-Gym rows among `tasks`, by name."""
    from deepswe.env.recipes.r2e_gym.environment import repo_name

    out: dict[str, RepoCoverage] = defaultdict(lambda: RepoCoverage("", ""))
    for task in tasks:
        if task.source is not TaskSource.R2E_GYM:
            continue
        name = repo_name(task)
        row = out[name]
        row.repo, row.github = name, task.repo
        python, why = row_verdict(task, mirror)
        row.rows += 1
        if python:
            row.pythons[python] += 1
        if why is None:
            row.eligible += 1
        else:
            row.reasons[why] += 1
    return [out[k] for k in sorted(out)]


def markdown(rows: list[RepoCoverage], mirror_checked: bool) -> str:
    head = "| repository | rows | Python (rows) | eligible here | why not (rows) |"
    out = [head, "|---|---|---|---|---|"]
    for r in rows:
        pythons = ", ".join(f"{p} ({n})" for p, n in sorted(r.pythons.items()))
        why = "; ".join(f"{w} ({n})" for w, n in r.reasons.most_common()) or "-"
        out.append(f"| {r.github} | {r.rows} | {pythons or '-'} | {r.eligible} | {why} |")
    total, ok = sum(r.rows for r in rows), sum(r.eligible for r in rows)
    out.append(f"| all | {total} | | {ok} | |")
    if not mirror_checked:
        out.append("\n(no --repo-mirror: clones, commits and submodules not checked)")
    return "\n".join(out)


def summary(rows: list[RepoCoverage]) -> dict[str, object]:
    return {
        "repositories": len(rows),
        "rows": sum(r.rows for r in rows),
        "rows_eligible": sum(r.eligible for r in rows),
        "rows_per_repository": {r.repo: r.rows for r in rows},
        "eligible_per_repository": {r.repo: r.eligible for r in rows},
    }


__all__ = ["RepoCoverage", "coverage", "markdown", "row_verdict", "summary"]
