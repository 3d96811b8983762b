"""Offline installs inside image builds: a wheelhouse the host fills, and builds that learn what
pip is missing.

Containers never reach a package index. Every pip step of an image runs with PIP_NO_INDEX and
PIP_FIND_LINKS pointing at wheelhouses the host downloaded for the image's Python. What a
step needs beyond its own requirements (a project's install_requires when `pip install -e .`
runs, a PEP 517 build backend, a setup_requires, an sdist's build tools) is not known in
advance, so `build_offline` lets pip say it: when a build fails with pip's "No matching
distribution found for X" (or setuptools' equivalent), the host downloads X's closure for the
target into the build's wheelhouse and builds again. What was learned is kept beside the cache,
so the next build of the same image downloads it up front.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from deepswe.env.images.base import ImageBuildError
from deepswe.env.images.build_stage import BuildStage
from deepswe.env.images.recipe import cache_root
from deepswe.env.images.wheels import WheelDownloadError, download_wheels, versions_for_target

Log = Callable[[str], None]
MAX_ROUNDS = 30
# `pip install [-e] .[extras]` in an install command: the project's own requirements are read
# on the host up front (project_requirements) instead of one missing package per round.
_SELF_INSTALL = re.compile(
    r"pip\s+install\b[^;&|]*?\s(?:-e\s+)?\.(?:\[(?P<extras>[^\]]+)\])?(?=\s|$)"
)

# pip 18-24 and setuptools' easy_install (setup_requires), each naming one requirement.
_MISSING = (
    re.compile(r"No matching distribution found for ([^\s'\"]+)"),
    re.compile(r"Could not find a version that satisfies the requirement ([^\s'\"]+)"),
    re.compile(r"No local packages or working download links found for ([^\s'\"]+)"),
    re.compile(r"Could not find suitable distribution for Requirement\.parse\('([^']+)'\)"),
)


# pip's ResolutionImpossible explanation: "    sphinxcontrib-applehelp 1.0.7 depends on Sphinx>=5".
# Online, pip would backtrack to an older release; offline it only has the one the host picked.
_CONFLICT = re.compile(
    r"^\s+([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])? (\S+) depends on (.+)$", re.M
)
OLDER_RELEASES = 8  # how far back a conflicting package's releases are offered


def conflicting_releases(log: str) -> list[tuple[str, str]]:
    """(name, version) of each installed-candidate release pip named in a resolution conflict,
    the project being installed from a folder left out."""
    found: dict[tuple[str, str], None] = {}
    for m in _CONFLICT.finditer(log):
        if "(from /" not in m.group(3):
            found[(m.group(1), m.group(2))] = None
    return list(found)


def missing_requirements(log: str) -> list[str]:
    """Requirements pip (or setuptools) reported it could not find offline, in order."""
    found: dict[str, None] = {}
    for pattern in _MISSING:
        for m in pattern.finditer(log):
            found[m.group(1).rstrip(".,;)")] = None
    return list(found)


def _writer_id() -> str:
    """Unique per process and thread (the eval runner's workers are threads)."""
    return f"{os.getpid()}-{threading.get_ident()}"


class Wheelhouse:
    """A build's wheelhouse folder plus the extra requirements learned for one image."""

    def __init__(
        self,
        folder: Path,
        key: str,
        python: str,
        platforms: list[str],
        sources: bool,
        before: str | None = None,
        native: bool = False,
        constraints: Sequence[str] = (),
        stage: BuildStage | None = None,
    ):
        self.folder, self.python, self.platforms, self.sources = folder, python, platforms, sources
        self.before, self.native, self.constraints = before, native, list(constraints)
        self.stage = stage  # where Debian's interpreter builds an sdist (build_stage.py)
        self.unpinned: list[str] = []  # steps resolved without the constraints, and why
        self.learned_file = cache_root() / "learned" / f"{key}.json"
        folder.mkdir(parents=True, exist_ok=True)

    def learned(self) -> list[str]:
        """What earlier builds of this image learned. The file is only ever replaced whole
        (`remember`), so a reader never sees one half written."""
        if self.learned_file.exists():
            return list(json.loads(self.learned_file.read_text()))
        return []

    def remember(self, requirements: list[str]) -> None:
        """Add `requirements` to what this image learned, safely beside other builds of it.

        Regression: two workers building images of one environment (a Verified run with
        --workers 2) stopped with `Expecting value: line 1 column 1 (char 0)`: one truncated
        and rewrote the file in place while the other read it empty. Now writers take a lock
        for the read-modify-write (none loses the other's entries) and replace the file
        atomically (a reader sees the old list or the new one)."""
        self.learned_file.parent.mkdir(parents=True, exist_ok=True)
        lock = self.learned_file.with_name(self.learned_file.name + ".lock")
        with lock.open("w") as held:
            fcntl.flock(held, fcntl.LOCK_EX)
            known = self.learned()
            new = [r for r in requirements if r not in known]
            if not new:
                return
            tmp = self.learned_file.with_name(f"{self.learned_file.name}.{_writer_id()}.tmp")
            tmp.write_text(json.dumps(known + new, indent=1))
            os.replace(tmp, self.learned_file)

    def add_older(self, name: str, version: str) -> list[str]:
        """Releases of `name` older than `version` (the newest OLDER_RELEASES), each with its own
        closure, so pip can backtrack offline as it would online. Returns the pins added."""
        from packaging.version import InvalidVersion, Version

        try:
            below = Version(version)
        except InvalidVersion:
            return []
        older = []
        for v in versions_for_target(name, self.python, self.platforms, self.before):
            try:
                if Version(v) < below:
                    older.append(v)
            except InvalidVersion:
                continue
        pins = [f"{name}=={v}" for v in older[-OLDER_RELEASES:]]
        for pin in pins:
            try:
                self.add([pin], remember=True)
            except ImageBuildError:
                continue  # a release that cannot serve the target is simply not offered
        return pins

    def add(self, requirements: list[str], remember: bool = False) -> None:
        """Download `requirements` with their closure for the target into the folder. A pip
        step may carry options for the install in the image (`--upgrade`); they are not
        requirements and are left out here."""
        requirements = [r for r in requirements if not r.startswith("-")]
        if not requirements:
            return
        try:
            self._download(requirements)
        except WheelDownloadError as exc:
            raise ImageBuildError(f"wheels for {requirements}: {exc}") from exc
        if remember:
            self.remember(requirements)

    def _download(self, requirements: list[str]) -> None:
        """Under the constraints when there are any; a step they make unresolvable here (a
        pinned release gone, a conflict with the step's own pins) is resolved without them."""
        fetch = (self.folder, self.python, self.platforms, self.sources, self.before, self.native)
        if self.constraints:
            try:
                download_wheels(
                    requirements, *fetch, constraints=self.constraints, stage=self.stage
                )
                return
            except WheelDownloadError as exc:
                why = str(exc).strip().splitlines()[-1][:200]
                self.unpinned.append(f"{requirements} resolved without the pins: {why}")
        download_wheels(requirements, *fetch, stage=self.stage)


def self_install_extras(commands: Sequence[str]) -> list[str] | None:
    """The extras of the first `pip install [-e] .[extras]` among `commands`; None if none."""
    for cmd in commands:
        m = _SELF_INSTALL.search(cmd)
        if m:
            return [e.strip() for e in (m.group("extras") or "").split(",") if e.strip()]
    return None


def project_requirements(repo: Path, extras: list[str], python: str) -> list[str]:
    """The requirements the project in `repo` declares (with `extras`), applying to `python`:
    its metadata as pip builds it on the host (`pip install --dry-run --report`). [] when the
    metadata cannot be built here; the offline build then learns them one by one."""
    from packaging.markers import default_environment
    from packaging.requirements import Requirement

    target = f"{repo}[{','.join(extras)}]" if extras else str(repo)
    with tempfile.TemporaryDirectory(prefix="deepswe-meta-") as tmp:
        report = Path(tmp) / "report.json"
        cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "-q"]
        cmd += ["--ignore-installed", "--report", str(report), target]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        if res.returncode != 0 or not report.exists():
            return []
        items = json.loads(report.read_text()).get("install", [])
    out = []
    for item in items:
        for line in item.get("metadata", {}).get("requires_dist", []):
            req = Requirement(line)
            for extra in ["", *extras]:
                env = default_environment()
                env.update(python_version=python, python_full_version=f"{python}.0", extra=extra)
                if req.marker is None or req.marker.evaluate(env):
                    req.marker = None
                    out.append(str(req))
                    break
    return sorted(set(out))


