"""The `Task` type every subproject codes against.

A Task is one repository-level bug to fix: where the code lives (a prebuilt image or an
`EnvironmentSpec` to build one from source), what the policy is told (`problem_statement`),
and how the fix is graded (`test_spec` + `hidden`). Everything under `hidden`, plus
`gold_patch`, is grading material and never reaches a policy: a policy gets `Task.public()`.
"""

from __future__ import annotations

from enum import Enum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class TaskSource(str, Enum):
    """Which dataset a task came from (kept for reports; nothing downstream branches on it)."""

    SWE_BENCH_VERIFIED = "swe-bench-verified"
    R2E_GYM = "r2e-gym"
    SWE_MINI = "swe-mini"
    CUSTOM = "custom"


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SourceFile(_Frozen):
    """A file an install downloads (a source tarball), fetched by the host instead and put in
    the task image at /deepswe-files/<name> before the install commands run (no network there).
    Exactly one of `url` (checked against `sha256`) or `git` is set."""

    name: str
    """The file's name under /deepswe-files."""
    url: str | None = None
    """Where the host downloads it: a package registry's copy of the same bytes."""
    sha256: str | None = None
    """The file's sha256; a download with another is refused."""
    git: str | None = None
    """`<local git repository>@<ref>`: the host writes `git archive --prefix=<prefix>/` of the
    ref as a .tar.gz (a source tree no registry serves, from the repository mirror)."""
    prefix: str | None = None
    """The archive's top folder (with `git`)."""
    stands_for: str = ""
    """What the original install downloaded (a URL), for messages and reports."""


class EnvironmentSpec(_Frozen):
    """How to build the task's image from source (swe-mini and custom tasks)."""

    base: Literal["bookworm", "bullseye"] = "bookworm"
    """Base image: a Debian suite (bookworm ships Python 3.11, bullseye Python 3.9)."""
    source: str
    """Local git repository path or git URL."""
    pip: list[str] = []
    """pip requirement strings, installed from host-downloaded wheels."""
    pip_after: list[list[str]] = []
    """Further pip installs after `pip`, in order, each its own call, so a later pin replaces an
    earlier one (swebench installs a repository's requirements, then its spec's pip_packages)."""
    apt: list[str] = []
    """Debian packages the base image adds (debootstrap, never apt inside a sandbox): a compiler
    for C extensions, locales, graphviz..."""
    python: str | None = None
    """A Python version the suite does not ship ("3.6"): a CPython built for the suite's Debian
    on the host, copied into the image ($DEEPSWE_HOST_PYTHONS). None: the suite's python3."""
    install: list[str] = []
    """Shell commands run in /testbed after the pip steps, offline: pip finds what it needs in
    the image's wheelhouse (PIP_NO_INDEX, PIP_FIND_LINKS)."""
    index_date: str | None = None
    """Resolve requirements from the package index as it stood on this date (ISO 8601, pip's
    --uploaded-prior-to): the state the reference environment was built from. None: today's
    releases, which for unpinned dependencies can change what the tests see."""
    pins: list[str] = []
    """`name==version` of what the reference environment installed (an R2E-Gym row's setup
    log), the pip constraints of every step the host resolves, so the image holds the same
    versions where the index still serves them; a step they cannot resolve with is resolved
    without them, said in the build log."""
    files: list[SourceFile] = []
    """Files the install commands would have downloaded, fetched by the host (SourceFile)."""
    grading_pip: list[str] = []
    """Requirements whose wheels are written into the grading sandbox only, never the image
    (deepswe.env.images.grading_wheels), for a test command that re-installs the project after
    the patch, offline."""
    reinstall_after_patch: bool = False
    """The test command re-installs the project after the patch (swebench's eval scripts): what
    the gold and test patches add to the project's declared requirements joins `grading_pip`,
    found on the host from `source` when the task is first graded."""
    venv_in_testbed: bool = False
    """The venv is the directory /testbed/.venv, as in R2E-Gym's images (`grep -r /testbed` walks
    its site-packages, tracebacks name /testbed/.venv), with /opt/venv a link to it and `/.venv`
    in the repository's .git/info/exclude. False: /opt/venv, outside the repository."""
    test_cmd: str = "python -m pytest -rA"
    log_parser: str = "pytest"


