"""Files an install would download, fetched by the host: a registry's copy checked by sha256, or
a source tree from a local git repository (the mirror) as a .tar.gz. Offline: file:// URLs."""

from __future__ import annotations

import hashlib
import tarfile

import pytest

from deepswe.data.task import SourceFile
from deepswe.data.toy import git
from deepswe.env.images.base import ImageBuildError
from deepswe.env.images.files import fetch_file


def test_a_download_is_checked_against_its_sha256_and_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("DEEPSWE_CACHE", str(tmp_path / "cache"))
    src = tmp_path / "qhull.tgz"
    src.write_bytes(b"qhull sources")
    sha = hashlib.sha256(b"qhull sources").hexdigest()
    f = SourceFile(name="q.tgz", url=src.as_uri(), sha256=sha)
    assert fetch_file(f, tmp_path / "ctx").read_bytes() == b"qhull sources"
    src.unlink()  # the second build reads the cache
    assert fetch_file(f, tmp_path / "ctx2").read_bytes() == b"qhull sources"
    other = tmp_path / "other.tgz"
    other.write_bytes(b"something else")
    bad = SourceFile(name="o.tgz", url=other.as_uri(), sha256=sha)
    with pytest.raises(ImageBuildError, match="expected " + sha):
        fetch_file(bad, tmp_path / "ctx3")


def test_a_tree_from_the_mirror_is_archived_at_its_tag(tmp_path, monkeypatch):
    monkeypatch.setenv("DEEPSWE_CACHE", str(tmp_path / "cache"))
    repo = tmp_path / "freetype__freetype"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "autogen.sh").write_text("echo 2.6.1\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "2.6.1")
    git(repo, "tag", "VER-2-6-1")
    (repo / "autogen.sh").write_text("echo later\n")
    git(repo, "commit", "-qam", "later")
    f = SourceFile(name="freetype-2.6.1.tar.gz", git=f"{repo}@VER-2-6-1", prefix="freetype-2.6.1")
    with tarfile.open(fetch_file(f, tmp_path / "ctx")) as tar:
        assert tar.extractfile("freetype-2.6.1/autogen.sh").read() == b"echo 2.6.1\n"
    missing = SourceFile(name="x.tar.gz", git=f"{tmp_path}/absent@v1", stands_for="x's tarball")
    with pytest.raises(ImageBuildError, match="no git repository .* x's tarball"):
        fetch_file(missing, tmp_path / "ctx")
