"""The reward run: a patch graded in a fresh sandbox of the task's image.

A fresh sandbox, not the one the agent worked in: whatever the agent did to its environment
(`rm -rf /testbed`, a broken venv) cannot change the verdict, and the hidden tests meet exactly
base_commit + patch, as in SWE-bench's harness. The container only produces the log; the verdict
is `grading.grade(task, log)`, a pure function.

    snapshot -> apply the patch -> find the test infrastructure it changed -> put back the
    graded files (and, under strict rules, that infrastructure) -> the task's test patch and
    hidden tests -> run the tests (under strict rules, pytest run by the grader's launcher,
    graded from its own report) -> grade

Under strict rules (`TestSpec.grading_rules`) the grader owns the test process: no file the
patch wrote can stand in for pytest, configure it, extend it, or print the results read.
"""

from __future__ import annotations

import secrets
import shlex
from dataclasses import dataclass

from unidiff import PatchSet
from unidiff.errors import UnidiffParseError

from deepswe.data.task import Task
from deepswe.env.grading import grade
from deepswe.env.grading.grade import infra_change_line
from deepswe.env.grading.markers import (
    END_TEST_OUTPUT,
    GRADER_RAN_TESTS,
    INFRA_ERROR,
    START_TEST_OUTPUT,
    TEST_RUN_REJECTED,
    TESTS_TIMEOUT,
)
from deepswe.env.grading.outcomes import GradeResult, Outcome, TestInfraChange
from deepswe.env.grading.owned import LAUNCHER, OwnedCommand, own_pytest_command, read_report
from deepswe.env.grading.patch import patch_apply_script
from deepswe.env.grading.testinfra import patch_paths, scan_test_infra
from deepswe.env.r2e_layout import (
    HIDDEN_TESTS_DIR,
    TESTS_LINK,
    hide_grading_material,
    link_script,
    misc_files,
    uses_r2e_layout,
)
from deepswe.env.sandbox import Sandbox, SandboxError
from deepswe.env.workspace import START_REF, changed_paths, take_snapshot

PATCH_PATH = "/tmp/deepswe/model.patch"
TEST_PATCH_PATH = "/tmp/deepswe/test.patch"
APPLY_TIMEOUT_S = 120.0
# Above this exit status pytest did not report (2 interrupted, 3 internal error, 4 usage error,
# 5 no tests): the statuses read decide, as they would for any run.
_PYTEST_FAILED = 1


@dataclass(frozen=True)
class RewardRun:
    """One reward run: the grade, the log it was read from, and the test process's output."""

    grade: GradeResult
    log: str
    """What `grade` read: harness lines and the test-output section."""
    output: str = ""
    """When the grader ran the tests: the test process's own output, kept for people, never
    graded (the code under test can print anything there). Empty otherwise: it is the log's
    test-output section."""
    after_patch: bool = False
    """An infra_error that happened once the patch was applied: the patch may have caused it
    (`deepswe.env.episode.grade_patch` checks the clean tree before calling it infra)."""

    @property
    def text(self) -> str:
        """The log, then the test process's output: what a person reads (test_output.txt)."""
        if not self.output:
            return self.log
        return f"{self.log}\n\n--- the test process's output (not graded) ---\n{self.output}"


def graded_paths(task: Task) -> list[str]:
    """Repository files that belong to the task, not to the agent: those holding a graded test
    (`hidden.graded_files`) and those the test patch touches; for R2E-Gym's rows, whose hidden
    tests are whole files and no test patch is applied (as R2E-Gym grades), the r2e_tests path."""
    paths = set(task.hidden.graded_files)
    if uses_r2e_layout(task):
        paths.add(TESTS_LINK)
    elif task.hidden.test_patch:
        paths |= {f.path for f in PatchSet(task.hidden.test_patch)}
    return sorted(paths)


def restore_script(paths: list[str]) -> str:
    """Bash that puts each path back as the start snapshot has it, or removes it if it was not
    there (run in the repository)."""
    lines = []
    for path in paths:
        q, at = shlex.quote(path), shlex.quote(f"{START_REF}:{path}")
        lines.append(
            f"if git cat-file -e {at} 2>/dev/null; then rm -rf {q}; "
            f"git checkout -q {START_REF} -- {q} || exit 4; else rm -rf {q}; fi"
        )
    return "\n".join(lines)


