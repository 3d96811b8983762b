"""Which scripted candidates each task gets: the mixture's counts made into patches (kinds.py),
with a stated substitute where a task cannot offer a kind, written once as plan.json.

A kind a task cannot give as often as asked (a one-hunk gold has no partial fix; a fixed line
with no mutation site has no misedit; a task whose passing tests catch no other task's bug has
no regression) is filled with variants not already in the pool, taking the HARD kinds in turn
(from a seeded place per task, so no one kind swallows the shortfall), then comments, so every
task's pool has the size the mixture says. A substitute keeps its real kind and names the kind
it stands in for (`planned`); the report counts both. The mixture's `hard` slots are filled the
same way: hard negatives of kinds taken in turn (one YES and one NO a task is all judge data
uses, so the train pool asks for `right: 1, hard: 1`).

`survivor` slots are not made here: they are the task's proven-wrong survivors from a test
strength run (`deepswe-eval health --mutants K`, issue #43): mutants of the gold patch that the
graded tests pass and a wider test of the repository fails. They are the hardest negatives a
selector meets (a wrong patch that earns reward 1); a task with fewer gets hard kinds in their
place, named so.

Files at the base commit are read from the task's source repository (`environment.source`, a
local git repository: swe-mini's, after `deepswe-data swe-mini fetch`).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from deepswe.data.swemini.gitrepo import GitError, show
from deepswe.data.task import Task
from deepswe.eval.audit_manifest import AuditManifest, Survivor
from deepswe.eval.store import atomic_write_json
from deepswe.reproduce.tts.edits import EditError, hunks
from deepswe.reproduce.tts.kinds import Made, Partner, TaskEdits

HARD = ("misedit", "regression", "wrong_place", "partial")  # taken in turn for substitutes
MADE_KINDS = ("right", "partial", "misedit", "wrong_place", "regression", "comment", "empty")


class PlanError(ValueError):
    """A task's candidates cannot be made; the message names the task and what is missing."""


class Planned(BaseModel):
    """One scripted candidate of a task: run `run` of the task in the graded folder."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    run: int
    kind: str
    planned: str  # the kind the mixture asked for (== kind unless a substitute)
    detail: str
    expect: bool | None
    patch: str


def base_reader(task: Task) -> Callable[[str], str]:
    """A function reading a file of `task`'s repository at its base commit."""
    env = task.environment
    source = Path(env.source) if env is not None else None
    if source is None or not (source / ".git").exists() and not (source / "HEAD").exists():
        raise PlanError(
            f"{task.instance_id}: scripted candidates need the repository at the "
            "base commit (environment.source, a local git repository; swe-mini: "
            "`deepswe-data swe-mini fetch`)"
        )

    def read(path: str) -> str:
        try:
            return show(source, task.base_commit, path).decode("utf-8", "surrogateescape")
        except GitError as exc:
            raise PlanError(f"{task.instance_id}: {exc}") from None

    return read


def partners_of(task: Task, pool: Sequence[Task]) -> list[Partner]:
    """Tasks of the same repository whose bug `task`'s passing tests catch and its failing
    tests do not: their FAIL_TO_PASS is non-empty, inside `task`'s PASS_TO_PASS, and disjoint
    from its FAIL_TO_PASS (read from the hidden lists: this builds candidates, it judges none)."""
    p2p, f2p = set(task.hidden.pass_to_pass), set(task.hidden.fail_to_pass)
    out = []
    for other in sorted(pool, key=lambda t: t.instance_id):
        theirs = set(other.hidden.fail_to_pass)
        if other.instance_id == task.instance_id or other.repo != task.repo or not theirs:
            continue
        if theirs <= p2p and not theirs & f2p and other.gold_patch:
            try:
                out.append(Partner(other.instance_id, tuple(hunks(other.gold_patch))))
            except EditError:
                continue
    return out


def survivor_candidates(survivors: Sequence[Survivor]) -> list[Made]:
    """Proven-wrong survivors as candidates (each patch once); the grader resolves them."""
    out: dict[str, Made] = {}
    for s in survivors:
        if s.killed_by and s.patch not in out:
            detail = f"{s.operator}: {s.change}; the graded tests pass it, {s.killed_by} fails"
            out[s.patch] = Made("survivor", s.patch, detail[:300], True)
    return list(out.values())


