"""Deterministic git: the same sdist and the same mutation give the same commit SHAs anywhere.

A commit's SHA hashes its tree, parents, author, committer, dates and message, so all of them
are fixed here (and the user's git config is kept out, so no hook, template, autocrlf or signing
setting can change a byte). Commits are made with plumbing (temporary index, `commit-tree`):
the repository's working tree stays at the clean sdist while bug commits are added on the side.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import tempfile
import zipfile
from pathlib import Path, PurePosixPath

IDENTITY = {
    "GIT_AUTHOR_NAME": "swe-mini",
    "GIT_AUTHOR_EMAIL": "swe-mini@deepswe.invalid",
    "GIT_COMMITTER_NAME": "swe-mini",
    "GIT_COMMITTER_EMAIL": "swe-mini@deepswe.invalid",
    "GIT_AUTHOR_DATE": "2025-01-01T00:00:00+0000",
    "GIT_COMMITTER_DATE": "2025-01-01T00:00:00+0000",
}
CLEAN_MESSAGE = "swe-mini: {name} {version} sdist\n"
BUG_MESSAGE = "swe-mini base\n"  # says nothing about the bug on purpose


class GitError(RuntimeError):
    """A git command failed; the message holds the command and git's stderr."""


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(IDENTITY)
    env.update({"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C"})
    env.update(extra or {})
    return env


def git(
    repo: Path, *args: str, stdin: bytes | None = None, env: dict[str, str] | None = None
) -> str:
    """Run `git -C repo args...` with the fixed identity; return stdout (text)."""
    cmd = ["git", "-C", str(repo), "-c", "core.autocrlf=false", "-c", "commit.gpgsign=false"]
    res = subprocess.run([*cmd, *args], input=stdin, capture_output=True, env=_env(env))
    if res.returncode != 0:
        raise GitError(
            f"git {' '.join(args)} in {repo}: {res.stderr.decode(errors='replace').strip()}"
        )
    return res.stdout.decode("utf-8", errors="surrogateescape")


def _members(archive: Path) -> list[tuple[str, bytes, bool]]:
    """(path below the top directory, content, executable) for every regular file."""
    out: list[tuple[str, bytes, bool]] = []
    if archive.suffix == ".zip":
        with zipfile.ZipFile(archive) as zf:
            for info in zf.infolist():
                if not info.is_dir():
                    out.append(
                        (info.filename, zf.read(info), bool((info.external_attr >> 16) & 0o111))
                    )
    else:
        with tarfile.open(archive) as tf:
            for m in tf.getmembers():
                if m.isfile():  # links and devices are skipped: same choice on every machine
                    f = tf.extractfile(m)
                    out.append((m.name, f.read() if f else b"", bool(m.mode & 0o111)))
    stripped = []
    for name, data, exe in out:
        parts = PurePosixPath(name).parts[1:]  # drop "<name>-<version>/"
        if not parts or ".." in parts or PurePosixPath(name).is_absolute() or ".git" in parts:
            continue
        stripped.append(("/".join(parts), data, exe))
    return sorted(stripped)


def init_from_sdist(archive: Path, dest: Path, name: str, version: str) -> str:
    """(Re)create `dest` as a git repo whose one commit, on `main`, is the sdist's files.

    Returns the commit SHA; it depends on the archive's file contents and x bits only.
    """
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for rel, data, exe in _members(archive):
        path = dest / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        path.chmod(0o755 if exe else 0o644)
    git(dest, "init", "-q", "-b", "main")
    git(dest, "add", "-A", "-f", ".")  # -f: an sdist's own .gitignore must not drop files
    git(dest, "commit", "-q", "--no-verify", "-m", CLEAN_MESSAGE.format(name=name, version=version))
    return head(dest)


def head(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD").strip()


def _with_index(repo: Path, parent: str, steps) -> str:
    """Run `steps(env)` against a temporary index loaded with `parent`; commit the result."""
    with tempfile.TemporaryDirectory(prefix="swe-mini-index-") as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        git(repo, "read-tree", parent, env=env)
        steps(env)
        tree = git(repo, "write-tree", env=env).strip()
    return git(repo, "commit-tree", tree, "-p", parent, stdin=BUG_MESSAGE.encode()).strip()


def commit_file(repo: Path, parent: str, path: str, content: bytes) -> str:
    """A commit on top of `parent` where `path` holds `content` (mode kept); returns its SHA."""
    mode = git(repo, "ls-tree", parent, "--", path).split()[0]
    blob = git(repo, "hash-object", "-w", "--no-filters", "--stdin", stdin=content).strip()

    def steps(env: dict[str, str]) -> None:
        git(repo, "update-index", "--cacheinfo", f"{mode},{blob},{path}", env=env)

    return _with_index(repo, parent, steps)


def commit_reverse_patch(repo: Path, parent: str, patch: str) -> str:
    """A commit on top of `parent` with `patch` applied in reverse (the gold patch undone)."""

    def steps(env: dict[str, str]) -> None:
        git(repo, "apply", "--cached", "-R", "-", stdin=patch.encode(), env=env)

    return _with_index(repo, parent, steps)


def diff(repo: Path, old: str, new: str) -> str:
    """`git diff old new` with full blob ids (no abbreviation that could vary)."""
    return git(repo, "diff", "--full-index", "--no-color", "--no-ext-diff", old, new)


def set_ref(repo: Path, name: str, sha: str) -> None:
    """Keep `sha` reachable as refs/heads/<name> (a clone of the repo then fetches it)."""
    git(repo, "update-ref", f"refs/heads/{name}", sha)


def show(repo: Path, rev: str, path: str) -> bytes:
    res = subprocess.run(
        ["git", "-C", str(repo), "show", f"{rev}:{path}"], capture_output=True, env=_env()
    )
    if res.returncode != 0:
        raise GitError(f"git show {rev}:{path}: {res.stderr.decode(errors='replace').strip()}")
    return res.stdout
