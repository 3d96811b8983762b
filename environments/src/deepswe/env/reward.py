"""The reward run: a patch graded in a fresh sandbox of the task's image.

A fresh sandbox, not the one the agent worked in: whatever the agent did to its environment
(`rm -rf /testbed`, a broken venv) cannot change the verdict, and the hidden tests meet exactly
base_commit + patch, as in SWE-bench's harness. The container only produces the log; the verdict
is `grading.grade(task, log)`, a pure function.
"""

from __future__ import annotations

import shlex

from unidiff import PatchSet
from unidiff.errors import UnidiffParseError

from deepswe.data.task import Task
from deepswe.env.grading import grade
from deepswe.env.grading.markers import (
    END_TEST_OUTPUT,
    INFRA_ERROR,
    START_TEST_OUTPUT,
    TESTS_TIMEOUT,
)
from deepswe.env.grading.outcomes import GradeResult, Outcome
from deepswe.env.grading.patch import patch_apply_script
from deepswe.env.sandbox import Sandbox, SandboxError
from deepswe.env.workspace import START_REF, take_snapshot

PATCH_PATH = "/tmp/deepswe/model.patch"
TEST_PATCH_PATH = "/tmp/deepswe/test.patch"


def graded_paths(task: Task) -> list[str]:
    """Repository files that belong to the task, not to the agent: those holding a graded test
    (`hidden.graded_files`) and those the test patch touches."""
    paths = set(task.hidden.graded_files)
    if task.hidden.test_patch:
        paths |= {f.path for f in PatchSet(task.hidden.test_patch)}
    return sorted(paths)


def hidden_tests_script(task: Task) -> str:
    """Bash that puts the hidden tests in place (run in the repository, after the patch).

    Every graded path is first put back as it was when the sandbox started (the start
    snapshot, `deepswe.env.workspace`), or removed if it was not there: a patch cannot rewrite
    the tests it is graded by, and a file the agent created where the test patch adds one does
    not make the task's own test patch fail to apply. SWE-bench's eval script does the same for
    the files its test patch touches (`git checkout <base_commit> <files>`); other files, e.g.
    a conftest.py, are graded as the patch left them, as in SWE-bench.
    """
    paths = graded_paths(task)
    if not paths:
        return ""
    lines = []
    for path in paths:
        q, at = shlex.quote(path), shlex.quote(f"{START_REF}:{path}")
        lines.append(
            f"if git cat-file -e {at} 2>/dev/null; then rm -rf {q}; "
            f"git checkout -q {START_REF} -- {q} || exit 4; else rm -rf {q}; fi"
        )
    if task.hidden.test_patch:
        lines.append(f"git apply --verbose {TEST_PATCH_PATH} >&2 || exit 3")
    return "\n".join(lines)


def run_reward(
    task: Task, patch: str, sandbox: Sandbox, *, workdir: str = "/testbed"
) -> tuple[GradeResult, str]:
    """Apply `patch`, add the hidden tests, run them; return the grade and the full log.

    `sandbox` must be fresh (just started from the task's image); it is not closed here.
    """
    log: list[str] = []
    try:
        take_snapshot(sandbox, workdir)
        if patch.strip():
            sandbox.write_file(PATCH_PATH, patch if patch.endswith("\n") else patch + "\n")
            applied = sandbox.run(patch_apply_script(PATCH_PATH, workdir), timeout=120)
            log.append(applied.output)
            if applied.exit_code != 0:
                return grade(task, "\n".join(log), apply_ok=False), "\n".join(log)
        if task.hidden.test_patch:
            sandbox.write_file(TEST_PATCH_PATH, task.hidden.test_patch)
        for name, source in task.hidden.test_files.items():
            sandbox.write_file(f"/r2e_tests/{name}", source)
        setup = hidden_tests_script(task)
        if setup:
            r = sandbox.run(setup, cwd=workdir, timeout=120)
            if r.exit_code != 0:
                # The task's own tests cannot be put in place on its own start (its test patch
                # does not apply): a broken task or harness, not a wrong answer.
                log.append(f"{INFRA_ERROR} (hidden tests did not apply)\n{r.output}")
                return grade(task, "\n".join(log), infra_error=True), "\n".join(log)
        spec = task.test_spec
        tests = sandbox.run(f"{spec.command} 2>&1", cwd=workdir, timeout=spec.timeout_s)
        log += [START_TEST_OUTPUT, tests.stdout, END_TEST_OUTPUT]
        if tests.timed_out:
            log.append(TESTS_TIMEOUT)
        text = "\n".join(log)
        return grade(task, text, timed_out=tests.timed_out), text
    except (SandboxError, UnidiffParseError) as exc:
        # UnidiffParseError: the task's own test patch is malformed, a broken task.
        log.append(f"{INFRA_ERROR} ({type(exc).__name__}: {exc})")
        text = "\n".join(log)
        return grade(task, text, infra_error=True), text


__all__ = ["Outcome", "graded_paths", "hidden_tests_script", "run_reward"]
