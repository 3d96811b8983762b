"""swe-mini synthesis: pinned sdists -> mutants -> host-checked tasks, deterministic in the seed.

Per project (one worker each, two at a time): rebuild the clean repository, run the whole suite
once (baseline), list every mutation site of the source files, order them with
`random.Random(f"{seed}:{name}")` (round-robin over mutation kinds, for variety), and try them in
that order until `quota` are kept or `max_tries` were run. Each try's outcome is cached on disk
by the mutation's identity, so an interrupted synthesis resumes where it stopped and a rerun
with the same seed writes the same bytes.
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
from deepswe.data.swemini.manifest import Manifest, Project, cache_dir
from deepswe.data.swemini.mutate import Mutation, mutation_sites
from deepswe.data.swemini.runner import ensure_venv, run_pytest
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
    all_files = sorted({test_file(t) for t in baseline})
    result = ProjectResult(project.name, tests=len(baseline), suite_seconds=base["seconds"])
    # an endless loop is a mutant to reject, not a reason to wait two minutes
    timeout = max(30.0, 10 * base["seconds"])
    per_function: Counter = Counter()
    tries = 0
    for m in ordered_sites(repo, project, seed):
        if len(result.tasks) >= quota or tries >= max_tries:
            break
        if per_function[(m.path, m.function)] >= MAX_PER_FUNCTION:
            continue
        tries += 1
        digest = hashlib.sha256(m.key.encode()).hexdigest()
        data = _cached(
            work / "attempts" / f"{digest[:24]}.json",
            lambda m=m: try_mutant(
                m, repo, python, project.pythonpath, baseline, all_files, timeout
            ).to_dict(),
        )
        attempt = _without_excluded(Attempt(**data), project.exclude)
        result.reasons[attempt.status] += 1
        tick(project.name, attempt.status)
        if attempt.status != "accepted":
            continue
        bug = gitrepo.commit_file(repo, clean, m.path, m.apply((repo / m.path).read_bytes()))
        gitrepo.set_ref(repo, f"swe-mini/{project.name}-{digest[:8]}", bug)
        gold = gitrepo.diff(repo, bug, clean)
        task = make_task(manifest, project, m, attempt, bug, gold, digest[:8], seed, repo)
        if task is None:
            result.reasons["accepted"] -= 1
            result.reasons["no_readable_failure"] += 1
            continue
        per_function[(m.path, m.function)] += 1
        result.tasks.append(task)
    return result


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
