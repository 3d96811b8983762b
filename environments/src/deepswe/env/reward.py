"""The reward run: a patch graded in a fresh sandbox of the task's image.

A fresh sandbox, not the one the agent worked in: whatever the agent did to its environment
(`rm -rf /testbed`, a broken venv) cannot change the verdict, and the hidden tests meet exactly
base_commit + patch, as in SWE-bench's harness. The container only produces the log; the verdict
is `grading.grade(task, log)`, a pure function.
"""

from __future__ import annotations

import shlex

from unidiff import PatchSet

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

PATCH_PATH = "/tmp/deepswe/model.patch"
TEST_PATCH_PATH = "/tmp/deepswe/test.patch"


def hidden_tests_script(task: Task) -> str:
    """Bash that puts the hidden tests in place.

    As SWE-bench's eval script does, every file the test patch touches is first reset to
    base_commit (or removed, if base_commit lacks it): a model that edited or created one of
    them must not make the task's own test patch fail to apply.
    """
    if not task.hidden.test_patch:
        return ""
    lines = []
    for path in sorted({f.path for f in PatchSet(task.hidden.test_patch)}):
        q = shlex.quote(path)
        lines.append(f"git checkout -q HEAD -- {q} 2>/dev/null || rm -f {q}")
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
                # The task's own test patch does not apply to its own base: a broken task,
                # not a wrong answer.
                log.append(f"{INFRA_ERROR} (hidden tests did not apply)\n{r.output}")
                return grade(task, "\n".join(log), infra_error=True), "\n".join(log)
        spec = task.test_spec
        tests = sandbox.run(f"{spec.command} 2>&1", cwd=workdir, timeout=spec.timeout_s)
        log += [START_TEST_OUTPUT, tests.stdout, END_TEST_OUTPUT]
        if tests.timed_out:
            log.append(TESTS_TIMEOUT)
        text = "\n".join(log)
        return grade(task, text, timed_out=tests.timed_out), text
    except SandboxError as exc:
        log.append(f"{INFRA_ERROR} ({exc})")
        text = "\n".join(log)
        return grade(task, text, infra_error=True), text


__all__ = ["Outcome", "hidden_tests_script", "run_reward"]