def plan_task(
    task: Task,
    counts: dict[str, int],
    pool: Sequence[Task],
    seed: int,
    survivors: Sequence[Survivor] = (),
) -> list[Planned]:
    """The task's scripted candidates in kind order (runs 0..), substitutes after the kinds;
    `survivors`: the task's proven-wrong survivors (TaskStrength.proven_wrong)."""
    if not task.gold_patch:
        raise PlanError(f"{task.instance_id}: scripted candidates need a gold patch")
    meta = task.metadata
    try:
        edits = TaskEdits(
            task.instance_id,
            task.gold_patch,
            base_reader(task),
            seed,
            meta.get("function", ""),
            meta.get("mutation", ""),
        )
    except EditError as exc:
        raise PlanError(
            f"{task.instance_id}: the gold patch does not fit the base: {exc}"
        ) from None
    partners = partners_of(task, pool)
    chosen: list[tuple[Made, str]] = []
    short: list[str] = []
    for kind in MADE_KINDS:
        n = counts.get(kind, 0)
        if n:
            got = edits.variants(kind, n, partners)
            chosen += [(m, kind) for m in got]
            short += [kind] * (n - len(got))
    if n := counts.get("survivor", 0):
        got = survivor_candidates(survivors)[:n]
        chosen += [(m, "survivor") for m in got]
        short += ["survivor"] * (n - len(got))
    short += ["hard"] * counts.get("hard", 0)
    chosen += substitutes(edits, short, chosen, partners, seed)
    return [
        Planned(run=k, kind=m.kind, planned=p, detail=m.detail, expect=m.expect, patch=m.patch)
        for k, (m, p) in enumerate(chosen)
    ]


def substitutes(
    edits: TaskEdits,
    short: list[str],
    chosen: list[tuple[Made, str]],
    partners: Sequence[Partner],
    seed: int,
) -> list[tuple[Made, str]]:
    """(variant, the kind it stands in for) for each of `short`: HARD kinds in turn from a
    seeded place, variants not already chosen, then comments."""
    used = {m.patch for m, _ in chosen}
    left = len(short)
    pools = {
        k: [m for m in edits.variants(k, left + len(used), partners) if m.patch not in used]
        for k in (*HARD, "comment")
    }
    start = random.Random(f"{seed}:{edits.id}:substitutes").randrange(len(HARD))
    turn = [HARD[(start + i) % len(HARD)] for i in range(len(HARD))]
    out: list[tuple[Made, str]] = []
    i = 0
    for planned in short:
        for _ in range(len(turn)):
            kind = turn[i % len(turn)]
            i += 1
            if pools[kind]:
                out.append((pools[kind].pop(0), planned))
                break
        else:
            if pools["comment"]:
                out.append((pools["comment"].pop(0), planned))
    return out


def proven_wrong(manifest: AuditManifest) -> dict[str, list[Survivor]]:
    """Instance id -> its proven-wrong survivors, for the tasks whose strength was measured."""
    return {
        iid: list(row.strength.proven_wrong)
        for iid, row in manifest.tasks.items()
        if row.strength is not None and row.strength.proven_wrong
    }


def make_plan(
    tasks: Sequence[Task],
    counts: dict[str, int],
    pool: Sequence[Task],
    seed: int,
    path: Path,
    log: Callable[[str], None] = print,
    survivors: dict[str, list[Survivor]] | None = None,
) -> dict[str, list[Planned]]:
    """Every task's plan, read from `path` when it is there (a resume makes nothing again),
    else made and written there. `survivors`: instance id -> its proven-wrong survivors."""
    if path.is_file():
        data = json.loads(path.read_text(encoding="utf-8"))
        return {i: [Planned.model_validate(p) for p in rows] for i, rows in data.items()}
    found = survivors or {}
    plan = {
        t.instance_id: plan_task(t, counts, pool, seed, found.get(t.instance_id, [])) for t in tasks
    }
    atomic_write_json(
        path, {i: [p.model_dump(mode="json") for p in rows] for i, rows in plan.items()}
    )
    subs = sum(p.kind != p.planned for rows in plan.values() for p in rows)
    log(
        f"tts candidates: {sum(map(len, plan.values()))} scripted candidates planned for "
        f"{len(plan)} tasks ({subs} substitutes), {path}"
    )
    return plan
