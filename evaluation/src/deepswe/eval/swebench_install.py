"""swebench 4.1.0's install recipe for one (repository, version), translated step for step onto
our Debian images, offline.

swebench builds an environment in this order (harness/test_spec/python.py): `conda create`
with the spec's Python (and its conda package list), `pip install -r` the repository's
requirements file read at environment_setup_commit, ONE `pip install` of the spec's
pip_packages (so their pins replace earlier versions), then in the repository the spec's
pre_install commands, its install command, and `git commit -am` of what they edited. Ours:

| swebench                              | ours (EnvironmentSpec)                                  |
|---------------------------------------|---------------------------------------------------------|
| conda python X.Y                      | 3.9 bullseye, 3.11 bookworm; else a host CPython X.Y     |
| conda's pip, setuptools, wheel        | `pip`: the versions conda's defaults give that Python    |
| conda package list / requirements.txt | `pip_after[0]`: pip requirements                         |
| pip_packages (one call)               | `pip_after[1]`: one more pip call, its pins win          |
| `apt-get install` in pre_install      | `apt`: Debian packages of the base image                 |
| gcc (every swebench image has one)    | `apt` += a compiler, only when the repository has C     |
|                                       | sources or a requirement has no wheel for the Python     |
| pre_install, install, commit          | `install`: the same commands, offline (the image's       |
|                                       | wheelhouse grows with what pip reports missing)          |

environment.yml specs (conda-forge packages that are not on PyPI) and pre_install commands
that download at install time stay unsupported_env.
"""

from __future__ import annotations

import posixpath
import re
import shlex
import subprocess
from pathlib import Path

from deepswe.data.task import Task

# What `conda create python=X.Y` put beside the interpreter from the defaults channel when
# swebench 4.1.0's images were built (late 2023 / 2024); swebench pins setuptools itself in
# pip_packages where it matters.
CONDA_TOOLS: dict[str, list[str]] = {
    "3.5": ["pip==20.3.4", "setuptools==50.3.2", "wheel==0.36.2"],
    "3.6": ["pip==21.2.2", "setuptools==58.0.4", "wheel==0.37.1"],
    "3.7": ["pip==22.3.1", "setuptools==65.6.3", "wheel==0.38.4"],
}
CONDA_TOOLS_DEFAULT = ["pip==23.3.1", "setuptools==68.2.2", "wheel==0.41.2"]
# Unpinned requirements resolve from the index as it stood when SWE-Bench-Verified was released
# and validated (2024-08-13, its FAIL_TO_PASS/PASS_TO_PASS lists checked against environments
# built then): today's releases change outputs tests compare (Pygments' HTML for sphinx).
# $DEEPSWE_SWEBENCH_INDEX_DATE overrides it ("" for today's index).
INDEX_DATE = "2024-08-13T00:00:00Z"
COMPILER = ["build-essential", "pkg-config"]
DEBIAN_HEADERS = "python3-dev"  # headers of the suite's own Python (a host CPython has its own)
C_SOURCES = re.compile(r"\.(c|cc|cpp|cxx|pyx|f|f90)$")
NOT_BUILT = re.compile(r"(^|/)(tests?|docs?|examples?|benchmarks?|cextern/.*/tests?)/")
INLINE_COMMENT = re.compile(r"(^|\s)#.*$")
APT_INSTALL = re.compile(r"apt-get\s+install\s+(?P<args>[^;&|]+)")
SETUP_COMMIT = "git -c user.name=deepswe -c user.email=deepswe@localhost commit --allow-empty -qam 'environment setup'"


class UnsupportedEnv(Exception):
    """No environment of ours serves this instance; the message says why."""


class SwebenchEnvError(ValueError):
    """The instance cannot be mapped (missing mirror file, unknown repo/version)."""


def _git_show(repo_dir: Path, commit: str, path: str) -> str | None:
    res = subprocess.run(
        ["git", "-C", str(repo_dir), "show", f"{commit}:{path}"], capture_output=True, text=True
    )
    return res.stdout if res.returncode == 0 else None


def _keep(line: str) -> bool:
    # swebench's get_requirements_by_commit drops these lines (editable self, comments, extras)
    s = line.strip()
    return bool(s) and not any(s.startswith(x) for x in ("-e .", "#", ".[test"))


