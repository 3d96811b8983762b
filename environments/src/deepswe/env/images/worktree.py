"""A working tree shared by the tasks of one quarter, so a task layer holds only what it changes.

Each task layer used to COPY the whole checkout of base_commit into /testbed: Django's ~42 MB,
sympy's ~35 MB, in every one of ~230 and ~75 task images. Instead a *tree* image between the
history image and the task images holds the checkout of a *reference* commit, and a task layer
adds only the paths `git diff-tree <reference> <base_commit>` names, after removing the paths
that base_commit no longer has:

    deepswe/history:<hash>  ->  deepswe/tree:<hash>  ->  deepswe/task:<hash>
                                /testbed at reference     /testbed/.git, the changed paths,
                                (its files, and a pack    the removed ones deleted, a pack
                                of the objects after      of the objects after reference
                                the cut up to it)

The reference is the last first-parent ancestor of base_commit committed before the first day
of base_commit's quarter (Verified's Django rows: 21 references; the year's cut would leave
twice the changed bytes per task, a month's more tree images than it saves, measured on
verified.jsonl's trees). It comes before base_commit, so the tree layer holds nothing a policy
could not already see; its files come with no index, refs or HEAD, and its pack holds what
reference reaches (the history's year after the cut, up to the quarter; ~8 MB of Django's), so
each task's own pack starts at reference. The task's .git (HEAD, refs, index) is the one the
whole checkout had, its objects the same across the three packs. Overlayfs copies a file whole into the upper layer only when
it is written; the task layer never writes an unchanged path, and `git update-index --refresh`
reads them without writing. So /testbed is the same repository, file for file, as a checkout of
base_commit: same HEAD, index, refs and objects, same paths and bytes.

Where the same blob could check out to other bytes (a .gitattributes changed between the two
commits) every path of base_commit goes into the task layer, as before. A submodule's folder
(astropy_helpers) is always the task's own. An install command that rewrites every source
(a compile writes new files beside them; it rewrites none) still writes into the task layer:
this shares the checkout, not what an install adds.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

from deepswe.env.images.base import ImageBuildError, Log
from deepswe.env.images.engine import docker_build, image_exists

# 1: the reference is the last first-parent ancestor before base_commit's quarter. 2: with a
# pack of the objects after the history cut up to the reference.
TREE_LAYOUT = "2"
GONE = "testbed.gone"  # NUL-separated paths the task layer removes from the tree layer's
GONE_IN_IMAGE = "/tmp/deepswe-gone"
BACKDATE_S = 3  # what images/task.py's racy-clean check waits out (RACY_S + 1)


def _git(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    res = subprocess.run(
        ["git", "-C", str(repo), *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )
    if res.returncode != 0:
        raise ImageBuildError(f"git {' '.join(args)} failed in {repo}: {res.stderr.strip()}")
    return res.stdout


def quarter_start(year: int, month: int) -> str:
    """The first instant (UTC) of the quarter holding `month` of `year`, as git's --before
    reads it."""
    return f"{year}-{(month - 1) // 3 * 3 + 1:02d}-01T00:00:00Z"


def reference_commit(repo: Path) -> str | None:
    """The reference for HEAD of `repo` (see the module doc), or None when HEAD has no
    first-parent ancestor before its quarter began."""
    year, month = _git(repo, "show", "-s", "--format=%cd", "--date=format:%Y %m", "HEAD").split()
    before = quarter_start(int(year), int(month))
    ref = _git(repo, "rev-list", "-1", "--first-parent", f"--before={before}", "HEAD").strip()
    return ref or None


def _paths(repo: Path, commit: str) -> list[str]:
    return [p for p in _git(repo, "ls-tree", "-r", "-z", "--name-only", commit).split("\0") if p]


def _dirs(paths: list[str]) -> set[str]:
    out = set()
    for path in paths:
        parts = path.split("/")[:-1]
        out.update("/".join(parts[: i + 1]) for i in range(len(parts)))
    return out


def _gitlinks(repo: Path, commit: str) -> list[str]:
    rows = _git(repo, "ls-tree", "-r", "-z", commit).split("\0")
    return [row.split("\t", 1)[1] for row in rows if row.startswith("160000 ")]


def tree_delta(repo: Path, ref: str) -> tuple[list[str], list[str]]:
    """(paths the task layer writes, paths it removes) for HEAD of `repo` over `ref`'s tree.
    Written: what differs (content, mode, type), every submodule folder, or every path when a
    .gitattributes differs. Removed: paths `ref` has and HEAD has not (files, then the folders
    left empty, as `git checkout` removes them)."""
    out = _git(repo, "diff-tree", "-r", "-z", "--no-renames", "--name-status", ref, "HEAD")
    fields = [f for f in out.split("\0") if f]
    changes = list(zip(fields[0::2], fields[1::2], strict=True))
    written = sorted({p for s, p in changes if s != "D"} | set(_gitlinks(repo, "HEAD")))
    removed = [p for s, p in changes if s == "D"]
    if any(p.rsplit("/", 1)[-1] == ".gitattributes" for _, p in changes):
        written = _paths(repo, "HEAD")  # the same blob may check out to other bytes
    head = _paths(repo, "HEAD")
    removed += sorted(_dirs(_paths(repo, ref)) - _dirs(head), key=lambda d: -d.count("/"))
    return written, removed


def check_out_tree(repo: Path, commit: str, dest: Path) -> None:
    """Write `commit`'s tree into `dest` as `git checkout` writes it (attributes and filters
    of `repo`), with no .git and without touching `repo`'s index."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    index = dest.parent / f"{dest.name}.index"
    env = {"GIT_INDEX_FILE": str(index.resolve())}
    _git(repo, "read-tree", commit, env=env)
    _git(repo, "checkout-index", "-a", "-f", f"--prefix={dest.resolve()}/", env=env)
    index.unlink()


