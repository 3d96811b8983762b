"""swe-mini synthesis: pinned sdists -> mutants -> host-checked tasks, deterministic in the seed.

Per project (one worker each, two at a time): rebuild the clean repository, run the whole suite
once (baseline), list every mutation site of the source files, order them with
`random.Random(f"{seed}:{name}")` (round-robin over mutation kinds, for variety), and try them in
that order until `quota` bugs are caught or `max_tries` were run. A caught bug becomes a task if
a problem statement holding up to every statement check can be written for it (`issue.py`), and
is dropped otherwise. Each try's outcome is cached on disk by the mutation's identity, so an
interrupted synthesis resumes where it stopped and a rerun with the same seed writes the same
bytes.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from deepswe.data.swemini import gitrepo
from deepswe.data.swemini.attempt import Attempt, test_file, try_mutant
from deepswe.data.swemini.issue import Runner
from deepswe.data.swemini.manifest import Manifest, Project, cache_dir
from deepswe.data.swemini.mutate import Mutation, mutation_sites
from deepswe.data.swemini.runner import ensure_venv, run_pytest
from deepswe.data.swemini.snippet import ProjectTree, SnippetRun, run_snippet
from deepswe.data.swemini.sources import ensure_repo, repo_path
from deepswe.data.swemini.taskrow import make_task
from deepswe.data.task import Task

Tick = Callable[[str, str], None]  # (project, event) for a progress display
MAX_PER_FUNCTION = 2  # kept mutants per function: spread tasks over the code


@dataclass
class ProjectResult:
    project: str
    tasks: list[Task] = field(default_factory=list)
    reasons: Counter = field(default_factory=Counter)
    dropped: dict[str, str] = field(default_factory=dict)  # instance id -> why no statement
    tests: int = 0
    suite_seconds: float = 0.0


def source_files(repo: Path, project: Project) -> list[str]:
    out = []
    for entry in project.src:
        p = repo / entry
        if not p.exists():
            raise ValueError(f"{project.key}: manifest src entry {entry!r} is not in the sdist")
        files = [p] if p.is_file() else sorted(p.rglob("*.py"))
        for f in files:
            rel = f.relative_to(repo).as_posix()
            name = f.name
            if (
                "/tests/" in f"/{rel}"
                or "/test/" in f"/{rel}"
                or name.startswith("test_")
                or name == "conftest.py"
            ):
                continue
            out.append(rel)
    return sorted(set(out))


def ordered_sites(repo: Path, project: Project, seed: int) -> list[Mutation]:
    """All sites, shuffled per kind and interleaved round-robin, from Random(f"{seed}:{name}")."""
    rng = random.Random(f"{seed}:{project.name}")
    by_kind: dict[str, list[Mutation]] = {}
    for rel in source_files(repo, project):
        for m in mutation_sites(rel, (repo / rel).read_bytes()):
            by_kind.setdefault(m.kind, []).append(m)
    kinds = sorted(by_kind)
    rng.shuffle(kinds)
    for k in kinds:
        rng.shuffle(by_kind[k])
    out, i = [], 0
    while any(by_kind.values()):
        k = kinds[i % len(kinds)]
        if by_kind[k]:
            out.append(by_kind[k].pop())
        i += 1
    return out


def _cached(path: Path, compute: Callable[[], dict]) -> dict:
    if path.exists():
        return json.loads(path.read_text())
    value = compute()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(value, sort_keys=True))
    tmp.replace(path)
    return value


@dataclass
class _Project:
    """One project's synthesis in progress."""

    manifest: Manifest
    project: Project
    seed: int
    repo: Path
    clean: str
    python: Path
    work: Path
    baseline: dict[str, str]
    timeout: float
    tree: ProjectTree
    result: ProjectResult
    per_function: Counter = field(default_factory=Counter)
    tries: int = 0
    caught: int = 0  # bugs the tests catch: kept as tasks, or dropped for their statement


