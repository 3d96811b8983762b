"""An sdist with no wheel for the target, built by the image's own interpreter with the build
tools of the sdist's own time.

The image's interpreter is a host CPython (EnvironmentSpec.python, hostpython.py), which builds
on the host, or Debian's own python3, which builds in a build stage: a container of the image's
base with a toolchain (build_stage.py). Old sdists build neither under the host's Python nor
with today's tools: MarkupSafe 1.0 (2017, astropy 1.3's pin) imports setuptools' `Feature`, gone
since setuptools 46 (2020); numpy 1.19.2 (scikit-learn 1.3's pin on bullseye's 3.9) fails to
cythonize with Cython 3. So, for one requirement:

1. its sdist is picked from the index's JSON listing (sdist_index.py: PEP 691, upload times from
   PEP 700): the newest release the requirement allows whose Requires-Python admits the
   target, not yanked, uploaded before the index date when there is one;
2. its build requirements (pyproject.toml's `[build-system]`, else setuptools and wheel) are
   downloaded as wheels for the target by the host's pip, from the index as it stood when the
   sdist was uploaded, or when the target Python came out if that is later (a 2017 setuptools
   predates Python 3.9); one with no wheel for the target is built first, the same way
   (scipy 1.5.2 builds against numpy==1.17.3, which has no cp39 wheel);
3. a venv of the target interpreter gets them and a pip that runs there (the newest release whose
   Requires-Python admits the target, installed from its wheel), and builds the sdist offline,
   without build isolation: an sdist without pyproject.toml builds as its time built it. A
   stage's wheel is then repaired to carry the stage's libraries it links (build_stage.py).

Each wheel built is kept under $DEEPSWE_CACHE/native-builds, named by the sdist's hash and the
interpreter: images whose steps resolve under other constraints (R2E-Gym rows' pins) reuse it.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Protocol

from packaging.requirements import InvalidRequirement, Requirement

from deepswe.env.images.build_stage import HostInterpreter
from deepswe.env.images.markers import for_target
from deepswe.env.images.pip_runner import resolver_python
from deepswe.env.images.progress import activity
from deepswe.env.images.recipe import cache_root
from deepswe.env.images.sdist_fallback import (
    PIP_TIMEOUT_S,
    WheelDownloadError,
    requires_python_version,
    sdist_file,
    tail,
)
from deepswe.env.images.sdist_index import (
    IndexFile,
    NativeBuildUnavailable,
    era,
    fetch,
    index_files,
    pick_sdist,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

# What pip assumes for a project without [build-system] (PEP 518), without its lower bound:
# an sdist older than setuptools 40.8 built with the setuptools of its day.
DEFAULT_BUILD_REQUIRES = ("setuptools", "wheel")
# A build may take long on two cores (scipy 1.5.2: Fortran, C++); a build tool with no wheel
# is built first, and so on, this deep at most, this many per build.
BUILD_TIMEOUT_S = 3600
MAX_DEPTH = 2
MAX_TOOL_BUILDS = 3
_NO_DIST = re.compile(r"No matching distribution found for (\S+)")


def build_requires(sdist: Path) -> list[str]:
    """The sdist's [build-system] requires, else DEFAULT_BUILD_REQUIRES."""
    raw = sdist_file(sdist, "pyproject.toml")
    text = raw.decode() if raw is not None else None
    if text is None:
        return list(DEFAULT_BUILD_REQUIRES)
    requires = tomllib.loads(text).get("build-system", {}).get("requires")
    return list(requires) if requires is not None else list(DEFAULT_BUILD_REQUIRES)


def _host_pip(
    args: list[str], env: dict[str, str], python_version: str | None = None
) -> subprocess.CompletedProcess:
    """This venv's pip; for a `python_version` target, run as pip_runner runs it, so markers
    are decided for the target (a build tool's `importlib-metadata; python_version < "3.8"`)."""
    pip = resolver_python(python_version) if python_version else [sys.executable, "-m", "pip"]
    cmd = [*pip, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=PIP_TIMEOUT_S, env=env)


