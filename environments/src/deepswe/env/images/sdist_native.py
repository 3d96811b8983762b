"""An sdist with no wheel for the target, built on the host by the image's own interpreter, with
the build tools of the sdist's own time.

When the image runs a host CPython (EnvironmentSpec.python, hostpython.py), a wheel that
interpreter builds on the host is the wheel the image needs. Old sdists build neither under the
host's Python nor with today's tools: MarkupSafe 1.0 (2017, astropy 1.3's pin) imports
setuptools' `Feature`, gone since setuptools 46 (2020); numpy 1.19.2's sources fail to cythonize
with Cython 3. So, for one requirement:

1. its sdist is picked from the index's JSON listing (PEP 691, upload times from PEP 700): the
   newest release the requirement allows whose Requires-Python admits the target, not yanked,
   uploaded before the index date when there is one. Nothing is built to pick it (pip's
   `download` would prepare its metadata with today's setuptools, which is what fails);
2. its build requirements (pyproject.toml's `[build-system]`, else setuptools and wheel) are
   downloaded as wheels for the target by the host's pip, from the index as it stood when the
   sdist was uploaded, or when the target Python came out if that is later (a 2017 setuptools
   predates Python 3.9);
3. a venv of the target interpreter gets them and a pip that runs there (the newest release whose
   Requires-Python admits the target, installed from its wheel), and builds the sdist offline,
   without build isolation: an sdist without pyproject.toml builds as its time built it.

Each wheel built is kept under $DEEPSWE_CACHE/native-builds, named by the sdist's hash and the
interpreter: images whose steps resolve under other constraints (R2E-Gym rows' pins) reuse it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import InvalidSdistFilename, canonicalize_name, parse_sdist_filename
from packaging.version import Version

from deepswe.env.images.markers import for_target
from deepswe.env.images.pip_runner import resolver_python
from deepswe.env.images.recipe import cache_root
from deepswe.env.images.sdist_fallback import (
    PIP_TIMEOUT_S,
    WheelDownloadError,
    requires_python_version,
    sdist_file,
    tail,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

PYPI_SIMPLE = "https://pypi.org/simple/"
JSON_ACCEPT = "application/vnd.pypi.simple.v1+json"
# What pip assumes for a project without [build-system] (PEP 518), without its lower bound:
# an sdist older than setuptools 40.8 built with the setuptools of its day.
DEFAULT_BUILD_REQUIRES = ("setuptools", "wheel")
# First releases (python.org, PEP 494/537/569/596/619/664/693/719): no tool older than the
# interpreter it builds for.
PYTHON_RELEASED = {
    "3.5": "2015-09-13",
    "3.6": "2016-12-23",
    "3.7": "2018-06-27",
    "3.8": "2019-10-14",
    "3.9": "2020-10-05",
    "3.10": "2021-10-04",
    "3.11": "2022-10-24",
    "3.12": "2023-10-02",
    "3.13": "2024-10-07",
}


class NativeBuildUnavailable(LookupError):
    """This way cannot serve the requirement (no JSON listing, no such sdist); the caller falls
    back to its other ways."""


@dataclass(frozen=True)
class IndexFile:
    filename: str
    url: str
    sha256: str | None
    requires_python: str | None
    yanked: bool
    upload_time: str | None


def _index_url() -> str:
    return os.environ.get("PIP_INDEX_URL") or PYPI_SIMPLE


def index_files(name: str) -> list[IndexFile]:
    """The files the index lists for project `name` (PEP 691 JSON)."""
    base = _index_url().rstrip("/") + "/"
    url = f"{base}{canonicalize_name(name)}/"
    req = urllib.request.Request(url, headers={"Accept": JSON_ACCEPT})
    try:
        with urllib.request.urlopen(req, timeout=60) as res:
            if JSON_ACCEPT not in res.headers.get("Content-Type", ""):
                raise NativeBuildUnavailable(f"{base} gives no JSON listing (PEP 691)")
            data = json.load(res)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise NativeBuildUnavailable(f"cannot list {name} at {base}: {exc}") from None
    return [
        IndexFile(
            filename=f["filename"],
            url=urllib.parse.urljoin(url, f["url"]),
            sha256=(f.get("hashes") or {}).get("sha256"),
            requires_python=f.get("requires-python"),
            yanked=bool(f.get("yanked")),
            upload_time=f.get("upload-time"),
        )
        for f in data.get("files", [])
    ]


def _admits(requires_python: str | None, target: str) -> bool:
    try:
        return not requires_python or SpecifierSet(requires_python).contains(target, True)
    except InvalidSpecifier:
        return True  # pip ignores an unreadable Requires-Python too


def pick_sdist(
    files: list[IndexFile], wanted: Requirement, python_version: str, before: str | None
) -> IndexFile:
    """The sdist pip would pick for `wanted` on the target, from the listing alone."""
    target = requires_python_version(python_version)
    found: dict[Version, IndexFile] = {}
    for f in files:
        if not f.filename.endswith((".tar.gz", ".zip")) or f.yanked:
            continue
        try:
            name, version = parse_sdist_filename(f.filename)
        except InvalidSdistFilename:
            continue
        if name != canonicalize_name(wanted.name) or not _admits(f.requires_python, target):
            continue
        if not before or (f.upload_time or "") <= before:
            found[version] = f
    # packaging's filter is pip's rule: pre-releases only when no final release matches
    allowed = list(wanted.specifier.filter(found))
    if not allowed:
        raise NativeBuildUnavailable(f"no sdist of {wanted} for Python {python_version}")
    return found[max(allowed)]


def _fetch(f: IndexFile, dest: Path) -> Path:
    with urllib.request.urlopen(f.url, timeout=PIP_TIMEOUT_S) as res:
        data = res.read()
    if f.sha256 and hashlib.sha256(data).hexdigest() != f.sha256:
        raise WheelDownloadError(f"{f.filename}: sha256 differs from the index's")
    path = dest / f.filename
    path.write_bytes(data)
    return path


def build_requires(sdist: Path) -> list[str]:
    """The sdist's [build-system] requires, else DEFAULT_BUILD_REQUIRES."""
    raw = sdist_file(sdist, "pyproject.toml")
    text = raw.decode() if raw is not None else None
    if text is None:
        return list(DEFAULT_BUILD_REQUIRES)
    requires = tomllib.loads(text).get("build-system", {}).get("requires")
    return list(requires) if requires is not None else list(DEFAULT_BUILD_REQUIRES)


