"""The shared working tree (images/worktree.py): a task layer holds only what its base commit
changes over the tree image's reference, and /testbed is the same repository, file for file, as
the whole checkout each task layer used to copy."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from deepswe.data.task import EnvironmentSpec, HiddenTests, Task, TaskSource, TestSpec
from deepswe.data.toy import git
from deepswe.env.images.task import prepare_repository
from deepswe.env.images.worktree import (
    check_out_tree,
    quarter_start,
    reference_commit,
    tree_delta,
)

BIG = 3_000_000  # a blob no commit after the reference touches: never in a task layer


def _commit_at(repo: Path, date: str, monkeypatch, edit) -> str:
    monkeypatch.setenv("GIT_AUTHOR_DATE", date)
    monkeypatch.setenv("GIT_COMMITTER_DATE", date)
    edit(repo)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", f"at {date}")
    return git(repo, "rev-parse", "HEAD").strip()


def _write(files: dict[str, bytes]):
    def edit(repo: Path) -> None:
        for path, data in files.items():
            (repo / path).parent.mkdir(parents=True, exist_ok=True)
            (repo / path).write_bytes(data)

    return edit


def _reshape(repo: Path) -> None:
    """What a quarter of Django does to a tree, in every kind git records: a folder gone, a
    rename, a file become a folder, an executable bit, a symlink retargeted, a file added."""
    shutil.rmtree(repo / "docs")
    (repo / "pkg" / "old.py").rename(repo / "pkg" / "new.py")
    (repo / "thing").unlink()
    (repo / "thing").mkdir()
    (repo / "thing" / "inner.py").write_text("INNER = 1\n")
    (repo / "tool.sh").chmod(0o755)
    (repo / "link").unlink()
    (repo / "link").symlink_to("pkg/new.py")
    (repo / "pkg" / "sub").mkdir()
    (repo / "pkg" / "sub" / "added.py").write_text("ADDED = 1\n")


def _history(tmp_path: Path, monkeypatch) -> tuple[Path, list[str], str]:
    """A repository of Verified's shape: years of history, two base commits in one quarter
    (2021 Q2) over a reference in the quarter before, and a fix after them. Returns (repo,
    bases, the reference)."""
    repo = tmp_path / "quarterly"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    first = {
        "README": b"x\n",
        "pkg/__init__.py": b"",
        "pkg/big.bin": os.urandom(BIG),
        "pkg/old.py": b"OLD = 1\n",
        "docs/a.txt": b"doc\n",
        "thing": b"a file for now\n",
        "tool.sh": b"#!/bin/sh\necho hi\n",
    }

    def start(r: Path) -> None:
        _write(first)(r)
        (r / "link").symlink_to("README")

    _commit_at(repo, "2019-03-01T00:00:00Z", monkeypatch, start)
    git(repo, "tag", "v1.0")
    _commit_at(repo, "2020-06-01T00:00:00Z", monkeypatch, _write({"pkg/old.py": b"OLD = 2\n"}))
    ref = _commit_at(repo, "2021-02-01T00:00:00Z", monkeypatch, _write({"f.py": b"X = 0\n"}))
    bases = [_commit_at(repo, "2021-05-01T00:00:00Z", monkeypatch, _reshape)]
    bases.append(
        _commit_at(repo, "2021-05-15T00:00:00Z", monkeypatch, _write({"f.py": b"X = 2\n"}))
    )
    _commit_at(repo, "2022-01-02T00:00:00Z", monkeypatch, _write({"f.py": b"FIXED = 1\n"}))
    git(repo, "tag", "v2.0")
    return repo, bases, ref


def _listing(tree: Path) -> dict[str, str]:
    """Every path under `tree` but .git's, with its type, mode and content (or link target)."""
    out = {}
    for root, dirs, files in os.walk(tree):
        if Path(root) == tree:
            dirs[:] = [d for d in dirs if d != ".git"]
        for name in [*dirs, *files]:
            p = Path(root) / name
            rel = str(p.relative_to(tree))
            if p.is_symlink():
                out[rel] = f"link {os.readlink(p)}"
            elif p.is_dir():
                out[rel] = "dir"
            else:
                digest = hashlib.sha256(p.read_bytes()).hexdigest()[:16]
                out[rel] = f"file {oct(p.stat().st_mode & 0o777)} {digest}"
    return out


def test_the_quarter_starts_where_the_reference_is_looked_for():
    assert quarter_start(2021, 5) == "2021-04-01T00:00:00Z"
    assert quarter_start(2021, 1) == "2021-01-01T00:00:00Z"
    assert quarter_start(2023, 12) == "2023-10-01T00:00:00Z"


def test_the_reference_tree_plus_the_delta_is_the_checkout_of_base(tmp_path, monkeypatch):
    """What the task layer's Dockerfile does, done on the host: the reference's tree, the removed
    paths removed, the written ones copied over, gives the whole checkout of base_commit (every
    path, type, mode, byte), and the delta leaves the untouched big blob out."""
    repo, bases, ref = _history(tmp_path, monkeypatch)
    for base in bases:
        checkout = tmp_path / f"checkout-{base[:7]}"
        prepare_repository(str(repo), base, checkout)
        assert reference_commit(checkout) == ref
        written, removed = tree_delta(checkout, ref)
        assert "pkg/big.bin" not in written
        tree = tmp_path / f"tree-{base[:7]}" / "tree"
        check_out_tree(checkout, ref, tree)
        for path in removed:
            p = tree / path
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            elif os.path.lexists(p):
                p.unlink()
        for path in written:
            (tree / path).parent.mkdir(parents=True, exist_ok=True)
            if os.path.lexists(tree / path):  # COPY replaces what is there
                (tree / path).unlink()
            shutil.copy2(checkout / path, tree / path, follow_symlinks=False)
        assert _listing(tree) == _listing(checkout)
    assert set(removed) >= {"docs", "docs/a.txt", "pkg/old.py", "thing"}  # base 2 over ref