def _clean_env(env: dict[str, str] | None) -> dict[str, str]:
    drop = ("PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL", "PIP_UPLOADED_PRIOR_TO", "PYTHONPATH")
    return {k: v for k, v in (env or os.environ).items() if k not in drop} | {
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }


def pip_for(python_version: str) -> Path:
    """The wheel of the newest pip whose Requires-Python admits the target (cached)."""
    folder = cache_root() / "pip-for" / python_version
    found = sorted(folder.glob("pip-*.whl"))
    if found:
        return found[-1]
    tmp = folder.with_name(f".{python_version}.{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    res = _host_pip(
        ["download", "--no-deps", "--only-binary=:all:", "--implementation", "cp"]
        + ["--python-version", requires_python_version(python_version), "--dest", str(tmp), "pip"],
        _clean_env(None),
    )
    if res.returncode != 0:
        raise WheelDownloadError(f"no pip for Python {python_version}:\n{tail(res)}")
    folder.parent.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(tmp, folder)
    return sorted(folder.glob("pip-*.whl"))[-1]


class Interpreter(Protocol):
    """Where the target's interpreter runs (build_stage.py: the host, or a build stage)."""

    python: str  # its path where it runs
    key: str  # names it among the kept builds
    repair_tools: tuple[str, ...]  # what `repair` needs in the build's venv

    def run(
        self, cmd: list[str], env: dict[str, str], timeout: float, work: Path
    ) -> subprocess.CompletedProcess: ...

    def repair(self, wheel: Path, work: Path, env: dict[str, str], timeout: float) -> Path: ...