def era(upload_time: str | None, python_version: str) -> str | None:
    """The index date for the build tools: the sdist's upload, or the target's release if later
    (ISO 8601 in UTC, to the second, as pip's --uploaded-prior-to reads it)."""
    released = PYTHON_RELEASED.get(python_version)
    stamps = [s for s in (upload_time, released and f"{released}T00:00:00Z") if s]
    if not stamps:
        return None
    latest = max(stamps)
    return re.sub(r"\.\d+", "", latest[:-1] if latest.endswith("Z") else latest) + "Z"


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


def build_native_wheel(
    wanted: str,
    dest: Path,
    python: str,
    python_version: str,
    platforms: list[str],
    work: Path,
    env: dict[str, str] | None = None,
) -> Path:
    """Build `wanted`'s sdist with the interpreter `python` (the image's, of `python_version`)
    into a wheel in `dest` (module doc); return the wheel."""
    try:
        req = Requirement(wanted)
    except InvalidRequirement:
        raise NativeBuildUnavailable(f"not a requirement: {wanted}") from None
    before = (env or {}).get("PIP_UPLOADED_PRIOR_TO")
    chosen = pick_sdist(index_files(req.name), req, python_version, before)
    built = _built_before(chosen, python)
    if built is not None:  # the same sdist by the same interpreter: one build serves every step
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built, dest / built.name)
        return dest / built.name
    src = work / "sdist"
    src.mkdir(parents=True, exist_ok=True)
    sdist = _fetch(chosen, src)
    tools = [t for r in build_requires(sdist) if (t := for_target(r, python_version))]
    date = era(chosen.upload_time, python_version)
    deps = work / "build-deps"
    args = ["download", "--only-binary=:all:", "--implementation", "cp"]
    args += ["--python-version", requires_python_version(python_version)]
    for tag in platforms:
        args += ["--platform", tag]
    clean = _clean_env(env)
    res = _host_pip(
        [*args, "--dest", str(deps), *tools],
        clean | ({"PIP_UPLOADED_PRIOR_TO": date} if date else {}),
        python_version,
    )
    if res.returncode != 0:
        raise WheelDownloadError(
            f"the build requirements of {sdist.name} ({', '.join(tools)}, as of {date}) have no "
            f"wheels for Python {python_version}:\n{tail(res)}"
        )
    venv = work / "venv"
    pip = pip_for(python_version)
    steps = [
        [python, "-m", "venv", "--without-pip", str(venv)],
        [
            str(venv / "bin" / "python"),
            f"{pip}/pip",
            "install",
            "--no-index",
            "--find-links",
            str(deps),
            str(pip),
            *tools,
        ],
        [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--wheel-dir",
            str(work / "out"),
            str(sdist),
        ],
    ]
    for cmd in steps:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=PIP_TIMEOUT_S, env=clean)
        if res.returncode != 0:
            raise WheelDownloadError(
                f"{sdist.name} did not build with Python {python_version} and the build "
                f"requirements of {date} ({', '.join(tools)}):\n{tail(res)}"
            )
    wheels = sorted((work / "out").glob("*.whl"))
    if not wheels:
        raise WheelDownloadError(f"{sdist.name}: pip wheel wrote no wheel")
    _keep(wheels[0], chosen, python)
    dest.mkdir(parents=True, exist_ok=True)
    out = dest / wheels[0].name
    shutil.move(str(wheels[0]), out)
    return out


def _kept_at(chosen: IndexFile, python: str) -> Path:
    """Where the wheel built from `chosen` by interpreter `python` is kept: the sdist's hash
    and the interpreter's path name it (its own build tools are decided by the sdist alone)."""
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
    "NativeBuildUnavailable",
    "build_native_wheel",
    "build_requires",
    "era",
    "index_files",
    "pick_sdist",
    "pip_for",
]
