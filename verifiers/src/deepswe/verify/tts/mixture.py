"""Candidate pools of `deepswe-verify tts`: which tasks, the scripted wrong fixes, and how the
eval runs of each kind merge into one pool per task.

Each kind (model, right, wrong, empty; tts_config.Mixture) is its own eval run folder, graded by
the real grader. `merge_pools` copies their episode records into one run folder whose run k of
a task is `plan_slots(...)[k]`: a seeded shuffle of (kind, source run), so run 0 is not always
the same kind (the report's "random" prediction and the tie-breaks' lowest run read it).
`mixture.json` beside it lists every (run -> kind, source) pair.

A wrong fix is an edit of the gold patch's first hunk that leaves the buggy line as it is: a
comment above it, or after it on the same line, with one of several notes (variant i), played
through the same tools as the gold policy's edits. It looks like a fix in the trajectory and the
patch; the grader says what it is.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path

from unidiff import PatchSet

from deepswe.data.task import Task
from deepswe.env.policies.scripted import FINISH
from deepswe.eval.store import EpisodeRecord, RunStore, atomic_write_json
from deepswe.verify.tts.config import KINDS, TaskPick

NOTES = (
    "fix: handle this case as the issue describes",
    "checked against the reported example",
    "edge case from the issue handled here",
    "keep in sync with the documented behaviour",
    "see the issue report",
)


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


def _editor(path: str, old: str, new: str) -> str:
    return (
        "<function=file_editor>\n<parameter=command>str_replace</parameter>\n"
        f"<parameter=path>{path}</parameter>\n<parameter=old_str>{old}</parameter>\n"
        f"<parameter=new_str>{new}</parameter>\n</function>"
    )


def wrong_fix_actions(gold_patch: str, variant: int, root: str = "/testbed") -> list[str]:
    """Tool calls of wrong fix `variant`: the gold's first hunk with a note beside the buggy line,
    which is kept; then finish. ValueError if the gold patch has no hunk to edit."""
    hunk, path = None, ""
    for f in PatchSet(gold_patch):
        if not (f.is_added_file or f.is_removed_file) and len(f):
            hunk, path = f[0], f.path
            break
    if hunk is None:
        raise ValueError("no modified file in the gold patch to script a wrong fix from")
    old_lines = [line.value for line in hunk if not line.is_added]
    kinds = [("-" if line.is_removed else "+" if line.is_added else " ") for line in hunk]
    # where the change starts, counted in the old text's lines
    first = sum(
        1 for k in kinds[: kinds.index("-") if "-" in kinds else kinds.index("+")] if k == " "
    )
    first = min(first, len(old_lines) - 1)
    anchor = old_lines[first]
    indent = anchor[: len(anchor) - len(anchor.lstrip())]
    note = NOTES[variant % len(NOTES)]
    new_lines = list(old_lines)
    if (variant // len(NOTES)) % 2 == 0 or not anchor.strip():
        new_lines.insert(first, f"{indent}# {note}\n")  # a comment line above the buggy one
    else:
        new_lines[first] = anchor.rstrip("\n") + f"  # {note}\n"  # a trailing comment
    old, new = "".join(old_lines), "".join(new_lines)
    return [_editor(f"{root}/{path}", old, new), FINISH]


def write_wrong_recordings(tasks: Sequence[Task], n: int, folder: Path) -> Path:
    """Replay recordings <folder>/<id>/run-<k>.json (k < n) of the wrong fixes, for
    `deepswe-eval run --policy replay --replay-dir <folder>`."""
    for t in tasks:
        for k in range(n):
            steps = [{"assistant": a} for a in wrong_fix_actions(t.gold_patch or "", k)]
            atomic_write_json(folder / t.instance_id / f"run-{k}.json", {"steps": steps})
    return folder


def plan_slots(instance_id: str, counts: dict[str, int], seed: int) -> list[tuple[str, int]]:
    """Merged run k of a task -> (kind, run in that kind's folder): every slot once, in an order
    seeded by (seed, task) so that adding tasks changes no other task's numbering."""
    slots = [(kind, j) for kind in KINDS for j in range(counts.get(kind, 0))]
    random.Random(f"{seed}:{instance_id}").shuffle(slots)
    return slots


def merge_pools(
    sources: dict[str, Path], counts: dict[str, int], ids: Sequence[str], out: Path, seed: int
) -> dict[str, list[dict]]:
    """Copy each kind's episode records (sources: kind -> eval run folder) into the run folder
    `out`, renumbered by plan_slots; write out/mixture.json and return it. A slot whose source
    episode is missing is listed with resolved None and not copied."""
    store, table = RunStore(out), {}
    records = {
        kind: {(r.instance_id, r.run): r for r in RunStore(src).records()}
        for kind, src in sources.items()
    }
    for iid in ids:
        rows = []
        for k, (kind, j) in enumerate(plan_slots(iid, counts, seed)):
            rec: EpisodeRecord | None = records.get(kind, {}).get((iid, j))
            row = {"run": k, "kind": kind, "source": str(sources.get(kind, "")), "source_run": j}
            row["resolved"] = rec.resolved if rec is not None else None
            row["status"] = rec.status.value if rec is not None else "missing"
            if rec is not None:
                store.save(rec.model_copy(update={"run": k}))
            rows.append(row)
        table[iid] = rows
    atomic_write_json(out / "mixture.json", table)
    return table


def read_mixture(out: Path) -> dict[str, list[dict]]:
    return json.loads((out / "mixture.json").read_text(encoding="utf-8"))
