"""The repository's past as a shared layer, so a task image adds only its own year of history.

A task image holds /testbed with its whole history up to base_commit (versioning tools and
agents read it). For a repository like Django that is ~300 MB of git objects in every task
image. Instead, the objects reachable from a *cut* commit are packed once into a history image
between the environment image and the task images:

    deepswe/env:<hash>  ->  deepswe/history:<hash>  ->  deepswe/task:<hash>
                            /testbed/.git/objects/pack/pack-<A>   (history up to the cut)
                                                       /testbed: worktree, refs, pack-<B>
                                                       (objects after the cut, up to base)

The cut is the last first-parent ancestor of base_commit committed before 1 January of
base_commit's year, so the tasks of one repository and year share one history image (Verified's
Django rows span 2015-2023: a handful of history images instead of ~230 copies). The cut comes
before base_commit, so the layer holds nothing a policy could not already see. Without such an
ancestor (a young repository, swe-mini's one-commit repositories) the task image holds all of
its history, as before. The split changes layers only: /testbed is the same repository.

A source that lacks objects (a partial clone, a snapshot missing old blobs, as fetched
numpy, orange3 and matplotlib were) keeps the history above the deepest first-parent ancestor
from which every object is present, as a shallow repository (`cut_incomplete_history`); the
build log says where, and the task image carries it as the label `deepswe.history_cut`.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from deepswe.env.images.base import ImageBuildError


def _git(repo: Path, *args: str, stdin: str | None = None) -> str:
    res = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, input=stdin
    )
    if res.returncode != 0:
        raise ImageBuildError(f"git {' '.join(args)} failed in {repo}: {res.stderr.strip()}")
    return res.stdout


def _missing(repo: Path) -> list[str]:
    """Objects HEAD's history reaches that the repository lacks (a partial or damaged clone)."""
    out = _git(repo, "rev-list", "--objects", "--missing=print", "HEAD")
    return [line[1:] for line in out.splitlines() if line.startswith("?")]


def base_tree_gap(repo: Path, commit: str) -> str | None:
    """An object of `commit`'s own tree that `repo` lacks, or None when the tree is whole (or
    `commit` is not there: the callers' commit checks say that). No row on such a base can be
    built from this clone, whatever is cut: the recipes refuse it before any build (envs lists
    it), naming the object. Never fetches (--missing=print turns a promisor's lazy fetch off)."""
    res = subprocess.run(
        ["git", "-C", str(repo), "rev-list", "--objects", "--missing=print", "--no-walk", commit],
        capture_output=True,
        text=True,
    )
    if res.returncode != 0:
        return None
    return next((ln[1:] for ln in res.stdout.splitlines() if ln.startswith("?")), None)


def lacks_base_tree(repo: Path, commit: str) -> str | None:
    """The refusal's words for a clone missing part of `commit`'s tree, or None."""
    gap = base_tree_gap(repo, commit)
    if gap is None:
        return None
    return (
        f"the clone at {repo} lacks objects of the base commit's own tree (e.g. {gap}); "
        "fetch them into it (git fetch --refetch) or point the mirror at a complete clone"
    )


def _shallow_at(repo: Path, commit: str, before: str | None) -> None:
    """Make `commit` a root of HEAD's history: .git/shallow lists every kept commit (reachable
    from HEAD but not from `commit`'s parents) that has a parent outside the kept ones, plus the
    roots the clone already had (`before`: its .git/shallow, None when it was complete)."""
    shallow = repo / ".git" / "shallow"
    if before is None:
        shallow.unlink(missing_ok=True)
    else:
        shallow.write_text(before)
    parents = _git(repo, "rev-list", "--parents", "-n", "1", commit).split()[1:]
    rows = _git(repo, "rev-list", "--parents", "HEAD", "--not", *parents).splitlines()
    kept = {row.split()[0] for row in rows}
    roots = {c for c, *ps in map(str.split, rows) if any(p not in kept for p in ps)}
    roots |= {c for c in (before or "").split() if c in kept}
    shallow.write_text("".join(f"{c}\n" for c in sorted(roots)))


