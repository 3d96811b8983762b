"""The wider run of test strength: which of the repository's own tests may prove a survivor
wrong, and the task's own command (its interpreter, options, environment) rewritten to run them.

    swe-mini and our own tasks: the folders holding the graded files, recursively
    R2E-Gym: the hidden tests' folder and up to 5 of the repository's test files that name a
        module the gold patch changes (`repository_tests`); a unittest runner script: its own
    SWE-Bench-Verified, whose command already runs each graded file whole:
      pytest, tox's `--` (sphinx), bin/test (sympy): each graded file's folder where it holds at
        most FOLDER_FILES Python files, else the graded files alone (a folder can be a whole
        suite: matplotlib's lib/matplotlib/tests has 75, sphinx's tests/ 340)
      runtests.py (django): each graded module's app, whole (`migrations` for
        `migrations.test_loader`): one app's tests take seconds to a minute

Only a test that passes with gold in both of two wider runs can prove anything
(deepswe.eval.strength), so what the wider run adds can only find more, never call gold wrong.
"""

from __future__ import annotations

import posixpath
import re
import shlex
import subprocess
from pathlib import Path

from deepswe.data.task import Task, TaskSource
from deepswe.env.hidden_tests import graded_paths
from deepswe.env.r2e_layout import TESTS_LINK, uses_r2e_layout

# A Verified folder joins the wider run whole only when it holds at most this many Python files
# (recursively, __init__ and conftest aside): seaborn's tests/_core (8), requests' tests (11),
# scikit-learn's svm/tests (3) do; pytest's testing (107) and sympy's core/tests (38) do not.
FOLDER_FILES = 12
# At most this many of the repository's test files join an R2E-Gym task's wider run: aiohttp's
# suites take minutes a file on 2 cores.
REPOSITORY_TESTS = 5
_TEST_FILE = re.compile(r"(?:^|/)(?:[Tt]ests?|testing)/(?:.*/)?(?:test_[^/]*|[^/]*_test)\.py$")
_CHANGED = re.compile(r"^diff --git a/(\S+) b/", re.MULTILINE)
_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.DOTALL)


def wider_paths(task: Task) -> list[str]:
    """What the wider run takes (the module docstring says what, per task set and runner):
    folders or files of the repository; for Django's runtests.py the apps' folders."""
    line = _test_line(task)
    if line is not None and _django(line[1]):
        return [f"tests/{app}" for app in _apps(line[2])]
    if task.source is TaskSource.SWE_BENCH_VERIFIED:
        return _cheap_folders(task, line[2] if line is not None else [])
    files = [p for p in graded_paths(task) if p != TESTS_LINK and not p.startswith(TESTS_LINK)]
    folders = {posixpath.dirname(p) or "." for p in files}
    if uses_r2e_layout(task):
        folders.add(TESTS_LINK)
        if _pytest_line(task) is not None:  # a unittest runner script takes no file arguments
            folders.update(repository_tests(task))
    return sorted(folders)


def wider_task(task: Task, passing: list[str] | None = None) -> Task:
    """`task` graded by every test in `wider_paths`: the graded tests its command names replaced
    by them (appended to its pytest line when it names none); `passing` the tests it must pass
    (none: a run that only reports statuses)."""
    lines = task.test_spec.command.splitlines()
    found = _test_line(task)
    if found is not None:
        k, tokens, named = found
        kept = [t for t in tokens if t.split("::")[0] not in named]
        wider = _apps(named) if _django(tokens) else wider_paths(task)
        lines[k] = _join(kept + wider)
    spec = task.test_spec.model_copy(update={"command": "\n".join(lines)})
    hidden = task.hidden.model_copy(
        update={
            "fail_to_pass": [],
            "pass_to_pass": sorted(passing or []),
            "expected_statuses": None,
            "reproduction": None,
        }
    )
    return task.model_copy(update={"test_spec": spec, "hidden": hidden})


def _test_line(task: Task) -> tuple[int, list[str], list[str]] | None:
    """The line that runs the graded tests: (its index, its tokens, the graded tests it names:
    paths, R2E-Gym's tests link, or Django's dotted labels); else the first pytest line, naming
    none; else None (a unittest runner script, rewritten by nobody)."""
    paths = set(graded_paths(task))
    names = paths | {_django_label(p) for p in paths}
    pytest_line = None
    for k, line in enumerate(task.test_spec.command.splitlines()):
        try:
            tokens = shlex.split(line)
        except ValueError:
            continue
        named = [t.split("::")[0] for t in tokens if t.split("::")[0] in names]
        if named:
            return k, tokens, named
        if pytest_line is None and "pytest" in line:
            pytest_line = (k, tokens, [])
    return pytest_line