def build_offline(build: Callable[[], str | None], wheels: Wheelhouse, what: str, log: Log) -> None:
    """Run `build` (returns None on success, else the build's log) until pip stops reporting
    missing requirements; each round adds what it reported to `wheels`."""
    for learned in wheels.learned():  # one at a time: older pins of one name cannot co-resolve
        wheels.add([learned])
    asked: set[str] = set()
    for _ in range(MAX_ROUNDS):
        failure = build()
        if failure is None:
            return
        missing = [r for r in missing_requirements(failure) if r not in asked]
        conflicts = [f"{n}=={v}" for n, v in conflicting_releases(failure)]
        conflicts = [c for c in conflicts if c not in asked]
        if not (missing or conflicts):
            raise ImageBuildError(f"building {what} failed:\n{failure[-3000:]}")
        asked.update(missing + conflicts)
        if missing:
            log(f"  offline install needs {', '.join(missing)}: downloading, building again")
            wheels.add(missing, remember=True)
        for pin in conflicts:
            name, version = pin.split("==")
            log(f"  offline install: {pin} conflicts; offering its older releases")
            wheels.add_older(name, version)
    raise ImageBuildError(f"building {what}: still missing requirements after {MAX_ROUNDS} rounds")


__all__ = [
    "Wheelhouse",
    "build_offline",
    "conflicting_releases",
    "missing_requirements",
    "project_requirements",
    "self_install_extras",
]
