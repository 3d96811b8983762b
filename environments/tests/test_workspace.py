"""The start snapshot and the agent's patch, on real git repositories through the real helper
(LocalSandbox runs server.py on the host; the Docker tests run the same scripts in containers)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from deepswe.env.sandbox import SandboxError
from deepswe.env.sandbox.local import LocalSandbox
from deepswe.env.workspace import (
    PatchNotTaken,
    agent_patch,
    diff_script,
    snapshot_script,
    take_snapshot,
)

MOD = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"


def _sh(cwd: Path, cmd: str) -> str:
    done = subprocess.run(["bash", "-c", cmd], cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository as an image leaves it: committed sources, an install's untracked output
    (no .gitignore covers it) and an ignored build folder."""
    repo = tmp_path / "testbed"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "ops.py").write_text(MOD)
    (repo / "logo.bin").write_bytes(b"\x89PNG\x00\x01\x02")
    (repo / ".gitignore").write_text("build/\n")
    _sh(
        repo,
        "git init -q -b main && git add -A && git -c user.name=t -c user.email=t@t commit -qm base",
    )
    (repo / "pkg.egg-info").mkdir()
    (repo / "pkg.egg-info" / "PKG-INFO").write_text("Name: pkg\n")
    (repo / "build").mkdir()
    (repo / "build" / "lib.so").write_bytes(b"\x7fELF")
    return repo


@pytest.fixture
def sandbox(repo: Path):
    with LocalSandbox(workdir=str(repo)) as sb:
        take_snapshot(sb, str(repo))
        yield sb


def _applies_to_a_fresh_start(start: Path, patch: str, end: Path) -> None:
    """`patch` turns a copy of the start into `end` (tracked and untracked files alike)."""
    copy = start.parent / "fresh"
    shutil.copytree(start, copy)
    (copy / "p.diff").write_text(patch)
    _sh(copy, "git apply --verbose p.diff && rm p.diff")
    listing = 'git ls-files -co --exclude-standard | sort -u | while read -r f; do [ -f "$f" ] && sha256sum "$f" || true; done'
    assert _sh(copy, listing) == _sh(end, listing)


def test_the_patch_is_the_agents_change_and_nothing_else(repo, sandbox, tmp_path):
    start = tmp_path / "start"
    shutil.copytree(repo, start)
    (repo / "pkg" / "ops.py").write_text(FIXED)
    (repo / "pkg" / "new.py").write_text("X = 1\n")
    (repo / "logo.bin").write_bytes(b"\x89PNG\x00\x09")
    _sh(repo, "python3 -c 'import py_compile; py_compile.compile(\"pkg/ops.py\")'")
    (repo / "pkg" / "stray.pyc").write_bytes(b"\x00")
    assert list((repo / "pkg" / "__pycache__").glob("*.pyc"))
    patch = agent_patch(sandbox, str(repo))
    files = sorted(line.split()[-1] for line in patch.splitlines() if line.startswith("diff --git"))
    assert files == ["b/logo.bin", "b/pkg/new.py", "b/pkg/ops.py"]
    assert "GIT binary patch" in patch
    shutil.rmtree(repo / "pkg" / "__pycache__")
    (repo / "pkg" / "stray.pyc").unlink()
    _applies_to_a_fresh_start(start, patch, repo)


def test_committing_stashing_or_switching_branches_still_submits_the_change(repo, sandbox):
    (repo / "pkg" / "ops.py").write_text(FIXED)
    _sh(repo, "git -c user.name=a -c user.email=a@a commit -qam fix")
    (repo / "pkg" / "more.py").write_text("Y = 2\n")
    _sh(repo, "git stash -q -u && git stash pop -q && git checkout -q -b work")
    patch = agent_patch(sandbox, str(repo))
    assert "+    return a + b" in patch and "b/pkg/more.py" in patch
    assert "egg-info" not in patch and "build/" not in patch


def test_no_change_is_an_empty_patch_and_git_settings_cannot_bend_it(repo, sandbox):
    assert agent_patch(sandbox, str(repo)) == ""
    _sh(
        repo,
        "git config diff.noprefix true && git config color.ui always && git config core.quotepath true",
    )
    (repo / "pkg" / "ops.py").write_text(FIXED)
    patch = agent_patch(sandbox, str(repo))
    assert patch.startswith("diff --git a/pkg/ops.py b/pkg/ops.py\n") and "\x1b[" not in patch


def test_deleted_and_renamed_files_round_trip(repo, sandbox, tmp_path):
    start = tmp_path / "start"
    shutil.copytree(repo, start)
    _sh(repo, "git mv pkg/ops.py pkg/core.py && rm -r pkg.egg-info")
    patch = agent_patch(sandbox, str(repo))
    assert "rename" not in patch and "deleted file mode" in patch
    _applies_to_a_fresh_start(start, patch, repo)


def test_an_agent_that_removes_the_repository_submits_no_patch(repo, sandbox):
    shutil.rmtree(repo / ".git")
    with pytest.raises(PatchNotTaken, match="start snapshot"):
        agent_patch(sandbox, str(repo))
    shutil.rmtree(repo)
    with pytest.raises(PatchNotTaken):
        agent_patch(sandbox, str(repo))


def test_a_workdir_that_is_not_a_repository_cannot_start(tmp_path):
    with LocalSandbox(workdir=str(tmp_path)) as sb, pytest.raises(SandboxError, match="snapshot"):
        take_snapshot(sb, str(tmp_path))


def test_a_same_size_edit_in_the_snapshots_second_is_seen(repo):
    """Regression ("racy git"): the index copies were newer than every file, so git trusted
    stale stat data and missed an edit that kept the file's size and fell in the same second
    (scripted policies edit within milliseconds of the snapshot). It failed 1 run in 5 before
    the copies kept their source's mtime; 30 tries a run here."""
    out = repo.parent / "p.diff"
    for i in range(30):
        _sh(repo, snapshot_script(str(repo)))
        (repo / "pkg" / "ops.py").write_text(FIXED if i % 2 == 0 else MOD)
        _sh(repo, diff_script(str(repo), str(out)))
        assert "+    return a " in out.read_text(), f"edit {i} missed"