def _pytest_line(task: Task) -> int | None:
    """The index of the command's pytest line, or None."""
    for k, line in enumerate(task.test_spec.command.splitlines()):
        if "pytest" in line:
            return k
    return None


def _django(tokens: list[str]) -> bool:
    return any(t.endswith("runtests.py") for t in tokens)


def _django_label(path: str) -> str:
    """SWE-bench's name for a Django test file (its `get_test_directives`): tests/ dropped, the
    module dotted: tests/migrations/test_loader.py -> migrations.test_loader."""
    stem = path.removeprefix("tests/").removesuffix(".py")
    return stem.replace("/", ".")


def _apps(labels: list[str]) -> list[str]:
    """The Django apps (runtests.py's top-level labels) of `labels`, sorted."""
    return sorted({label.split(".")[0] for label in labels})


def _cheap_folders(task: Task, named: list[str]) -> list[str]:
    """Each folder of the graded files `named` where it holds at most FOLDER_FILES Python files
    at the base commit, else those files; the files alone when the repository is not here."""
    out: set[str] = set()
    by_folder: dict[str, list[str]] = {}
    for path in named:
        by_folder.setdefault(posixpath.dirname(path), []).append(path)
    for folder, files in by_folder.items():
        n = _python_files(task, folder) if folder else None
        out.update([folder] if n is not None and n <= FOLDER_FILES else files)
    return sorted(out)


def _python_files(task: Task, folder: str) -> int | None:
    """How many Python files `folder` holds at the base commit (recursively, __init__.py and
    conftest.py aside); None without the task's git repository (`environment.source`)."""
    env = task.environment
    source = Path(env.source) if env is not None and env.source else None
    if source is None or not source.exists():
        return None
    cmd = ["git", "-C", str(source), "ls-tree", "-r", "--name-only", task.base_commit, "--"]
    out = subprocess.run([*cmd, folder], capture_output=True, text=True, errors="replace")
    if out.returncode != 0:
        return None
    names = [posixpath.basename(p) for p in out.stdout.splitlines()]
    return sum(1 for n in names if n.endswith(".py") and n not in ("__init__.py", "conftest.py"))


def _join(tokens: list[str]) -> str:
    """`tokens` as one shell line; an environment assignment stays one (`NAME='a b'`, never
    `'NAME=a b'`, which the shell would run as a command's name)."""
    parts = []
    for t in tokens:
        m = _ASSIGNMENT.match(t)
        parts.append(f"{m[1]}={shlex.quote(m[2])}" if m else shlex.quote(t))
    return " ".join(parts)


def repository_tests(task: Task, limit: int = REPOSITORY_TESTS) -> list[str]:
    """R2E-Gym's hidden tests are one file (`r2e_tests/test_1.py`) cut from the repository's own;
    the rest of the repository's tests of the changed code stay in the image. These are the
    test files at the base commit (under a `tests`, `Tests`, `test` or `testing` folder) that name a
    module the gold patch changes (its file's stem, as a word), most mentions first, at most
    `limit`; none when the task's source is not a local git repository (`environment.source`)."""
    env = task.environment
    source = Path(env.source) if env is not None and env.source else None
    if source is None or not source.exists():
        return []
    stems = {
        posixpath.splitext(posixpath.basename(p))[0]
        for p in _CHANGED.findall(task.gold_patch or "")
        if p.endswith(".py") and not _TEST_FILE.search(p)
    } - {"__init__", "__main__", "setup", "conftest"}
    if not stems:
        return []
    cmd = ["git", "-C", str(source), "grep", "-c", "-w"]
    for stem in sorted(stems):
        cmd += ["-e", stem]
    cmd += [task.base_commit, "--", "*.py"]
    out = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
    counts = []
    for line in out.stdout.splitlines():
        _, _, rest = line.partition(":")  # `<rev>:<path>:<count>`
        path, _, n = rest.rpartition(":")
        if _TEST_FILE.search(path) and n.isdigit():
            counts.append((-int(n), path))
    return [path for _, path in sorted(counts)[:limit]]


__all__ = ["FOLDER_FILES", "REPOSITORY_TESTS", "repository_tests", "wider_paths", "wider_task"]
