"""The task's hidden tests put in place in a grading sandbox: which repository paths are the
task's (graded), the bash that puts them back as the start snapshot has them, the ids the verdict
reads. Used by the reward run (`deepswe.env.reward`) and by the execution-based verifiers.

Paths reach the sandbox in a file, never on a command line: a patch may name thousands of files
(`also_restore` comes from it).
"""

from __future__ import annotations

import shlex

from unidiff import PatchSet

from deepswe.data.task import Task
from deepswe.env.grading.markers import strip_ansi
from deepswe.env.grading.patch_check import write_paths
from deepswe.env.r2e_layout import TESTS_LINK, link_script, uses_r2e_layout
from deepswe.env.sandbox import Sandbox
from deepswe.env.workspace import START_REF

TEST_PATCH_PATH = "/tmp/deepswe/test.patch"
# The paths `hidden_tests_script` puts back, NUL-ended (a patch's own paths among them).
RESTORE_LIST_PATH = "/tmp/deepswe/restore.list"


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


def restore_script(list_path: str = RESTORE_LIST_PATH) -> str:
    """Bash that puts each path listed in the file `list_path` (NUL-ended, as `write_paths`
    writes them) back as the start snapshot has it, or removes it if it was not there (run in
    the repository); exit 4 when one cannot be put back or the list is missing. The paths never
    reach a command line: a patch may name thousands of files (`also_restore` comes from it)."""
    listed = shlex.quote(list_path)
    return (
        f"[ -f {listed} ] || exit 4\n"
        f"while IFS= read -r -d '' p; do\n"
        f'  if git cat-file -e "{START_REF}:$p" 2>/dev/null; then rm -rf -- "$p"; '
        f'git -c core.hooksPath=/dev/null checkout -q {START_REF} -- "$p" || exit 4; '
        f'else rm -rf -- "$p"; fi\n'
        f"done < {listed}"
    )


def restore_paths(task: Task, also_restore: list[str] = ()) -> list[str]:
    """What `hidden_tests_script` puts back: every graded path and each of `also_restore`."""
    return sorted(set(graded_paths(task)) | set(also_restore))


def write_restore_list(
    sandbox: Sandbox, task: Task, also_restore: list[str] = (), path: str = RESTORE_LIST_PATH
) -> None:
    """`restore_paths` written where `hidden_tests_script` reads them (before it runs)."""
    write_paths(sandbox, path, restore_paths(task, also_restore))


def hidden_tests_script(
    task: Task, also_restore: list[str] = (), list_path: str = RESTORE_LIST_PATH
) -> str:
    """Bash that puts the hidden tests in place (run in the repository, after the patch).

    Every graded path (and each of `also_restore`) is first put back as it was when the sandbox
    started (the start snapshot, `deepswe.env.workspace`), or removed if it was not there: a
    patch cannot rewrite the tests it is graded by, and a file the agent created where the test
    patch adds one does not make the task's own test patch fail to apply. SWE-bench's eval
    script does the same for the files its test patch touches (`git checkout <base_commit>
    <files>`); under SWE-bench's rules other files, a conftest.py included, are graded as the
    patch left them. The script reads those paths from `list_path`: the caller writes them
    there first (`write_restore_list`).
    """
    paths = restore_paths(task, also_restore)
    lines = [restore_script(list_path)] if paths else []
    if uses_r2e_layout(task):
        lines.append(f"{link_script()} || exit 3")
    elif task.hidden.test_patch:
        lines.append(
            f"git -c core.hooksPath=/dev/null apply --verbose {TEST_PATCH_PATH} >&2 || exit 3"
        )
    return "\n".join(lines)


def graded_ids(task: Task) -> list[str]:
    """The test ids the verdict reads: the launcher places its canaries beside them."""
    ids = [*task.hidden.fail_to_pass, *task.hidden.pass_to_pass]
    return ids + [strip_ansi(k) for k in task.hidden.expected_statuses or {}]


__all__ = [
    "RESTORE_LIST_PATH",
    "TEST_PATCH_PATH",
    "graded_ids",
    "graded_paths",
    "hidden_tests_script",
    "restore_paths",
    "restore_script",
    "write_restore_list",
]
