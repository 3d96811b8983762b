"""The statement checks over a tasks file, every row (`deepswe-data swe-mini check-statements`).

The static checks need only the text and the manifest. The run checks need each project's
repository in the swe-mini cache (`ensure_repo` builds a missing one from its sdist) and a
Python 3.11 (`snippet.snippet_python`): each row's reproduction runs twice against a scratch copy
of the project's sources, with the task's bug and without it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from deepswe.data.swemini.manifest import Manifest, Project
from deepswe.data.swemini.snippet import ProjectTree, SnippetRun, bug_content, run_snippet
from deepswe.data.swemini.sources import ensure_repo, repo_path
from deepswe.data.swemini.statement_check import Check, check_runs, check_static, parse_statement
from deepswe.data.task import Task


@dataclass
class RowCheck:
    """The verdicts of one row: check -> None (passed) or why it failed."""

    instance_id: str
    project: str
    split: str
    verdicts: dict[Check, str | None] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(v is None for v in self.verdicts.values())

    def failures(self) -> dict[Check, str]:
        return {c: v for c, v in self.verdicts.items() if v is not None}


def _project_of(task: Task, manifest: Manifest) -> Project:
    return manifest.project(task.repo.split("/")[-1])


def check_static_rows(tasks: list[Task], manifest: Manifest) -> list[RowCheck]:
    out = []
    for t in tasks:
        project = _project_of(t, manifest)
        row = RowCheck(t.instance_id, project.name, t.metadata.get("split", ""))
        row.verdicts.update(check_static(t.problem_statement, project.api_modules))
        out.append(row)
    return out


def _run_project(
    project: Project, rows: list[tuple[Task, RowCheck]], python: Path, cache: Path | None
) -> None:
    repo = repo_path(project, cache)
    clean = ensure_repo(project, cache)
    with ProjectTree(repo, project, clean) as tree:
        for task, row in rows:
            text = task.problem_statement
            code = parse_statement(text).reproduction
            if not code:
                row.verdicts.update(check_runs(text, SnippetRun(crashed="no reproduction"), None))
                continue
            path = task.metadata["file"]
            content = bug_content(repo, task.base_commit, path, task.gold_patch, clean)
            with tree.buggy(path, content):
                at_base = run_snippet(python, tree.import_root, code)
            with_gold = run_snippet(python, tree.import_root, code)
            row.verdicts.update(check_runs(text, at_base, with_gold))


def check_rows(
    tasks: list[Task],
    manifest: Manifest,
    python: Path | None,
    cache: Path | None = None,
    workers: int = 2,
    tick: Callable[[str], None] | None = None,
) -> list[RowCheck]:
    """Every check of every row (projects in parallel, `workers` at a time); with `python`
    None, the static checks only."""
    rows = check_static_rows(tasks, manifest)
    if python is None:
        return rows
    by_project: dict[str, list[tuple[Task, RowCheck]]] = {}
    for task, row in zip(tasks, rows, strict=True):
        by_project.setdefault(row.project, []).append((task, row))

    def one(name: str) -> None:
        _run_project(manifest.project(name), by_project[name], python, cache)
        if tick:
            tick(name)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(one, sorted(by_project)))
    return rows


def shares(rows: list[RowCheck]) -> dict[str, dict[str, float | int]]:
    """Per check, and `all` of them: rows passing, rows checked, share passing."""
    out = {}
    for check in [c for c in Check if any(c in r.verdicts for r in rows)]:
        done = [r for r in rows if check in r.verdicts]
        out[check.value] = _share(sum(r.verdicts[check] is None for r in done), len(done))
    out["all"] = _share(sum(r.ok for r in rows), len(rows))
    return out


def _share(passed: int, total: int) -> dict[str, float | int]:
    return {"passed": passed, "rows": total, "share": round(passed / total, 3) if total else 0.0}


def _head(why: str) -> str:
    """A reason without its particulars: "... printed 'x'" -> "... printed a value"."""
    if " printed " in why:
        return why.split(" printed ")[0] + " printed a value"
    if " raised " in why:
        head, _, exc = why.partition(" raised ")
        return f"{head} raised {exc.split(':')[0]}"
    return why.split(":")[0]


def report(rows: list[RowCheck]) -> dict:
    """Shares overall and per project, and the failures per check and reason."""
    reasons: Counter = Counter()
    for r in rows:
        for check, why in r.failures().items():
            reasons[f"{check.value}: {_head(why)}"] += 1
    return {
        "rows": len(rows),
        "overall": shares(rows),
        "projects": {
            p: shares([r for r in rows if r.project == p])
            for p in sorted({r.project for r in rows})
        },
        "reasons": dict(reasons.most_common()),
    }
