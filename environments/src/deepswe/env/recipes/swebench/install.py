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
| conda package list / requirements.txt | `pip_after[0]`: pip requirements (conda lists and        |
| / environment.yml                     | environment.yml: swebench_conda, PyPI names, Debian      |
|                                       | packages, conda's last builds for frozen Pythons)       |
| pip_packages (one call)               | `pip_after[1]`: one more pip call, its pins win          |
| `apt-get install` in pre_install      | `apt`: Debian packages of the base image                 |
| gcc (every swebench image has one)    | `apt` += a compiler, only when the repository has C     |
|                                       | sources or a requirement has no wheel for the Python     |
| pre_install (one bash script), install,| `install`: the same commands, offline (the image's       |
| commit                                | wheelhouse grows with what pip reports missing); the     |
|                                       | files they download fetched by the host                  |
|                                       | (swebench_downloads), else unsupported_env               |
"""

from __future__ import annotations

import posixpath
import re
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from deepswe.data.task import SourceFile, Task
from deepswe.env.recipes import UnsupportedEnv
from deepswe.env.recipes.swebench import downloads
from deepswe.env.recipes.swebench.conda import (
    CondaTranslation,
    from_conda_list,
    from_environment_yml,
)

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
# `apt-get install` in swebench's images installs Recommends too; debootstrap's --include (our
# base images) does not. The recommended packages tests use: ImageMagick's Ghostscript (`gs`
# converts matplotlib's PDF and EPS test images to PNG; without it those comparisons skip).
APT_RECOMMENDS: dict[str, list[str]] = {"imagemagick": ["ghostscript"]}
APT_INSTALL = re.compile(r"apt-get\s+install\s+(?P<args>[^;&|]+)")
SETUP_COMMIT = "git -c user.name=deepswe -c user.email=deepswe@localhost commit --allow-empty -qam 'environment setup'"


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


def conda_to_pip(packages: str, python: str = "") -> list[str]:
    """A conda package list ("numpy scipy 'cython=0.29'") as pip requirements (swebench_conda:
    conda's `=X` is X.*, PyPI's names, conda's last builds for `python` when it is frozen)."""
    return [r for step in from_conda_list(packages, python).pip for r in step]


def environment_yml(task: Task, repo_dir: Path) -> str:
    """The repository's conda environment.yml at environment_setup_commit, as swebench reads
    it (its first existing path, swebench's clean-up of yanked pip packages applied)."""
    from swebench.harness.constants import MAP_REPO_TO_ENV_YML_PATHS
    from swebench.harness.test_spec.python import clean_environment_yml

    commit = task.environment_setup_commit or task.base_commit
    for path in MAP_REPO_TO_ENV_YML_PATHS.get(task.repo, []):
        text = _git_show(repo_dir, commit, path)
        if text is not None:
            return clean_environment_yml(text)
    raise SwebenchEnvError(
        f"{task.instance_id}: none of {MAP_REPO_TO_ENV_YML_PATHS.get(task.repo)} exists at "
        f"{commit} in {repo_dir}"
    )


def conda_translation(task: Task, specs: dict, repo_dir: Path | None) -> CondaTranslation | None:
    """The spec's conda packages (a list or environment.yml) as PyPI requirements and Debian
    packages; None when the spec gives a requirements file or nothing."""
    pkgs = specs.get("packages", "")
    python = str(specs.get("python"))
    if pkgs == "environment.yml":
        if repo_dir is None:
            raise SwebenchEnvError(
                f"{task.instance_id}: reading environment.yml needs --repo-mirror with "
                f"{task.repo.replace('/', '__')}"
            )
        return from_environment_yml(environment_yml(task, repo_dir), python)
    if pkgs and pkgs != "requirements.txt":
        return from_conda_list(pkgs, python)
    return None


def requirement_steps(task: Task, specs: dict, repo_dir: Path | None) -> list[list[str]]:
    """The pip calls after the tools, in swebench's order: the requirements (file, conda list,
    or environment.yml's conda packages then its pip section), then pip_packages. Empty steps
    are left out."""
    pkgs = specs.get("packages", "")
    if pkgs == "requirements.txt":
        if repo_dir is None:
            raise SwebenchEnvError(
                f"{task.instance_id}: reading requirements.txt needs --repo-mirror with "
                f"{task.repo.replace('/', '__')}"
            )
        first = [requirements_from_mirror(task, repo_dir)]
    else:
        conda = conda_translation(task, specs, repo_dir)
        first = conda.pip if conda else []
    return [step for step in (*first, list(specs.get("pip_packages", []))) if step]


@dataclass
class PreInstall:
    """swebench's pre_install, translated: Debian packages of the base image, the remaining
    commands (downloads replaced by copies of fetched files), and those files."""

    apt: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    files: list[SourceFile] = field(default_factory=list)


def pre_install(task: Task, specs: dict) -> PreInstall:
    """`apt-get install` lines become packages of the base image (containers have no network),
    `apt-get update` lines go away, downloads of known artefacts become copies of the files the
    host fetched (swebench_downloads); any other download is unsupported_env, naming it."""
    from deepswe.env.images.recipe import mirror

    apt: list[str] = []
    commands: list[str] = []
    for cmd in specs.get("pre_install", []):
        found = APT_INSTALL.search(cmd)
        if found:
            named = [a for a in found.group("args").split() if not a.startswith("-")]
            apt += named + [r for a in named for r in APT_RECOMMENDS.get(a, [])]
            continue
        if re.fullmatch(r"\s*apt-get\s+update\s*", cmd):
            continue
        commands.append(cmd)
    try:
        served = downloads.pre_install(commands, mirror())
    except downloads.UnservedDownload as exc:
        raise UnsupportedEnv(f"{task.instance_id}: {exc}") from None
    text = " ".join([*specs.get("pre_install", []), *specs.get("eval_commands", [])])
    if "locale-gen" in text or "en_US.UTF-8" in text:
        apt.append("locales")
    return PreInstall(sorted(set(apt)), served.commands, served.files)


def apt_and_commands(task: Task, specs: dict) -> tuple[list[str], list[str]]:
    """(Debian packages, remaining pre_install commands) of `pre_install`."""
    plan = pre_install(task, specs)
    return plan.apt, plan.commands


def one_script(commands: list[str]) -> list[str]:
    """swebench runs pre_install as one bash script under `set -euxo pipefail`: variables one
    line sets are read by the next (matplotlib's QHULL_TAR), a failing `grep -q && sed` does
    not stop it. Two or more commands become that one script; one stays as it is."""
    if len(commands) < 2:
        return list(commands)
    # "; ", not newlines: the command becomes one Dockerfile RUN line
    return ["bash -c " + shlex.quote("; ".join(["set -euo pipefail", *commands]))]


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
    "PreInstall",
    "conda_translation",
    "environment_yml",
    "one_script",
    "pre_install",
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