def hidden_tests_script(task: Task, also_restore: list[str] = ()) -> str:
    """Bash that puts the hidden tests in place (run in the repository, after the patch).

    Every graded path (and each of `also_restore`) is first put back as it was when the sandbox
    started (the start snapshot, `deepswe.env.workspace`), or removed if it was not there: a
    patch cannot rewrite the tests it is graded by, and a file the agent created where the test
    patch adds one does not make the task's own test patch fail to apply. SWE-bench's eval
    script does the same for the files its test patch touches (`git checkout <base_commit>
    <files>`); under SWE-bench's rules other files, a conftest.py included, are graded as the
    patch left them.
    """
    paths = sorted(set(graded_paths(task)) | set(also_restore))
    lines = [restore_script(paths)] if paths else []
    if uses_r2e_layout(task):
        lines.append(f"{link_script()} || exit 3")
    elif task.hidden.test_patch:
        lines.append(f"git apply --verbose {TEST_PATCH_PATH} >&2 || exit 3")
    return "\n".join(lines)


def run_reward(task: Task, patch: str, sandbox: Sandbox, *, workdir: str = "/testbed") -> RewardRun:
    """Apply `patch`, add the hidden tests, run them; return the grade and its log.

    `sandbox` must be fresh (just started from the task's image); it is not closed here.
    """
    log: list[str] = []
    applied = False
    try:
        if uses_r2e_layout(task):
            hide_grading_material(sandbox, workdir)
        take_snapshot(sandbox, workdir)
        if patch.strip():
            sandbox.write_file(PATCH_PATH, patch if patch.endswith("\n") else patch + "\n")
            r = sandbox.run(patch_apply_script(PATCH_PATH, workdir), timeout=APPLY_TIMEOUT_S)
            log.append(r.output)
            if r.timed_out:
                raise SandboxError(f"applying the patch timed out after {APPLY_TIMEOUT_S:.0f}s")
            if r.exit_code != 0:
                return RewardRun(grade(task, "\n".join(log), apply_ok=False), "\n".join(log))
            applied = True
        strict = task.test_spec.grading_rules == "strict"
        token = secrets.token_hex(8)
        grader_dir = f"/tmp/deepswe-grader-{token}"
        owned = (
            own_pytest_command(task.test_spec.command, f"{grader_dir}/deepswe_pytest.py",
                               f"{grader_dir}/report")
            if strict else None
        )  # fmt: skip
        changed = changed_paths(sandbox, workdir) if applied else {}
        changes = _test_infra(sandbox, task, changed, owned, strict, workdir)
        log += [infra_change_line(c) for c in changes]
        # What the patch still changes when the tests run: a pytest plugin loaded from one of
        # these files is the patch's (the launcher reports it).
        exempt = _exempt(task) | {c.path for c in changes if c.restored}
        touched = sorted(p for p in changed if p not in exempt)
        if task.hidden.test_patch and not uses_r2e_layout(task):
            sandbox.write_file(TEST_PATCH_PATH, task.hidden.test_patch)
        for name, source in task.hidden.test_files.items():
            sandbox.write_file(f"{HIDDEN_TESTS_DIR}/{name}", source)
        setup = hidden_tests_script(task, [c.path for c in changes if c.restored])
        if uses_r2e_layout(task):
            extra, script = misc_files(task)
            for path, text in extra.items():
                sandbox.write_file(path, text)
            setup = f"{setup}\n{script}" if script else setup
        if setup:
            r = sandbox.run(setup, cwd=workdir, timeout=120)
            if r.exit_code != 0:
                # On the patched tree the patch may be why (a file where the test patch needs a
                # folder); grade_patch checks the clean tree before calling it infra.
                log.append(f"{INFRA_ERROR} (hidden tests did not apply)\n{r.output}")
                text = "\n".join(log)
                return RewardRun(grade(task, text, infra_error=True), text, after_patch=applied)
        if owned is not None:
            return _run_owned(task, sandbox, owned, grader_dir, touched, log, workdir)
        spec = task.test_spec
        tests = sandbox.run(f"{spec.command} 2>&1", cwd=workdir, timeout=spec.timeout_s)
        log += [START_TEST_OUTPUT, tests.stdout, END_TEST_OUTPUT]
        if tests.timed_out:
            log.append(TESTS_TIMEOUT)
        text = "\n".join(log)
        return RewardRun(grade(task, text, timed_out=tests.timed_out), text)
    except (SandboxError, UnidiffParseError) as exc:
        # UnidiffParseError: the task's own test patch is malformed, a broken task.
        log.append(f"{INFRA_ERROR} ({type(exc).__name__}: {exc})")
        text = "\n".join(log)
        return RewardRun(grade(task, text, infra_error=True), text, after_patch=applied)


