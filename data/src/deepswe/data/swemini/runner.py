"""Running a project's own tests on the host, fast, with the interpreter bookworm ships (3.11).

A per-cache venv holds exactly the manifest's test requirement (the env image installs the same),
the project is imported from its working tree through PYTHONPATH (the image uses a .pth file
for the same directory), and outcomes are read from pytest's `-rA` summary as the grader reads
them. Failure sections are kept for writing problem statements.
"""

from __future__ import annotations

import fcntl
import os
import re
import shlex
import subprocess
import sys
import time
import venv
from dataclasses import dataclass, field
from pathlib import Path

PYTEST_ARGS = ["-rA", "-p", "no:cacheprovider", "-o", "addopts="]
"""Same flags in the image: `-o addopts=` drops projects' coverage/doctest options, whose
plugins are not installed; no cache directory is written into the repository."""
HOST_ARGS = ["-l"]  # host only: locals in tracebacks, for problem statements
RUN_TIMEOUT_S = 120
_STATUS = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S+)(?: - .*)?$")
_HEADER = re.compile(r"^_{3,} (.+?) _{3,}$")


@dataclass
class RunResult:
    statuses: dict[str, str] = field(default_factory=dict)
    """Node id -> PASSED | FAILED | ERROR | SKIPPED | XFAIL | XPASS."""
    failures: dict[str, str] = field(default_factory=dict)
    """pytest's failure-section header (`Class.test[param]`) -> the section's text."""
    collection_errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    timed_out: bool = False


def test_command(files: list[str]) -> str:
    """The shell command a task's image runs in /testbed."""
    return shlex.join(["python", "-m", "pytest", *PYTEST_ARGS, *files])


def ensure_venv(path: Path, requirement: str) -> Path:
    """A venv at `path` with `requirement` (e.g. pytest==8.3.4) installed; returns its python.

    $DEEPSWE_SWE_MINI_PYTHON names an interpreter (with pytest) to use instead, e.g. in tests.
    """
    override = os.environ.get("DEEPSWE_SWE_MINI_PYTHON")
    if override:
        return Path(override)
    python = path / "bin" / "python"
    stamp = path / ".swe-mini-requirement"
    path.parent.mkdir(parents=True, exist_ok=True)
    # Synthesis workers are processes sharing one venv: on a cold cache two of them would both
    # clear and create it, and one rmtree fails under the other ("Directory not empty").
    with open(path.parent / f".{path.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if python.exists() and stamp.exists() and stamp.read_text() == requirement:
            return python
        if sys.version_info[:2] != (3, 11):
            raise RuntimeError(
                f"swe-mini synthesis needs Python 3.11 (bookworm's), this is "
                f"{sys.version.split()[0]}"
            )
        venv.EnvBuilder(clear=True, with_pip=True).create(path)
        res = subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", requirement],
            capture_output=True,
            text=True,
        )
        if res.returncode != 0:
            raise RuntimeError(
                f"installing {requirement} into {path} failed:\n{res.stderr[-2000:]}"
            )
        stamp.write_text(requirement)
        return python


def parse_output(out: str) -> RunResult:
    """Statuses from the `-rA` summary, failure sections from the FAILURES block."""
    result = RunResult()
    section, current, buf = None, None, []
    for line in out.splitlines():
        if line.startswith("=") and line.endswith("="):
            if current is not None:
                result.failures[current] = "\n".join(buf)
            current, buf = None, []
            section = line.strip("= ").lower()
            continue
        if section == "failures":
            m = _HEADER.match(line)
            if m:
                if current is not None:
                    result.failures[current] = "\n".join(buf)
                current, buf = m.group(1), []
            elif current is not None:
                buf.append(line)
        elif section == "short test summary info":
            m = _STATUS.match(line)
            if m is None:
                continue
            status, nodeid = m.group(1), m.group(2)
            if "::" not in nodeid:
                result.collection_errors.append(nodeid)
            elif "[" not in nodeid or nodeid.endswith("]"):
                # ids holding spaces are cut at the first one here; they are never listed
                result.statuses.setdefault(nodeid, status)
    if current is not None:
        result.failures[current] = "\n".join(buf)
    return result


def run_pytest(
    python: Path,
    repo: Path,
    pythonpath: str,
    files: list[str],
    timeout: float = RUN_TIMEOUT_S,
    hash_seed: str = "0",
) -> RunResult:
    """Run pytest on `files` in `repo` (cwd); never raises for test failures or a timeout.

    hash_seed: PYTHONHASHSEED. "0" makes set reprs in failure output (problem statements)
    the same on every run; "random" (as in the sandbox) exposes hash-order-dependent tests.
    """
    env = dict(os.environ)
    env.update(
        PYTHONDONTWRITEBYTECODE="1",  # a stale .pyc of the unmutated file must never be used
        PYTHONPATH=str((repo / pythonpath).resolve()),
        PYTHONHASHSEED=hash_seed,
        TZ="UTC",
        LC_ALL="C.UTF-8",
    )
    cmd = [str(python), "-m", "pytest", *PYTEST_ARGS, *HOST_ARGS, *files]
    start = time.monotonic()
    try:
        res = subprocess.run(
            cmd,
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return RunResult(seconds=time.monotonic() - start, timed_out=True)
    result = parse_output(res.stdout + res.stderr)
    result.seconds = time.monotonic() - start
    return result


def failure_key(nodeid: str) -> str:
    """The failure-section header pytest prints for `nodeid` (`Class.test[param]`)."""
    return nodeid.split("::", 1)[1].replace("::", ".")