def requirements_from_mirror(task: Task, repo_dir: Path) -> list[str]:
    """The requirements file swebench would fetch from GitHub, read from the local clone at
    environment_setup_commit: `-r` includes first (one level, `../` resolved as the URL
    library does), then the file's own lines, swebench's dropped lines dropped."""
    from swebench.harness.constants import MAP_REPO_TO_REQS_PATHS
    from swebench.harness.test_spec.python import clean_requirements

    commit = task.environment_setup_commit or task.base_commit
    for req_path in MAP_REPO_TO_REQS_PATHS.get(task.repo, []):
        text = _git_show(repo_dir, commit, req_path)
        if text is not None:
            break
    else:
        raise SwebenchEnvError(
            f"{task.instance_id}: none of {MAP_REPO_TO_REQS_PATHS.get(task.repo)} exists at "
            f"{commit} in {repo_dir}"
        )
    folder = posixpath.dirname(req_path)
    included: list[str] = []
    own: list[str] = []
    for line in text.splitlines():
        if line.strip().startswith("-r"):
            inc = posixpath.normpath(posixpath.join(folder, line.strip()[2:].strip()))
            sub = _git_show(repo_dir, commit, inc) or ""
            included += [x for x in sub.splitlines() if _keep(x)]
        elif _keep(line):
            own.append(line)
    lines = included + own
    cleaned = clean_requirements("\n".join(lines)).splitlines()
    # swebench hands pip a file, where " # comment" ends a line; we pass each line as an
    # argument, so the comment is cut here as pip's requirements-file parser would.
    return [req for x in cleaned if (req := INLINE_COMMENT.sub("", x).strip())]


def conda_to_pip(packages: str) -> list[str]:
    """A conda package list ("numpy scipy 'cython=0.29'") as pip requirements."""
    out = []
    for spec in shlex.split(packages):
        name, op, ver = spec.partition("=")
        out.append(spec if not op or ver.startswith("=") else f"{name}=={ver}")
    return out


def requirement_steps(task: Task, specs: dict, repo_dir: Path | None) -> list[list[str]]:
    """The pip calls after the tools, in swebench's order: the requirements (file or conda
    list), then pip_packages. Empty steps are left out."""
    pkgs = specs.get("packages", "")
    if pkgs == "environment.yml":
        raise UnsupportedEnv(
            f"{task.instance_id}: its environment is a conda environment.yml (conda-forge "
            "packages that PyPI does not have)"
        )
    if pkgs == "requirements.txt":
        if repo_dir is None:
            raise SwebenchEnvError(
                f"{task.instance_id}: reading requirements.txt needs --repo-mirror with "
                f"{task.repo.replace('/', '__')}"
            )
        first = requirements_from_mirror(task, repo_dir)
    else:
        first = conda_to_pip(pkgs) if pkgs else []
    return [step for step in (first, list(specs.get("pip_packages", []))) if step]


def apt_and_commands(task: Task, specs: dict) -> tuple[list[str], list[str]]:
    """(Debian packages, remaining pre_install commands): `apt-get install` becomes packages
    of the base image (containers have no network); `apt-get update` lines go away."""
    apt: list[str] = []
    commands: list[str] = []
    for cmd in specs.get("pre_install", []):
        if re.search(r"\b(wget|curl)\b", cmd):
            raise UnsupportedEnv(f"{task.instance_id}: its pre_install downloads: {cmd[:120]}")
        found = APT_INSTALL.search(cmd)
        if found:
            apt += [a for a in found.group("args").split() if not a.startswith("-")]
            continue
        if re.fullmatch(r"\s*apt-get\s+update\s*", cmd):
            continue
        commands.append(cmd)
    text = " ".join([*specs.get("pre_install", []), *specs.get("eval_commands", [])])
    if "locale-gen" in text or "en_US.UTF-8" in text:
        apt.append("locales")
    return sorted(set(apt)), commands


def has_c_sources(repo_dir: Path | None, commit: str) -> bool:
    """Whether the repository builds compiled extensions (C/C++/Cython/Fortran sources outside
    tests, docs and examples)."""
    if repo_dir is None:
        return False
    res = subprocess.run(
        ["git", "-C", str(repo_dir), "ls-tree", "-r", "--name-only", commit],
        capture_output=True,
        text=True,
    )
    return any(C_SOURCES.search(p) and not NOT_BUILT.search(p) for p in res.stdout.splitlines())


def index_date() -> str | None:
    import os

    return os.environ.get("DEEPSWE_SWEBENCH_INDEX_DATE", INDEX_DATE) or None


def conda_tools(python: str) -> list[str]:
    return list(CONDA_TOOLS.get(python, CONDA_TOOLS_DEFAULT))


__all__ = [
    "COMPILER",
    "SETUP_COMMIT",
    "SwebenchEnvError",
    "UnsupportedEnv",
    "apt_and_commands",
    "conda_tools",
    "conda_to_pip",
    "has_c_sources",
    "index_date",
    "requirement_steps",
    "requirements_from_mirror",
]