def _exempt(task: Task) -> set[str]:
    """Files that are the task's to change: the gold patch's and the graded ones."""
    return set(patch_paths(task.gold_patch or "")[0]) | set(graded_paths(task))


def _test_infra(
    sandbox: Sandbox,
    task: Task,
    changed: dict[str, str],
    owned: OwnedCommand | None,
    strict: bool,
    workdir: str,
) -> list[TestInfraChange]:
    """The test infrastructure the applied patch changed, each marked restored under strict
    rules. The gold patch's own files are the task's and are left alone."""
    if not changed:
        return []
    exempt = _exempt(task)
    ours = {p: s for p, s in changed.items() if p not in exempt}
    python = owned.interpreter if owned else '"$(command -v python || command -v python3)"'
    found = scan_test_infra(sandbox, ours, python, workdir)
    return [TestInfraChange(path=p, why=w, restored=strict) for p, w in found.items()]


def _run_owned(
    task: Task,
    sandbox: Sandbox,
    owned: OwnedCommand,
    grader_dir: str,
    touched: list[str],
    log: list[str],
    workdir: str,
) -> RewardRun:
    """The tests run by the grader's launcher; the section graded is its report."""
    report = f"{grader_dir}/report"
    sandbox.write_file(f"{grader_dir}/deepswe_pytest.py", LAUNCHER.read_text())
    sandbox.write_file(f"{report}.touched", "".join(p + "\n" for p in touched))
    nonce = secrets.token_hex(16)
    sandbox.write_file(f"{report}.nonce", nonce)
    spec = task.test_spec
    tests = sandbox.run(f"{owned.command} 2>&1", cwd=workdir, timeout=spec.timeout_s)
    try:
        text = sandbox.read_file(report).decode("utf-8", errors="replace")
    except SandboxError:
        text = ""
    rep = read_report(text, nonce)
    if not rep.started and not tests.timed_out:
        raise SandboxError(
            f"the grader's pytest launcher did not start (exit {tests.exit_code}): "
            f"{tests.stdout[-500:]}"
        )
    log += [GRADER_RAN_TESTS, START_TEST_OUTPUT, rep.summary, END_TEST_OUTPUT]
    if tests.timed_out:
        log.append(TESTS_TIMEOUT)
    else:
        why = _rejection(rep.returned, tests.exit_code, rep.summary, rep.tampered)
        if why:
            log.append(f"{TEST_RUN_REJECTED} ({why})")
    graded = "\n".join(log)
    return RewardRun(grade(task, graded, timed_out=tests.timed_out), graded, output=tests.stdout)


def _rejection(returned: int | None, exit_code: int, summary: str, tampered: list[str]) -> str:
    """Why a finished run's report cannot be trusted, or "" (statuses then decide).

    The process's own exit status is not compared with pytest's: what runs after pytest returns
    (atexit handlers, a C extension crashing at shutdown) cannot change the report, and a
    wrapper such as xvfb-run may change the status."""
    if tampered:
        return "; ".join(tampered)
    if returned is None:
        return f"the test process ended before pytest returned (exit {exit_code})"
    failures = any(line.startswith(("FAILED ", "ERROR ")) for line in summary.splitlines())
    if returned == 0 and failures:
        return "pytest exited 0 with failures in its report"
    if returned == _PYTEST_FAILED and not failures:
        return "pytest exited 1 with no failure in its report"
    return ""


__all__ = [
    "Outcome",
    "RewardRun",
    "graded_paths",
    "hidden_tests_script",
    "restore_script",
    "run_reward",
]