def build_native_wheel(
    wanted: str,
    dest: Path,
    python: str | Interpreter,
    python_version: str,
    platforms: list[str],
    work: Path,
    env: dict[str, str] | None = None,
    depth: int = 0,
) -> Path:
    """Build `wanted`'s sdist with the target's interpreter `python` (a host CPython's path,
    or where it runs: build_stage.py) of `python_version` into a wheel in `dest` (module doc);
    return the wheel. A build requirement with no wheel for the target is built the same way
    first (`depth` counts how deep)."""
    where = HostInterpreter(python) if isinstance(python, str) else python
    try:
        req = Requirement(wanted)
    except InvalidRequirement:
        raise NativeBuildUnavailable(f"not a requirement: {wanted}") from None
    before = (env or {}).get("PIP_UPLOADED_PRIOR_TO")
    chosen = pick_sdist(index_files(req.name), req, python_version, before)
    built = _built_before(chosen, where.key)
    if built is not None:  # the same sdist by the same interpreter: one build serves every step
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built, dest / built.name)
        return dest / built.name
    work.mkdir(parents=True, exist_ok=True)
    sdist = fetch(chosen, work)
    tools = [t for r in build_requires(sdist) if (t := for_target(r, python_version))]
    date = era(chosen.upload_time, python_version)
    deps = work / "build-deps"
    clean = _clean_env(env)
    _build_tools(tools, deps, date, where, python_version, platforms, env, work, depth)
    pip = Path(shutil.copy2(pip_for(python_version), work))
    venv = work / "venv"
    py = str(venv / "bin" / "python")
    offline = ["--no-index", "--find-links", str(deps)]
    steps = [
        [where.python, "-m", "venv", "--without-pip", str(venv)],
        [py, f"{pip}/pip", "install", *offline, str(pip), *tools],
        [py, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index"]
        + ["--wheel-dir", str(work / "out"), str(sdist)],
    ]
    if where.repair_tools:  # after the build: the sdist's build sees only its own tools
        res = _download(list(where.repair_tools), deps, None, python_version, platforms, env)
        if res.returncode != 0:
            raise WheelDownloadError(f"no wheels of {where.repair_tools} here:\n{tail(res)}")
        steps.append([py, "-m", "pip", "install", *offline, *where.repair_tools])
    at = f"in build stage {where.image}" if hasattr(where, "image") else "on the host"
    names = ["a venv", "its build requirements", "pip wheel", "the repair tools"]
    for k, cmd in enumerate(steps):
        doing = f"building {sdist.name} with Python {python_version} {at}: {names[k]}"
        with activity(doing):  # the build's heartbeat says it (progress.py)
            res = where.run(cmd, clean, BUILD_TIMEOUT_S, work)
        if res.returncode != 0:
            raise WheelDownloadError(
                f"{sdist.name} did not build with Python {python_version} and the build "
                f"requirements of {date} ({', '.join(tools)}):\n{tail(res)}"
            )
    wheels = sorted((work / "out").glob("*.whl"))
    if not wheels:
        raise WheelDownloadError(f"{sdist.name}: pip wheel wrote no wheel")
    with activity(f"repairing {wheels[0].name} {at}"):
        wheel = where.repair(wheels[0], work, clean, BUILD_TIMEOUT_S)
    _keep(wheel, chosen, where.key)
    dest.mkdir(parents=True, exist_ok=True)
    out = dest / wheel.name
    shutil.move(str(wheel), out)
    return out


def _download(
    reqs: list[str],
    deps: Path,
    date: str | None,
    python_version: str,
    platforms: list[str],
    env: dict[str, str] | None,
) -> subprocess.CompletedProcess:
    """`reqs` as wheels for the target into `deps` (wheels already there count), from the
    index as of `date` when there is one."""
    args = ["download", "--only-binary=:all:", "--implementation", "cp"]
    args += ["--python-version", requires_python_version(python_version)]
    for tag in platforms:
        args += ["--platform", tag]
    args += ["--dest", str(deps), "--find-links", str(deps), *reqs]
    dated = {"PIP_UPLOADED_PRIOR_TO": date} if date else {}
    return _host_pip(args, _clean_env(env) | dated, python_version)


def _build_tools(
    tools: list[str],
    deps: Path,
    date: str | None,
    where: Interpreter,
    python_version: str,
    platforms: list[str],
    env: dict[str, str] | None,
    work: Path,
    depth: int,
) -> None:
    """The build requirements as wheels in `deps`, as of `date`; one with no wheel for the
    target (scipy 1.5.2 builds against numpy==1.17.3, which has none for Python 3.9) is
    built from its sdist of that date by the same interpreter, up to MAX_DEPTH deep."""
    deps.mkdir(parents=True, exist_ok=True)
    for round_ in range(MAX_TOOL_BUILDS + 1):
        res = _download(tools, deps, date, python_version, platforms, env)
        if res.returncode == 0:
            return
        missing = _NO_DIST.search(res.stdout + res.stderr)
        if missing is None or depth >= MAX_DEPTH or round_ == MAX_TOOL_BUILDS:
            raise WheelDownloadError(
                f"the build requirements ({', '.join(tools)}, as of {date}) have no wheels "
                f"for Python {python_version}:\n{tail(res)}"
            )
        dated = (env or {}) | ({"PIP_UPLOADED_PRIOR_TO": date} if date else {})
        sub = work / f"tool-{round_}"
        build_native_wheel(
            missing.group(1), deps, where, python_version, platforms, sub, dated, depth + 1
        )
        shutil.rmtree(sub, ignore_errors=True)


def _kept_at(chosen: IndexFile, python: str) -> Path:
    """Where the wheel built from `chosen` by interpreter `python` (an Interpreter's key) is
    kept: the sdist's hash and the interpreter name it (its build tools are decided by the
    sdist alone)."""
    who = hashlib.sha256(f"{chosen.filename}\0{chosen.sha256}\0{python}".encode()).hexdigest()
    return cache_root() / "native-builds" / who[:16]


def _built_before(chosen: IndexFile, python: str) -> Path | None:
    found = sorted(_kept_at(chosen, python).glob("*.whl"))
    return found[0] if found else None


def _keep(wheel: Path, chosen: IndexFile, python: str) -> None:
    """A copy of a fresh build for the next step or image that needs the same sdist (steps
    under other constraints have other wheel caches); written whole or not at all."""
    folder = _kept_at(chosen, python)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{wheel.name}.{os.getpid()}"
    shutil.copy2(wheel, tmp)
    os.replace(tmp, folder / wheel.name)


__all__ = [
    "DEFAULT_BUILD_REQUIRES",
    "IndexFile",
    "Interpreter",
    "NativeBuildUnavailable",
    "build_native_wheel",
    "build_requires",
    "era",
    "index_files",
    "pick_sdist",
    "pip_for",
]
