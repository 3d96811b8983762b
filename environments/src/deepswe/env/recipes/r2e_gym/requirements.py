"""A repository's requirement files, read from its clone at a commit, as pip arguments.

R2E-Gym's install scripts run `uv pip install -r FILE` inside the repository; our images
install their pip steps offline before the repository is copied in, so the files are read on
the host, at the row's base commit, and handed over as requirement strings:

- `-r FILE` includes are followed (relative to the including file), `-c FILE` constraints
  collected; other option lines (`-e`, `-i`, `-f`, `--hash`, ...) and comments are dropped,
  continuation lines joined (pip-compile's `--hash` blocks);
- an environment marker is evaluated for the *target* Python (pip on the host would evaluate
  it for the host's): a requirement that does not apply there is left out, one that does
  loses its marker;
- constraints pin the requirements they name (pip's `-c` semantics for direct requirements).

A Makefile's `pip install` lines are read the same way (aiohttp's `make .develop`).
"""

from __future__ import annotations

import posixpath
import re
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from deepswe.env.images.markers import for_target

_COMMENT = re.compile(r"(^|\s)#.*$")
_OPTION_WITH_FILE = {"-r": "r", "--requirement": "r", "-c": "c", "--constraint": "c"}


class RequirementsError(ValueError):
    """A requirement file cannot be read; the message names the file, commit and clone."""


@dataclass
class Requirements:
    """Requirement lines in file order, and constraint lines, each applying to the target."""

    lines: list[str] = field(default_factory=list)
    constraints: list[str] = field(default_factory=list)

    def pinned(self) -> list[str]:
        """`lines`, each replaced by a constraint naming the same project when there is one."""
        pins = {_name(c): c for c in self.constraints if _name(c)}
        return [pins.get(_name(line), line) for line in self.lines]


def git_show(repo_dir: Path, commit: str, path: str) -> str | None:
    """The file at `commit`, or None when it does not exist there."""
    res = subprocess.run(
        ["git", "-C", str(repo_dir), "show", f"{commit}:{path}"], capture_output=True, text=True
    )
    return res.stdout if res.returncode == 0 else None


def _logical_lines(text: str) -> list[str]:
    """Lines with comments cut and `\\`-continuations joined."""
    out, pending = [], ""
    for raw in text.splitlines():
        line = _COMMENT.sub("", raw).rstrip()
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = (pending + line).strip(), ""
        if line:
            out.append(line)
    if pending.strip():
        out.append(pending.strip())
    return out


def _name(requirement: str) -> str:
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    try:
        return canonicalize_name(Requirement(requirement).name)
    except InvalidRequirement:
        return ""


def read_requirements(
    repo_dir: Path, commit: str, path: str, python: str, _seen: frozenset[str] = frozenset()
) -> Requirements | None:
    """The requirements of `path` at `commit` (see the module doc); None if it does not exist."""
    text = git_show(repo_dir, commit, path)
    if text is None:
        return None
    out = Requirements()
    folder = posixpath.dirname(path)
    for line in _logical_lines(text):
        words = line.split()
        kind = _OPTION_WITH_FILE.get(words[0].split("=")[0])
        if kind:
            target = words[0].split("=", 1)[1] if "=" in words[0] else " ".join(words[1:2])
            sub = posixpath.normpath(posixpath.join(folder, target))
            if sub in _seen or sub == path:
                continue
            inner = read_requirements(repo_dir, commit, sub, python, _seen | {path})
            if inner is None:
                raise RequirementsError(f"{path} includes {sub}, absent at {commit} in {repo_dir}")
            if kind == "r":
                out.lines += inner.lines
                out.constraints += inner.constraints
            else:
                out.constraints += inner.lines + inner.constraints
            continue
        if line.startswith("-"):  # -e ., -i URL, -f DIR, --hash ...: nothing to install offline
            continue
        requirement = " ".join(w for w in words if not w.startswith("--hash"))
        kept = for_target(requirement, python)
        if kept:
            out.lines.append(kept)
    return out


def _make_recipes(makefile: str, targets: tuple[str, ...]) -> list[str]:
    """The recipe lines of `targets` in a Makefile's text."""
    lines, current = [], None
    for raw in makefile.splitlines():
        if raw.startswith("\t"):
            if current in targets:
                lines.append(raw.strip().lstrip("@-"))
            continue
        head = re.match(r"^([^\s:=#][^:=]*?)\s*:(?!=)", raw)
        current = head.group(1).strip() if head else (None if raw.strip() else current)
    return lines


def makefile_requirements(
    repo_dir: Path, commit: str, targets: tuple[str, ...], python: str
) -> list[str]:
    """What the `pip install -r A [-c B]` lines of `targets` in the Makefile at `commit`
    install. `-r X.in -c X.txt` (a pip-compile lock of the same stem) installs the lock: the
    closure X.in resolves to under it; otherwise A's lines, pinned by B where B names them."""
    text = git_show(repo_dir, commit, "Makefile")
    if text is None:
        return []
    out: list[str] = []
    for line in _make_recipes(text, targets):
        if not re.search(r"\bpip\s+install\b", line):
            continue
        words = shlex.split(line, comments=True)
        files = {"r": [], "c": []}
        for flag, value in zip(words, words[1:], strict=False):
            if flag in _OPTION_WITH_FILE:
                files[_OPTION_WITH_FILE[flag]].append(value)
        locks = {posixpath.splitext(c)[0]: c for c in files["c"]}
        for req_file in files["r"]:
            lock = locks.get(posixpath.splitext(req_file)[0])
            found = read_requirements(repo_dir, commit, lock or req_file, python)
            if found is None:
                continue
            for c in files["c"]:
                if c != lock:
                    more = read_requirements(repo_dir, commit, c, python)
                    found.constraints += more.lines if more else []
            out += [r for r in found.pinned() if r not in out]
    return out


__all__ = [
    "Requirements",
    "RequirementsError",
    "for_target",
    "git_show",
    "makefile_requirements",
    "read_requirements",
]
