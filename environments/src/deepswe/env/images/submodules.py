"""A repository's submodules, checked out from clones in the same mirror folder.

Some rows' builds need a submodule: astropy 1.3 to 3.1 run `git submodule update --init` for
astropy_helpers (ah_bootstrap.py) and stop without it; SWE-bench's images fetch it online.
Here each submodule the base commit records is looked up in the folder that holds the
repository's own clone, under the name that folder uses (`<owner>__<name>`, read from the
submodule's URL: github.com/astropy/astropy-helpers -> astropy__astropy-helpers). When that
clone holds the recorded commit, the submodule is checked out at it, as `git submodule update
--init` leaves one (its git dir absorbed into .git/modules, its remote the recorded URL), so
the build's own update has nothing to fetch; no ref after that commit is kept. Without such a clone the submodule stays
uninitialised, as before; `missing` names what a build may lack.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

DOC_PATHS = ("doc/", "docs/")  # documentation submodules (sphinx themes): no build needs them
_GITHUB = re.compile(r"(?:github\.com[:/])([^/]+)/([^/]+?)(?:\.git)?/?$")


@dataclass(frozen=True)
class Submodule:
    name: str
    path: str
    url: str
    commit: str


def _git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    res = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if check and res.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} in {repo}: {res.stderr.strip()}")
    return res


def recorded(repo: Path, commit: str = "HEAD") -> list[Submodule]:
    """The submodules `commit` records: .gitmodules' entries whose path is a gitlink there."""
    text = _git(repo, "show", f"{commit}:.gitmodules", check=False).stdout
    if not text:
        return []
    found = []
    cfg = ["config", "--blob", f"{commit}:.gitmodules", "--get-regexp", r"^submodule\..*\.path$"]
    for line in _git(repo, *cfg, check=False).stdout.splitlines():
        key, _, path = line.partition(" ")
        name = key[len("submodule.") : -len(".path")]
        url = _git(
            repo, "config", "--blob", f"{commit}:.gitmodules", f"submodule.{name}.url", check=False
        )
        tree = _git(repo, "ls-tree", commit, "--", path).stdout.split()
        if len(tree) >= 3 and tree[1] == "commit":
            found.append(Submodule(name, path, url.stdout.strip(), tree[2]))
    return found


def mirror_name(url: str) -> str | None:
    """`<owner>__<name>` for a GitHub URL, else None."""
    m = _GITHUB.search(url)
    return f"{m.group(1)}__{m.group(2)}" if m else None


def _clone_for(sub: Submodule, mirror: Path) -> Path | None:
    name = mirror_name(sub.url)
    clone = mirror / name if name else None
    if clone is None or not clone.exists():
        return None
    has = _git(clone, "cat-file", "-e", f"{sub.commit}^{{commit}}", check=False)
    return clone if has.returncode == 0 else None


def missing(repo: Path, commit: str, mirror: Path) -> list[str]:
    """What a build of `commit` would lack: each recorded submodule outside the documentation
    (DOC_PATHS: themes no build needs) with no clone in `mirror` holding its commit, said with
    the clone it needs."""
    out = []
    for sub in recorded(repo, commit):
        if not sub.path.startswith(DOC_PATHS) and _clone_for(sub, mirror) is None:
            want = mirror_name(sub.url) or sub.url
            out.append(f"{sub.path} ({sub.commit[:12]} of {sub.url}; a clone at {mirror / want})")
    return out


def check_out(repo: Path, mirror: Path) -> list[str]:
    """Check out, in the work tree `repo`, every recorded submodule whose clone `mirror` holds;
    return a line per submodule saying what was done."""
    lines = []
    for sub in recorded(repo):
        clone = _clone_for(sub, mirror)
        if clone is None:
            lines.append(f"submodule {sub.path}: no clone holding {sub.commit[:12]}; left out")
            continue
        target = repo / sub.path
        if target.exists() and any(target.iterdir()):
            continue
        _git(repo, "submodule", "init", "--", sub.path)
        _git(repo, "clone", "-q", "--no-checkout", str(clone), str(target))
        _git(target, "checkout", "-q", "--detach", sub.commit)
        # nothing after the recorded commit to find, as for the repository itself
        for ref in _git(target, "for-each-ref", "--format=%(refname)").stdout.split():
            _git(target, "update-ref", "--no-deref", "-d", ref)
        _git(target, "remote", "set-url", "origin", sub.url)
        _git(target, "reflog", "expire", "--expire=now", "--all")
        _git(target, "gc", "-q", "--prune=now")
        _git(repo, "submodule", "absorbgitdirs", "--", sub.path)
        lines.append(f"submodule {sub.path}: {sub.commit[:12]} from {clone}")
    return lines


__all__ = ["DOC_PATHS", "Submodule", "check_out", "mirror_name", "missing", "recorded"]