def date_back(tree: Path, seconds: int = BACKDATE_S) -> None:
    """Set the mtime of every file under `tree` but .git's `seconds` into the past (symlinks
    themselves), so the image's index refresh need not wait out a racily clean second."""
    then = time.time() - seconds
    for root, dirs, files in os.walk(tree):
        if Path(root) == tree:
            dirs[:] = [d for d in dirs if d != ".git"]
        for name in files:
            os.utime(Path(root) / name, (then, then), follow_symlinks=False)


def ensure_tree_image(start: str, ref: str, folder: Path, log: Log) -> str:
    """The tree image of `ref` on `start` (the history or env image), built if missing from
    `folder`/tree, which check_out_tree filled before the history split took `ref`'s objects,
    and `folder`/objects, the pack of what `ref` reaches beyond the history image's cut."""
    key = hashlib.sha256(json.dumps([TREE_LAYOUT, start, ref]).encode()).hexdigest()[:16]
    tag = f"deepswe/tree:{key}"
    if image_exists(tag):
        return tag
    log(f"building {tag} (the working tree at {ref[:12]})")
    date_back(folder / "tree")
    dockerfile = f"FROM {start}\nCOPY tree /testbed/\n"
    if (folder / "objects").is_dir():  # the history from the cut up to ref (history.py)
        dockerfile += "COPY objects/pack /testbed/.git/objects/pack/\n"
    failed = docker_build(folder, dockerfile, tag, {"deepswe.kind": "tree"}, log)
    if failed:
        raise ImageBuildError(f"{tag}: {failed[-2000:]}")
    return tag


def delta_context(checkout: Path, written: list[str], removed: list[str], ctx: Path) -> list[str]:
    """Move into `ctx`/testbed the .git of `checkout` and the `written` paths (mode, symlinks and
    mtime kept), write the `removed` list beside it, and return the Dockerfile lines that put
    them over the tree image's /testbed: removals first (a file may become a folder)."""
    dest = ctx / "testbed"
    dest.mkdir()
    (checkout / ".git").rename(dest / ".git")
    for path in written:
        (dest / path).parent.mkdir(parents=True, exist_ok=True)
        if os.path.lexists(checkout / path):  # an uninitialised submodule may have no folder
            os.rename(checkout / path, dest / path)
    shutil.rmtree(checkout)
    lines = []
    if removed:
        (ctx / GONE).write_bytes(b"".join(f"{p}\0".encode() for p in removed))
        lines += [
            f"COPY {GONE} {GONE_IN_IMAGE}",
            f"RUN cd /testbed && xargs -0 -r rm -rf -- < {GONE_IN_IMAGE} && rm {GONE_IN_IMAGE}",
        ]
    return [*lines, "COPY testbed /testbed"]


__all__ = [
    "TREE_LAYOUT",
    "check_out_tree",
    "date_back",
    "delta_context",
    "ensure_tree_image",
    "quarter_start",
    "reference_commit",
    "tree_delta",
]