def synth_project(
    manifest: Manifest,
    project: Project,
    seed: int,
    quota: int,
    max_tries: int,
    cache: Path | None = None,
    tick: Tick | None = None,
) -> ProjectResult:
    cache = cache or cache_dir()
    tick = tick or (lambda _p, _e: None)
    repo = repo_path(project, cache)
    clean = ensure_repo(project, cache)
    # a crash may have left a mutated file behind; reset, never delete the repository: image
    # builds may be cloning it (and its task refs) at the same time
    gitrepo.git(repo, "reset", "-q", "--hard", clean)
    gitrepo.git(repo, "clean", "-q", "-fdx")
    python = ensure_venv(cache / "venv", manifest.pytest)
    work = cache / "synth" / project.key
    base = _cached(work / "baseline.json", lambda: _baseline(python, repo, project))
    baseline: dict[str, str] = {
        t: st for t, st in base["statuses"].items() if not t.startswith(tuple(project.exclude))
    }
    result = ProjectResult(project.name, tests=len(baseline), suite_seconds=base["seconds"])
    # an endless loop is a mutant to reject, not a reason to wait two minutes
    timeout = max(30.0, 10 * base["seconds"])
    with ProjectTree(repo, project, clean) as tree:  # reproductions run here, not in the repo
        state = _Project(
            manifest, project, seed, repo, clean, python, work, baseline, timeout, tree, result
        )
        for m in ordered_sites(repo, project, seed):
            if state.caught >= quota or state.tries >= max_tries:
                break
            if state.per_function[(m.path, m.function)] >= MAX_PER_FUNCTION:
                continue
            attempt = _attempt(state, m)
            result.reasons[attempt.status] += 1
            tick(project.name, attempt.status)
            if attempt.status == "accepted":
                _keep(state, m, attempt)
    return result


def _attempt(state: _Project, m: Mutation) -> Attempt:
    """The mutant's test verdict, cached by the mutation's identity."""
    state.tries += 1
    digest = hashlib.sha256(m.key.encode()).hexdigest()
    all_files = sorted({test_file(t) for t in state.baseline})
    data = _cached(
        state.work / "attempts" / f"{digest[:24]}.json",
        lambda: try_mutant(
            m,
            state.repo,
            state.python,
            state.project.pythonpath,
            state.baseline,
            all_files,
            state.timeout,
        ).to_dict(),
    )
    return _without_excluded(Attempt(**data), state.project.exclude)


def _keep(state: _Project, m: Mutation, attempt: Attempt) -> None:
    """Commit a caught bug and write its task; drop it when no statement holds up.

    A caught bug counts against the quota and its function's cap either way: the statement
    stage only drops tasks, it never changes which mutants are tried, so the release's ids
    do not move when the writer changes."""
    state.caught += 1
    state.per_function[(m.path, m.function)] += 1
    short_id = hashlib.sha256(m.key.encode()).hexdigest()[:8]
    content = m.apply((state.repo / m.path).read_bytes())
    bug = gitrepo.commit_file(state.repo, state.clean, m.path, content)
    gitrepo.set_ref(state.repo, f"swe-mini/{state.project.name}-{short_id}", bug)
    gold = gitrepo.diff(state.repo, bug, state.clean)
    run = _runner(state.tree, state.python, m.path, content)
    task = make_task(
        state.manifest, state.project, m, attempt, bug, gold, short_id, state.seed, state.repo, run
    )
    if isinstance(task, str):
        state.result.reasons["accepted"] -= 1
        state.result.reasons["no_statement"] += 1
        state.result.dropped[f"{state.project.name}__{state.project.name}-{short_id}"] = task
        return
    state.result.tasks.append(task)


def _runner(tree: ProjectTree, python: Path, path: str, bug: bytes) -> Runner:
    """Runs a reproduction against the project with the bug (at_base) or without it."""

    def run(code: str, at_base: bool, hash_seed: str) -> SnippetRun:
        if not at_base:
            return run_snippet(python, tree.import_root, code, hash_seed)
        with tree.buggy(path, bug):
            return run_snippet(python, tree.import_root, code, hash_seed)

    return run


def _baseline(python: Path, repo: Path, project: Project) -> dict:
    run = run_pytest(python, repo, project.pythonpath, project.tests)
    if run.timed_out or run.collection_errors:
        raise RuntimeError(
            f"{project.key}: the clean test suite does not run: {run.collection_errors}"
        )
    return {"statuses": run.statuses, "seconds": round(run.seconds, 2)}


def _without_excluded(attempt: Attempt, exclude: list[str]) -> Attempt:
    """Drop excluded tests from a (possibly cached) verdict; no failing test left = no task."""
    if not exclude or attempt.status != "accepted":
        return attempt
    keep = lambda ids: [t for t in ids if not t.startswith(tuple(exclude))]  # noqa: E731
    attempt.fail_to_pass, attempt.pass_to_pass = (
        keep(attempt.fail_to_pass),
        keep(attempt.pass_to_pass),
    )
    if not attempt.fail_to_pass:
        attempt.status = "no_failing_test"
    return attempt
