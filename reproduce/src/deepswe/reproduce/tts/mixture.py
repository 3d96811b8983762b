"""Candidate pools of `deepswe-reproduce tts`: which tasks, and how each task's candidates (the
model's episodes, an eval run folder; the scripted kinds, graded into their own run folder by
grading.py) merge into one pool per task.

`merge_pools` copies the episode records into one run folder whose run k of a task is the k-th
slot of a seeded shuffle of the task's slots, so run 0 is not always the same kind (the
report's "random" prediction and the tie-breaks' lowest run read it). `mixture.json` beside it
lists every run's kind (and the kind it stands in for), what it is, what its construction
predicts, its source folder and run, and what the grader said.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path

from deepswe.data.task import Task
from deepswe.eval.store import EpisodeRecord, EpisodeStatus, RunStore, atomic_write_json
from deepswe.verify.tts_config import TaskPick


def pick_tasks(tasks: Sequence[Task], pick: TaskPick) -> list[Task]:
    """The stated subset: `pick.ids` in id order, else the first `per_repo` of each repository."""
    ordered = sorted(tasks, key=lambda t: t.instance_id)
    if pick.ids:
        known = {t.instance_id for t in ordered}
        if unknown := [i for i in pick.ids if i not in known]:
            raise ValueError(f"tts: ids not in {pick.dataset}: {', '.join(unknown)}")
        return [t for t in ordered if t.instance_id in set(pick.ids)]
    seen: dict[str, int] = {}
    out = []
    for t in ordered:
        if pick.repos and t.repo not in pick.repos:
            continue
        if pick.per_repo is None or seen.get(t.repo, 0) < pick.per_repo:
            seen[t.repo] = seen.get(t.repo, 0) + 1
            out.append(t)
    return out


def slot(
    kind: str,
    source: Path,
    source_run: int,
    planned: str = "",
    detail: str = "",
    expect: bool | None = None,
) -> dict:
    """One candidate of a task before merging: where its episode record is and what it is."""
    return {
        "kind": kind,
        "planned": planned or kind,
        "detail": detail,
        "expect": expect,
        "source": str(source),
        "source_run": source_run,
    }


def shuffled(instance_id: str, slots: list[dict], seed: int) -> list[dict]:
    """The task's slots in an order seeded by (seed, task): adding tasks renumbers no other."""
    out = list(slots)
    random.Random(f"{seed}:{instance_id}").shuffle(out)
    return out


def merge_pools(slots: dict[str, list[dict]], out: Path, seed: int) -> dict[str, list[dict]]:
    """Copy each task's slot records into the run folder `out`, renumbered by `shuffled`; write
    out/mixture.json and return it. A slot whose record is missing (or an infra error) is listed
    with resolved None and its status, and not copied."""
    store, table = RunStore(out), {}
    cache: dict[str, dict] = {}
    for iid, task_slots in slots.items():
        rows = []
        for k, s in enumerate(shuffled(iid, task_slots, seed)):
            if s["source"] not in cache:
                cache[s["source"]] = {
                    (r.instance_id, r.run): r for r in RunStore(s["source"]).records()
                }
            rec: EpisodeRecord | None = cache[s["source"]].get((iid, s["source_run"]))
            row = {"run": k, **s}
            row["resolved"] = rec.resolved if rec is not None else None
            row["status"] = rec.status.value if rec is not None else "missing"
            if rec is not None and rec.status is EpisodeStatus.GRADED:
                store.save(rec.model_copy(update={"run": k}))
            rows.append(row)
        table[iid] = rows
    atomic_write_json(out / "mixture.json", table)
    return table


def read_mixture(out: Path) -> dict[str, list[dict]]:
    return json.loads((out / "mixture.json").read_text(encoding="utf-8"))
