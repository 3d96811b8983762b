"""Wheels for offline sandboxes: download on the host for the image's Python, install inside.

Sandboxes have no network by design, so a task's Python dependencies are fetched on the host
with `pip download` for the *target* interpreter (cp39 on bullseye, cp311 on bookworm) and
platform, cached per requirement set, then copied into the container and installed with
`pip install --no-index --find-links /wheels`.

A requirement with no wheel at all falls back to its sdist, built into a wheel on the host
with `pip wheel`. That is only correct for pure-Python projects (the host's interpreter is
not the target's), so a fallback that yields anything but a `py3-none-any`-style wheel is
refused with an error naming the package, unless the image has a compiler (`sources=True`):
then the sdist itself goes in, and pip builds it inside the image for the image's Python.

Resolution runs under an interpreter of the target's version when the host has one
(`pip_runner.py`); otherwise under the host's, and what markers dropped is added afterwards
(`markers.unmet_for_target`; pip's own marker evaluation is set to the target's Python too,
`pip_runner.py`). An sdist is built by the image's own interpreter with the build tools of its
time instead (`sdist_native.py`): the host's own CPython when the image runs one, else Debian's
in a build stage (`build_stage.py`).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from deepswe.env.images.build_stage import BuildStage, HostInterpreter
from deepswe.env.images.markers import unmet_for_target
from deepswe.env.images.pip_runner import resolver_python
from deepswe.env.images.progress import activity
from deepswe.env.images.recipe import SUITES, cache_root, debian_arch
from deepswe.env.images.sdist_fallback import (
    PIP_TIMEOUT_S,
    STUB_MARK,
    TempDir,
    WheelDownloadError,
    build_pure_wheel,
    matching_requirement,
    requires_python_version,
    tail,
)
from deepswe.env.images.sdist_native import (
    Interpreter,
    NativeBuildUnavailable,
    build_native_wheel,
)

MAX_SDIST_FALLBACKS = 20
# The name, and the version range pip wanted (a transitive pin such as astroid's
# "wrapt<1.13,>=1.11" is not among the requirements the caller gave).
_NO_DIST = re.compile(r"No matching distribution found for ([A-Za-z0-9][A-Za-z0-9._-]*)(\S*)")
# A dependency with no wheel at all can also surface as a resolution conflict (coveralls needs
# docopt, sdist only): pip names it after "Additionally, ...".
_NO_DIST_IN_CONFLICT = re.compile(
    r"no matching distributions available for your environment:\s*\n\s+([A-Za-z0-9][A-Za-z0-9._-]*)()"
)


def manylinux_platforms(
    python_version: str, arch: str | None = None, suite: str | None = None
) -> list[str]:
    """Platform tags whose wheels run on the suite shipping this Python (or on `suite`, for
    an interpreter the suite does not ship), newest first.

    pip does not expand `manylinux_2_X` to older glibc versions by itself (it only expands
    manylinux2014 -> 2010 -> 1), so every tag from the suite's glibc down to 2.17 is listed.
    """
    if suite is not None:
        glibc = SUITES[suite].glibc
    else:
        glibc = next((s.glibc for s in SUITES.values() if s.python == python_version), None)
    if glibc is None:
        known = sorted({s.python for s in SUITES.values()})
        raise ValueError(f"no base image runs python {python_version!r}; known: {known}")
    machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(arch or debian_arch(), arch)
    tags = [f"manylinux_2_{minor}_{machine}" for minor in range(glibc[1], 16, -1)]
    return [*tags, f"manylinux2014_{machine}"]


def download_wheels(
    requirements: Sequence[str],
    dest: Path,
    python_version: str,
    platforms: Sequence[str] | None = None,
    sources: bool = False,
    before: str | None = None,
    native: bool = False,
    constraints: Sequence[str] = (),
    stage: BuildStage | None = None,
) -> list[Path]:
    """Put wheels for `requirements` and all their dependencies into `dest`; return them.

    python_version: the target's, e.g. "3.11", "3.9", "3.6". platforms: pip platform tags,
    default manylinux_platforms(python_version) for this host's architecture. sources: a
    package with no wheel for the target and no pure-Python build goes in as its sdist (the
    image must have a compiler). before: resolve from the index as it stood then (ISO 8601,
    pip's --uploaded-prior-to). native: the image runs the host's CPython of python_version
    (hostpython.py), so an sdist is built by that interpreter, with the build tools of its time
    (sdist_native.py). constraints: `name==version` lines pip resolves under (-c), the
    sdist built for a constrained name being the constrained release. stage: the image runs
    Debian's own interpreter, so an sdist is built by it in a build stage with the build tools
    of its time (build_stage.py); the image must have a compiler (`sources`). Results are cached
    under $DEEPSWE_CACHE/wheels/<hash of the inputs>; a cache hit runs no pip.
    """
    platforms = list(platforms or manylinux_platforms(python_version))
    if native or stage:  # what the image's interpreter builds is tagged linux_<arch>
        platforms.append(f"linux_{platform.machine()}")
    target = requires_python_version(python_version)  # in the key: older entries checked X.Y.0
    parts = [sorted(requirements), target, platforms, sources, before]
    parts += [native] if native or constraints else []  # older keys stay
    parts += [sorted(constraints)] if constraints else []
    parts += [["stage", stage.key]] if stage else []
    key = json.dumps(parts).encode()
    cached = cache_root() / "wheels" / hashlib.sha256(key).hexdigest()[:16]
    cached.parent.mkdir(parents=True, exist_ok=True)
    with (cached.parent / f"{cached.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two processes filling one cache entry would race
        if not (cached / ".complete").exists():
            interpreter = _native_interpreter(python_version) if native else stage
            env = _pip_env(before)
            _fill(
                cached,
                list(requirements),
                python_version,
                platforms,
                sources,
                env,
                interpreter,
                list(constraints),
            )
    dest.mkdir(parents=True, exist_ok=True)
    out = []
    for dist in sorted([*cached.glob("*.whl"), *cached.glob("*.tar.gz"), *cached.glob("*.zip")]):
        shutil.copy2(dist, dest / dist.name)
        out.append(dest / dist.name)
    return out


def _native_interpreter(python_version: str) -> HostInterpreter | None:
    """The host CPython the image runs, or None when there is none here."""
    from deepswe.env.images.hostpython import NoHostPython, host_python

    try:
        return HostInterpreter(str(host_python(python_version) / "bin" / "python3"))
    except NoHostPython:
        return None


def _pip_env(before: str | None) -> dict[str, str] | None:
    """The environment of pip subprocesses: as ours, plus the index date when there is one.

    A date only filters indexes that report upload times (pypi.org does): local find-links
    folders and mirrors without that metadata would slip today's files past it, so with a date
    pip reads no configuration file and no PIP_FIND_LINKS / PIP_EXTRA_INDEX_URL of ours."""
    if not before:
        return None
    env = {
        k: v for k, v in os.environ.items() if k not in ("PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL")
    }
    return {**env, "PIP_CONFIG_FILE": os.devnull, "PIP_UPLOADED_PRIOR_TO": before}


def _fill(
    cached: Path,
    requirements: list[str],
    python_version: str,
    platforms: list[str],
    sources: bool,
    env: dict[str, str] | None,
    native: Interpreter | None = None,
    constraints: list[str] | None = None,
):
    staging = cached.with_name(cached.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    pins = cached.with_name(cached.name + ".constraints.txt")
    if constraints:
        pins.write_text("".join(f"{c}\n" for c in constraints))
    pinned_to = pins if constraints else None
    built: set[str] = set()
    while True:
        res = _pip_download(
            requirements, staging, python_version, platforms, env, constraints=pinned_to
        )
        if res.returncode == 0:
            extra = unmet_for_target(staging, python_version)
            if not extra:
                break
            # pip evaluates markers with the Python it runs under, even under --python-version
            # (pytest's `tomli; python_version < "3.11"` skipped for a 3.9 target). pip_runner
            # runs it so that they are the target's; should its marker shim not take (a pip
            # whose vendored packaging moved), this adds what the target needs and resolves
            # again (at most a few rounds).
            if len(requirements) > 500:
                raise WheelDownloadError(f"dependency closure did not settle: {extra}")
            requirements = [*requirements, *extra]
            continue
        missing = _missing_dist(res.stdout + res.stderr)
        if missing is not None and _NO_DIST.search(res.stdout + res.stderr) is None:
            missing = _beneath(missing, staging, python_version, platforms, env, pinned_to)
        if missing is None or missing[0].lower() in built or len(built) >= MAX_SDIST_FALLBACKS:
            raise WheelDownloadError(f"pip download failed:\n{tail(res)}")
        # No wheel for the target: build one from the sdist on the host, then retry with
        # staging as a find-links source so the resolver sees it (and pulls its deps).
        name, wanted = missing
        built.add(name.lower())
        native_failed = None
        if native is not None:  # the image's own interpreter first (sdist_native.py)
            try:
                if _built_natively(
                    name,
                    [*(constraints or []), *requirements],  # a constrained name: its pin
                    wanted,
                    staging,
                    native,
                    python_version,
                    platforms,
                    env,
                ):
                    continue
            except WheelDownloadError as exc:  # e.g. a C library the host lacks: the image
                native_failed = exc  # may have it (the sdist built there, below)
        try:
            build_pure_wheel(
                name,
                [*(constraints or []), *requirements],
                staging,
                sources,
                name + wanted,
                env,
                python_version,
            )
        except WheelDownloadError as exc:
            if native_failed is None:
                raise
            raise WheelDownloadError(f"{native_failed}\n\nthen, on the host: {exc}") from None
    for stub in staging.glob(f"*{STUB_MARK}*.whl"):  # the sdists beside them are what installs
        stub.unlink()
    names = sorted(p.name for p in staging.iterdir() if p.suffix in (".whl", ".gz", ".zip"))
    (staging / ".complete").write_text("\n".join(names))
    shutil.rmtree(cached, ignore_errors=True)
    staging.rename(cached)


def _built_natively(
    name: str,
    requirements: list[str],
    wanted: str,
    dest: Path,
    python: Interpreter,
    python_version: str,
    platforms: list[str],
    env: dict[str, str] | None,
) -> bool:
    """Build `name`'s sdist with the image's own interpreter (sdist_native.py) into `dest`;
    False when that way cannot serve it (no JSON index listing, no such sdist)."""
    pinned = matching_requirement(name, requirements) or name + wanted
    with TempDir(dest / f".native-{name}") as tmp:
        try:
            build_native_wheel(pinned, dest, python, python_version, platforms, tmp, env)
        except NativeBuildUnavailable:
            return False
    return True


def _missing_dist(output: str) -> tuple[str, str] | None:
    """The distribution pip found no file of for the target, and the range it wanted: from
    "No matching distribution found for X<range>", else from a resolution conflict's
    "no matching distributions ... X", its range read from the first "... depends on X<range>"
    (the newest dependent's) or "" when none says."""
    found = _NO_DIST.search(output)
    if found:
        return found.group(1), found.group(2)
    found = _NO_DIST_IN_CONFLICT.search(output)
    if found is None:
        return None
    name = found.group(1)
    dep = re.search(rf"depends on {re.escape(name)}([^\s,;]*)", output, re.IGNORECASE)
    return name, dep.group(1) if dep else ""


def _beneath(
    missing: tuple[str, str],
    staging: Path,
    python_version: str,
    platforms: list[str],
    env: dict[str, str] | None,
    constraints: Path | None = None,
    depth: int = 4,
) -> tuple[str, str]:
    """What a resolution conflict's "no matching distributions" really lacks. The conflict can
    name a package that has wheels for the target when every release of it the resolver tried
    needs something that has none: cf-units 3.1-3.2 have cp310 wheels and all pin
    antlr4-python3-runtime==4.7.2, an sdist only; pip, backtracking through iris, names
    cf-units. Resolving the named package alone (its newest release) says what is beneath it;
    when that resolves, or names the same package, the named one is what to build."""
    name, _ = missing
    for _ in range(depth):
        with TempDir(staging / f".probe-{name}") as tmp:
            res = _pip_download(
                [name],
                tmp,
                python_version,
                platforms,
                env,
                find_links=staging,
                constraints=constraints,
            )
        deeper = None if res.returncode == 0 else _missing_dist(res.stdout + res.stderr)
        if deeper is None or deeper[0].lower() == name.lower():
            return missing
        missing, name = deeper, deeper[0]
    return missing


_FROM_VERSIONS = re.compile(r"\(from versions: ([^)]*)\)")


def versions_for_target(
    name: str, python_version: str, platforms: Sequence[str], before: str | None = None
) -> list[str]:
    """Every version of `name` with a wheel (or sdist) pip would consider for the target,
    oldest first, as pip lists them."""
    cmd = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--no-deps"]
    cmd += [
        "--only-binary=:all:",
        "--implementation",
        "cp",
        "--python-version",
        requires_python_version(python_version),
    ]
    for tag in platforms:
        cmd += ["--platform", tag]
    # one folder per call: the eval runner's workers are threads of one process
    with TempDir(cache_root() / "wheels" / f".probe-{os.getpid()}-{threading.get_ident()}") as tmp:
        res = subprocess.run(
            [*cmd, "--dest", str(tmp), f"{name}==0.0.0.dev0+deepswe.probe"],
            capture_output=True,
            text=True,
            timeout=PIP_TIMEOUT_S,
            env=_pip_env(before),
        )
    found = _FROM_VERSIONS.search(res.stdout + res.stderr)
    if not found or found.group(1).strip() == "none":
        return []
    return [v.strip() for v in found.group(1).split(",")]


def _pip_download(
    requirements,
    dest: Path,
    python_version: str,
    platforms: list[str],
    env=None,
    find_links: Path | None = None,
    constraints: Path | None = None,
):
    cmd = [*resolver_python(python_version), "download", "--disable-pip-version-check"]
    cmd += [
        "--only-binary=:all:",
        "--implementation",
        "cp",
        "--python-version",
        requires_python_version(python_version),
    ]
    for tag in platforms:
        cmd += ["--platform", tag]
    # find-links on dest: fallback wheels built in earlier rounds satisfy the resolver.
    cmd += ["--dest", str(dest), "--find-links", str(find_links or dest), *requirements]
    if constraints is not None:
        cmd += ["--constraint", str(constraints)]
    with activity(f"pip download for Python {python_version}: {' '.join(requirements)[:160]}"):
        return subprocess.run(cmd, capture_output=True, text=True, timeout=PIP_TIMEOUT_S, env=env)


def pip_install_command(
    requirements: Sequence[str], wheel_dir: str = "/wheels", compile: bool = True
) -> str:
    """The shell command that installs `requirements` from wheel_dir inside a base image.

    `python` is /opt/venv's interpreter there (first on PATH), so no --break-system-packages
    is needed and `python -m pytest` later sees what this installed.
    """
    args = ["python", "-m", "pip", "install", "--no-index", "--find-links", wheel_dir]
    if not compile:  # no .pyc written beside the installed sources (uv's default)
        args.append("--no-compile")
    return shlex.join([*args, *requirements])