def cut_incomplete_history(repo: Path) -> tuple[str, int] | None:
    """When HEAD's history reaches objects `repo` lacks (a partial clone, a snapshot missing old
    blobs), keep only the history above the deepest first-parent ancestor from which every
    object is present: `repo` is made shallow there (the tags beyond it are no longer merged).
    Returns (that commit, how many first-parent commits were kept), or None when nothing is
    missing. ImageBuildError when HEAD's own tree is incomplete."""
    missing = _missing(repo)
    if not missing:
        return None
    chain = _git(repo, "rev-list", "--first-parent", "HEAD").split()
    shallow = repo / ".git" / "shallow"
    before = shallow.read_text() if shallow.is_file() else None

    def complete(depth: int) -> bool:
        _shallow_at(repo, chain[depth], before)
        return not _missing(repo)

    if not complete(0):
        if before is None:
            shallow.unlink()
        else:
            shallow.write_text(before)
        raise ImageBuildError(
            f"the repository lacks objects of its base commit's own tree, e.g. {missing[0]}"
        )
    good, bad = 0, len(chain)  # complete(good) holds; every depth >= bad is incomplete
    while bad - good > 1:
        mid = (good + bad) // 2
        good, bad = (mid, bad) if complete(mid) else (good, mid)
    _shallow_at(repo, chain[good], before)
    return chain[good], good + 1


def history_cut(repo: Path) -> str | None:
    """The cut for HEAD of `repo` (see the module doc), or None when there is none."""
    year = _git(repo, "show", "-s", "--format=%cd", "--date=format:%Y", "HEAD").strip()
    cut = _git(repo, "rev-list", "-1", "--first-parent", f"--before={year}-01-01T00:00:00Z", "HEAD")
    return cut.strip() or None


def tags_merged(repo: Path, commit: str) -> list[str]:
    return sorted(_git(repo, "tag", "--merged", commit).split())


def split_history(
    repo: Path, cut: str, objects_dir: Path, below: tuple[str, Path] | None = None
) -> None:
    """Move the objects reachable from `cut` (and the tags it contains) out of `repo` into one
    pack under `objects_dir`/pack; `repo` keeps one pack of the rest. Together they are `repo`
    again, which is checked before returning. `below`: an earlier split of `repo` (its cut,
    its objects folder), whose objects this pack leaves out (the tree image's pack between the
    history's and the task's, images/worktree.py)."""
    info = repo / ".git" / "objects" / "info"
    info.mkdir(exist_ok=True)
    lower = [] if below is None else [below[1].resolve()]
    if lower:  # the earlier split's objects, which this pack's walk reads but leaves out
        (info / "alternates").write_text(f"{lower[0]}\n")
    try:
        under = [] if below is None else [below[0], *_tags(repo, below[0])]
        _split(repo, [cut, *_tags(repo, cut)], under, objects_dir)
        # The packs together must hold everything HEAD and the kept tags reach.
        (info / "alternates").write_text("".join(f"{d}\n" for d in [*lower, objects_dir.resolve()]))
        _git(repo, "fsck", "--connectivity-only", "--no-dangling", "--no-progress")
    finally:
        (info / "alternates").unlink(missing_ok=True)


def _tags(repo: Path, commit: str) -> list[str]:
    return [f"refs/tags/{t}" for t in tags_merged(repo, commit)]


def _split(repo: Path, before: list[str], under: list[str], objects_dir: Path) -> None:
    after = ["HEAD", *_tags(repo, "HEAD")]
    git_dir = repo / ".git"
    own = git_dir / "own-pack"
    (objects_dir / "pack").mkdir(parents=True, exist_ok=True)
    own.mkdir()
    out = str(objects_dir / "pack" / "pack")
    not_under = ["--not", *under] if under else []
    _git(repo, "pack-objects", "-q", "--revs", out, stdin="\n".join([*before, *not_under]))
    _git(
        repo,
        "pack-objects",
        "-q",
        "--revs",
        str(own / "pack"),
        stdin="\n".join([*after, "--not", *before]),
    )
    shutil.rmtree(git_dir / "objects" / "pack")
    own.rename(git_dir / "objects" / "pack")
    info = git_dir / "objects" / "info"
    for graph in (info / "commit-graph", info / "commit-graphs"):  # indexes of the old pack
        if graph.is_dir():
            shutil.rmtree(graph)
        else:
            graph.unlink(missing_ok=True)
