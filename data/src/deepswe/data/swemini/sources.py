"""Download the pinned sdists (hash-checked, cached) and rebuild their git repositories.

`fetch` is what `make data` runs: every project's sdist is downloaded once with
`pip download --no-deps --no-binary :all:`, its sha256 checked against the manifest, and its git
repository rebuilt under `<cache>/repos/<name>-<version>`. Given tasks, each task's bug commit is
re-created from its gold patch (applied in reverse on the clean commit) and checked against the
task's `base_commit`: a mismatch means this machine would build different images, and is an error.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

from deepswe.data.swemini import gitrepo
from deepswe.data.swemini.manifest import Manifest, Project, cache_dir
from deepswe.data.task import Task

PIP_TIMEOUT_S = 900
Log = Callable[[str], None]


class SourceError(RuntimeError):
    """A sdist could not be downloaded, failed its hash check, or rebuilt to other SHAs."""


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _archives(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*") if p.name.endswith((".tar.gz", ".zip", ".tgz")))


def download(project: Project, cache: Path | None = None) -> Path:
    """The project's sdist, downloaded into `<cache>/sdists/<key>/` unless already there."""
    folder = (cache or cache_dir()) / "sdists" / project.key
    found = [p for p in _archives(folder) if sha256_of(p) == project.sha256]
    if found:
        return found[0]
    folder.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "-q"]
    cmd += [
        "--no-deps",
        "--no-binary",
        ":all:",
        "-d",
        str(folder),
        f"{project.name}=={project.version}",
    ]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=PIP_TIMEOUT_S)
    if res.returncode != 0:
        raise SourceError(
            f"{project.key}: pip download failed:\n{(res.stdout + res.stderr)[-2000:]}"
        )
    archives = _archives(folder)
    for archive in archives:
        if sha256_of(archive) == project.sha256:
            return archive
    got = ", ".join(f"{a.name}={sha256_of(a)}" for a in archives) or "nothing"
    raise SourceError(
        f"{project.key}: sha256 mismatch: manifest {project.sha256}, downloaded {got}"
    )


def repo_path(project: Project, cache: Path | None = None) -> Path:
    return (cache or cache_dir()) / project.repo_rel


def build_repo(project: Project, cache: Path | None = None) -> str:
    """Download (cached) and rebuild the project's git repository; return the clean SHA."""
    archive = download(project, cache)
    return gitrepo.init_from_sdist(
        archive, repo_path(project, cache), project.name, project.version
    )


def ensure_repo(project: Project, cache: Path | None = None) -> str:
    """The clean SHA of the project's repository, building it if it is missing."""
    path = repo_path(project, cache)
    if (path / ".git").exists():
        sha = gitrepo.git(path, "rev-list", "--max-parents=0", "main").strip()
        if not project.commit or sha == project.commit:
            return sha
    return build_repo(project, cache)


def task_ref(task: Task) -> str:
    return f"swe-mini/{task.instance_id}"


def restore_bug_commits(project: Project, tasks: Iterable[Task], cache: Path | None = None) -> int:
    """Re-create each task's bug commit from its gold patch; check the SHA; keep it as a ref."""
    path = repo_path(project, cache)
    clean = ensure_repo(project, cache)
    count = 0
    for task in tasks:
        if not task.gold_patch:
            raise SourceError(f"{task.instance_id}: no gold patch to re-create the bug from")
        sha = gitrepo.commit_reverse_patch(path, clean, task.gold_patch)
        if sha != task.base_commit:
            raise SourceError(
                f"{task.instance_id}: rebuilt base commit {sha} != base_commit {task.base_commit} "
                "(different sdist contents or git behaviour on this machine)"
            )
        gitrepo.set_ref(path, task_ref(task), sha)
        count += 1
    return count


def fetch(
    manifest: Manifest,
    tasks: list[Task] | None = None,
    cache: Path | None = None,
    log: Log = print,
    rebuild: bool = True,
) -> dict[str, str]:
    """Download, hash-check and (re)build every project's repo, then the tasks' bug commits.

    Returns project name -> clean commit SHA.
    """
    shas: dict[str, str] = {}
    by_repo: dict[str, list[Task]] = {}
    for t in tasks or []:
        by_repo.setdefault(t.repo.split("/")[-1], []).append(t)
    for project in manifest.projects:
        sha = build_repo(project, cache) if rebuild else ensure_repo(project, cache)
        shas[project.name] = sha
        n = restore_bug_commits(project, by_repo.get(project.name, []), cache)
        log(f"{project.key}: clean {sha[:12]}, {n} task commits")
    return shas
