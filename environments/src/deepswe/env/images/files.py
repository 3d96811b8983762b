"""Files an install would download (source tarballs), fetched by the host for an offline build.

An EnvironmentSpec's `files` name each one (deepswe.data.task.SourceFile): a registry's copy of
the same bytes (a URL, checked against its sha256) or a tree from a local git repository (the
repository mirror) written as a .tar.gz. Fetched once into $DEEPSWE_CACHE/files and copied into
the build context; the task image gets them at /deepswe-files.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import urllib.request
from pathlib import Path

from deepswe.data.task import SourceFile
from deepswe.env.images.base import ImageBuildError
from deepswe.env.images.recipe import cache_root

IMAGE_FOLDER = "/deepswe-files"
DOWNLOAD_TIMEOUT_S = 300


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _download(f: SourceFile, dest: Path) -> None:
    try:
        with (
            urllib.request.urlopen(f.url, timeout=DOWNLOAD_TIMEOUT_S) as res,
            dest.open("wb") as out,
        ):
            shutil.copyfileobj(res, out)
    except OSError as exc:
        raise ImageBuildError(f"{f.name}: cannot download {f.url}: {exc}") from exc
    got = _sha256(dest)
    if f.sha256 and got != f.sha256:
        dest.unlink()
        raise ImageBuildError(f"{f.name}: {f.url} has sha256 {got}, expected {f.sha256}")


def _archive(f: SourceFile, dest: Path) -> None:
    repo, _, ref = (f.git or "").rpartition("@")
    if not Path(repo).is_dir():
        raise ImageBuildError(
            f"{f.name}: no git repository at {repo} (standing in for {f.stands_for or f.name})"
        )
    prefix = f"{f.prefix or f.name.split('.tar')[0]}/"
    with dest.open("wb") as out:
        res = subprocess.run(
            ["git", "-C", repo, "archive", "--format=tar.gz", f"--prefix={prefix}", ref],
            stdout=out,
            stderr=subprocess.PIPE,
            text=False,
        )
    if res.returncode != 0:
        dest.unlink()
        raise ImageBuildError(
            f"{f.name}: git archive {ref} in {repo}: {res.stderr.decode()[-500:]}"
        )


def fetch_file(f: SourceFile, folder: Path) -> Path:
    """`f` in `folder` (fetched into the cache first if missing); its path."""
    key = f.sha256 or hashlib.sha256(f"{f.git}|{f.prefix}".encode()).hexdigest()
    cached = cache_root() / "files" / key / f.name
    cached.parent.mkdir(parents=True, exist_ok=True)
    with (cached.parent / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two builds fetching one file wait for each other
        if not cached.exists():
            partial = cached.with_name(f"{f.name}.{os.getpid()}.partial")
            (_download if f.url else _archive)(f, partial)
            os.replace(partial, cached)
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy2(cached, folder / f.name)
    return folder / f.name


__all__ = ["IMAGE_FOLDER", "fetch_file"]