class TestSpec(_Frozen):
    """How to run and read the hidden tests."""

    __test__ = False  # not a pytest test class, despite the name

    command: str
    """Shell command run in /testbed, e.g. "python -m pytest -rA tests/test_x.py". Empty for
    SWE-bench tasks: the evaluation harness fills it from SWE-bench's own specs."""
    log_parser: str
    """"pytest" | "r2e-gym" | "swebench": a name in the parser registry, or a
    `module:function` path (deepswe.env.grading.parsers)."""
    timeout_s: float = Field(default=300.0, gt=0)
    """Wall-clock limit for one test run, in seconds."""
    rules: Literal["strict", "swebench"] | None = None
    """How the patch is graded. "strict": the grader owns the test process (it runs pytest
    itself and reads its own report; test infrastructure the patch changed is put back first;
    only PASSED counts as passing). "swebench": SWE-bench 4.1.0's rules (the patch may change
    conftest.py and the like, which is flagged; XFAIL counts as passing). None: "swebench" for
    SWE-bench-format tasks (log parser "swebench"), "strict" for every other task."""

    @property
    def grading_rules(self) -> Literal["strict", "swebench"]:
        """`rules`, or the default for this task's format when unset."""
        if self.rules is not None:
            return self.rules
        return "swebench" if self.log_parser == "swebench" else "strict"


class Reproduction(_Frozen):
    """A standalone script from the issue that shows the bug, and what it does once fixed
    (swe-mini rows: the statement's own reproduction). Strict rules run it as a plain script,
    outside any test runner, after the tests: a fix that works only under pytest fails it."""

    code: str = Field(min_length=1)
    fixed: Literal["runs", "prints", "raises"]
    """What it does with the fix: `runs` to the end without an exception; `prints` `expected` as
    its last line of output; `raises` the exception named `expected`."""
    expected: str = ""
    """prints: the last line printed, as synthesis shows a value (swemini.failure.short: addresses
    dropped, a long one cut with "..."); raises: the exception's type name."""


class HiddenTests(_Frozen):
    """Grading material. NEVER shown to a policy."""

    fail_to_pass: list[str] = []
    """Tests that fail before the fix and must pass after it."""
    pass_to_pass: list[str] = []
    """Tests that pass before the fix and must keep passing."""
    test_patch: str = ""
    """Unified diff adding/changing test files; applied only at grading."""
    expected_statuses: dict[str, str] | None = None
    """R2E-Gym: expected_output_json (test name -> "PASSED"/"FAILED"/...), keys exactly as in
    the dataset (they may hold ANSI colour codes; grading strips them)."""
    test_files: dict[str, str] = {}
    """R2E-Gym: the hidden test files its images ship under /r2e_tests (file name -> source),
    from execution_result_content. Empty for other sources."""
    graded_files: list[str] = []
    """Repository paths of the files that hold the graded tests when they ship with the
    repository itself (swe-mini). Grading restores each to the task's version before the tests
    run, so a patch cannot rewrite the tests it is graded by. Files the test patch touches are
    restored the same way without being listed here."""
    reproduction: Reproduction | None = None
    """The issue's reproduction and what it must do once fixed (swe-mini), graded as a plain
    script under strict rules; None where the row has none."""


class PublicTask(_Frozen):
    """What a policy may see of a task."""

    instance_id: str
    repo: str
    problem_statement: str


class Task(_Frozen):
    """One executable software-engineering task."""

    instance_id: str = Field(min_length=1)
    repo: str
    """"owner/name" where the source names the owner; R2E-Gym rows without a known owner keep
    their bare name."""
    base_commit: str
    """The commit the policy starts from (a SHA, or a git revision such as "<sha>^")."""
    problem_statement: str
    source: TaskSource
    image: str | None = None
    """A prebuilt image name (SWE-bench, R2E-Gym), or None when built from `environment`."""
    environment: EnvironmentSpec | None = None
    test_spec: TestSpec
    hidden: HiddenTests
    gold_patch: str | None = None
    """Reference fix as a unified diff (non-test files only)."""
    version: str | None = None
    """SWE-bench's version field (selects the harness's install/test specs)."""
    environment_setup_commit: str | None = None
    metadata: dict[str, str] = {}
    """Free-form strings kept from the source row (e.g. created_at)."""

    def public(self) -> PublicTask:
        """The policy's view: id, repository and problem statement only."""
        return PublicTask(
            instance_id=self.instance_id,
            repo=self.repo,
            problem_statement=self.problem_statement,
        )