def test_a_changed_gitattributes_puts_every_path_in_the_task_layer(tmp_path, monkeypatch):
    """The same blob may check out to other bytes under other attributes (eol, filters): the
    delta then writes every path, as a whole checkout did."""
    repo, _, _ = _history(tmp_path, monkeypatch)
    ref = git(repo, "rev-parse", "HEAD").strip()
    edit = _write({".gitattributes": b"*.py text eol=crlf\n"})
    base = _commit_at(repo, "2022-05-01T00:00:00Z", monkeypatch, edit)
    written, _ = tree_delta(repo, ref)
    assert git(repo, "rev-parse", "HEAD").strip() == base
    assert set(written) == set(git(repo, "ls-files").split())


@pytest.mark.docker
def test_two_tasks_of_a_quarter_share_the_tree_and_testbed_is_the_whole_checkout(
    tmp_path, monkeypatch
):
    """Issue #45's image budget: each task layer held a whole checkout. Two tasks of one quarter
    now share one tree image holding the reference's files; the second task's layer holds what it
    changes, not the big blob; and /testbed is what the whole checkout was: same HEAD on main,
    same refs, same objects reachable, clean `git status`, same paths, modes and bytes."""
    from deepswe.env.images.sizes import layer_sizes
    from deepswe.env.images.task import ensure_task_image
    from deepswe.env.sandbox import SandboxLimits
    from deepswe.env.sandbox.docker import DockerSandbox, client

    repo, bases, ref = _history(tmp_path, monkeypatch)
    spec = EnvironmentSpec(source=str(repo), pip=["iniconfig"])
    tags = []
    for base in bases:
        task = Task(
            instance_id=f"shape__quarterly-{base[:7]}",
            repo="shape/quarterly",
            base_commit=base,
            problem_statement="-",
            source=TaskSource.CUSTOM,
            environment=spec,
            test_spec=TestSpec(command="true", log_parser="pytest"),
            hidden=HiddenTests(),
        )
        tags.append(ensure_task_image(task, log=lambda _: None))
    trees = []
    for tag in tags:
        layer = client().images.get(tag)
        while not any(t.startswith("deepswe/tree:") for t in layer.tags):
            layer = client().images.get(layer.attrs["Parent"])
        trees.append(layer)
    assert trees[0].id == trees[1].id
    for tag in tags:
        assert client().images.get(tag).attrs["Size"] - trees[0].attrs["Size"] < BIG // 3
    # the budget's layers (images/sizes.py) add up to the image, the shared Debian base found
    sizes = layer_sizes(tags[1])
    assert sizes.base.startswith("deepswe/base:") and 0 < sizes.base_mb <= sizes.env_mb
    assert sizes.tree_mb > 0 and sizes.task_mb < sizes.tree_mb
    whole = client().images.get(tags[1]).attrs["Size"] / 1e6
    assert abs(sizes.env_mb + sizes.history_mb + sizes.tree_mb + sizes.task_mb - whole) <= 2
    # the pack up to the reference is the tree image's (the 2021-02 commit), not the task's
    packs = (
        f"for p in /testbed/.git/objects/pack/*.idx; do git show-index < $p | grep -c {ref}; done"
    )
    want = tmp_path / "whole"  # what every task layer copied before the tree image
    prepare_repository(str(repo), bases[1], want)
    listing = (
        "find . -path ./.git -prune -o -mindepth 1 -printf '%y %m %p %l\\n' | LC_ALL=C sort"
        " && find . -path ./.git -prune -o -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum"
    )
    facts = (
        "git fsck --connectivity-only --no-dangling --no-progress 2>&1;"
        " git status --porcelain --ignored; git symbolic-ref HEAD; git rev-parse HEAD;"
        " git for-each-ref; git rev-list --objects --all | LC_ALL=C sort | sha256sum"
    )
    with DockerSandbox(tags[1], SandboxLimits(memory="1g", pids=256)) as sb:
        got = sb.run(f"cd /testbed && {listing} && {facts}", timeout=120)
    assert got.exit_code == 0, got.output
    with DockerSandbox(trees[0].tags[0], SandboxLimits(memory="1g", pids=256)) as sb:
        in_tree = sb.run(packs, timeout=60)
    with DockerSandbox(tags[1], SandboxLimits(memory="1g", pids=256)) as sb:
        in_task = sb.run(packs, timeout=60)
    # history pack, tree pack: the reference once; the task adds a pack without it
    assert sorted(in_tree.stdout.split()) == ["0", "1"], in_tree.output
    assert sorted(in_task.stdout.split()) == ["0", "0", "1"], in_task.output
    local = subprocess.run(
        ["bash", "-c", f"{listing} && {facts}"], cwd=want, capture_output=True, text=True
    )
    assert local.returncode == 0, local.stderr
    assert got.stdout == local.stdout
    assert f"refs/heads/main\n{bases[1]}\n" in got.stdout
