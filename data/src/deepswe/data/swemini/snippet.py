"""Running an issue's reproduction snippet as a person would: a fresh interpreter, the project's
import root on sys.path, nothing else of the repository (no tests, no fixtures), an empty
working directory.

`ProjectTree` is a scratch copy of one project's source files at its clean commit; `buggy(path,
content)` swaps one file for a task's bug while a block runs. `run_snippet` executes the code
with stdout captured and reports the last line printed and the exception raised, if any, as
Python would print it (`traceback.format_exception_only`).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from deepswe.data.swemini import gitrepo
from deepswe.data.swemini.manifest import Project

SNIPPET_TIMEOUT_S = 30.0

# Runs in the task's interpreter (3.11): the snippet comes on stdin, the report goes to stdout
# as the last line, after anything the snippet itself wrote to stderr. Grading runs a row's
# reproduction the same way but reports through its sealed vault, never through stdout
# (deepswe.env.grading.reproduction, bin/deepswe_repro.py).
SNIPPET_HARNESS = r"""
import contextlib, io, json, sys, traceback
code = sys.stdin.read()
out, error = io.StringIO(), None
try:
    with contextlib.redirect_stdout(out):
        exec(compile(code, "<reproduction>", "exec"), {"__name__": "__main__"})
except BaseException as exc:
    error = exc
lines = [line.strip() for line in out.getvalue().splitlines() if line.strip()]
report = {"last": lines[-1] if lines else None, "exception": None, "exception_types": []}
if error is not None:
    report["exception"] = traceback.format_exception_only(type(error), error)[-1].strip()
    report["exception_types"] = [c.__name__ for c in type(error).__mro__]
sys.__stdout__.write("\n" + json.dumps(report) + "\n")
"""


@dataclass(frozen=True)
class SnippetRun:
    """What running a snippet showed."""

    last: str | None = None  # the last non-empty line it printed
    exception: str | None = None  # "KeyError: 'x'", as Python prints it
    exception_types: list[str] = field(default_factory=list)  # the exception's class and bases
    timed_out: bool = False
    crashed: str = ""  # the interpreter itself failed (no report): its stderr's tail

    def raised(self, name: str) -> bool:
        return name in self.exception_types


def run_snippet(
    python: Path,
    import_root: Path,
    code: str,
    hash_seed: str = "0",
    timeout: float = SNIPPET_TIMEOUT_S,
) -> SnippetRun:
    """Run `code` in a fresh `python` with only `import_root` added to sys.path."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/root"),
        "PYTHONPATH": str(import_root),
        "PYTHONHASHSEED": hash_seed,
        "PYTHONDONTWRITEBYTECODE": "1",
        "TZ": "UTC",
        "LC_ALL": "C.UTF-8",
    }
    with tempfile.TemporaryDirectory(prefix="swe-mini-snippet-") as cwd:
        try:
            res = subprocess.run(
                [str(python), "-c", SNIPPET_HARNESS],
                input=code,
                cwd=cwd,
                env=env,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            return SnippetRun(timed_out=True)
    lines = res.stdout.rstrip("\n").splitlines()
    try:
        report = json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:
        report = None
    if not isinstance(report, dict):
        return SnippetRun(crashed=(res.stderr or res.stdout)[-500:])
    return SnippetRun(report["last"], report["exception"], report["exception_types"])


class ProjectTree:
    """A scratch copy of `project`'s source files (manifest `src`) at commit `clean`."""

    def __init__(self, repo: Path, project: Project, clean: str) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix=f"swe-mini-{project.key}-")
        self.root = Path(self._tmp.name)
        self.import_root = (self.root / project.pythonpath).resolve()
        archive = subprocess.run(
            ["git", "-C", str(repo), "archive", "--format=tar", clean, "--", *project.src],
            capture_output=True,
            check=True,
        ).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tf:
            tf.extractall(self.root, filter="data")

    @contextlib.contextmanager
    def buggy(self, path: str, content: bytes) -> Iterator[None]:
        """`path` (relative to the repository) holds `content` inside the block."""
        target = self.root / path
        original = target.read_bytes()
        target.write_bytes(content)
        try:
            yield
        finally:
            target.write_bytes(original)

    def close(self) -> None:
        self._tmp.cleanup()

    def __enter__(self) -> ProjectTree:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def bug_content(repo: Path, base_commit: str, path: str, gold_patch: str, clean: str) -> bytes:
    """The mutated file of a task: from its base commit, re-created from the gold patch (as
    `fetch` does) when this repository does not hold the commit yet."""
    try:
        return gitrepo.show(repo, base_commit, path)
    except gitrepo.GitError:
        sha = gitrepo.commit_reverse_patch(repo, clean, gold_patch)
        return gitrepo.show(repo, sha, path)


def snippet_python() -> Path:
    """The interpreter reproductions run with: $DEEPSWE_SWE_MINI_PYTHON, else this one when it
    is a 3.11 (statements quote 3.11's messages and reprs, as synthesis observed them)."""
    override = os.environ.get("DEEPSWE_SWE_MINI_PYTHON")
    if override:
        return Path(override)
    if sys.version_info[:2] != (3, 11):
        raise RuntimeError(
            f"swe-mini reproductions run on Python 3.11, this is {sys.version.split()[0]}: set "
            "DEEPSWE_SWE_MINI_PYTHON to a 3.11 interpreter (e.g. /root/.pyenv/versions/3.11.7/bin/python)"
        )
    return Path(sys.executable)
