"""The bash snippet that applies a patch in a sandbox and prints a marker `grade` reads.

SWE-bench's fallback chain, in its order, with two changes that matter only for patches that
SWE-bench itself half-applies (swebench 4.1.0, harness/run_evaluation.py GIT_APPLY_CMDS):

1. Each attempt starts from the sandbox's start snapshot (`deepswe.env.workspace`). In SWE-bench
   a failed `git apply --reject` leaves the hunks it could apply, and `patch` then meets them.
2. `patch` runs with `--forward`. With `--batch` alone, a hunk that looks already applied is
   applied in REVERSE and patch exits 0: the fix is undone and the log still says "Applied
   Patch". That is how a correct fix whose patch also carried files the image already had
   (`*.egg-info`) was graded unresolved. With `--forward` such a patch fails, and the verdict
   says so (patch_apply_failed).

A patch that `git apply` takes (every patch our agents produce, and nearly all of SWE-bench's)
is applied exactly as SWE-bench applies it.
"""

from __future__ import annotations

import shlex

from deepswe.env.grading.markers import APPLY_PATCH_FAIL, APPLY_PATCH_PASS, RESET_FAILED
from deepswe.env.workspace import RESTORE_FUNCTION

# The script's exit status when the tree cannot be put back between attempts (infrastructure).
RESET_EXIT = 2
# The file path is appended to each.
APPLY_COMMANDS: tuple[str, ...] = (
    "git apply --verbose",
    "git apply --verbose --reject",
    "patch --batch --fuzz=5 --forward -p1 -i",
)


def patch_apply_script(patch_path: str, cwd: str = "/testbed") -> str:
    """Bash that applies the patch at `patch_path` inside `cwd`, trying each command in turn.

    The repository must have a start snapshot (`workspace.snapshot_script`), to which it is
    restored before every attempt after the first. Prints `>>>>> Applied Patch (<command>)` and
    exits 0 on the first success; else prints `>>>>> Patch Apply Failed` and exits 1; prints
    `>>>>> Reset Failed` and exits 2 when the tree cannot be restored (a harness failure). It
    runs in a subshell, so it can be embedded in a longer script without changing its
    directory or ending it.
    """
    path, where = shlex.quote(patch_path), shlex.quote(cwd)
    reset_failed = shlex.quote(f"{RESET_FAILED} (cannot restore {cwd} to its start)")
    lines = [
        "(",
        f"cd {where} || {{ echo {shlex.quote(APPLY_PATCH_FAIL + ' (no directory ' + cwd + ')')}; exit 1; }}",
        RESTORE_FUNCTION,
        "deepswe_attempt() {",
        f'  if [ "$1" -gt 0 ]; then deepswe_restore || {{ echo {reset_failed}; exit {RESET_EXIT}; }}; fi',
        '  shift; "$@"',
        "}",
    ]
    for i, command in enumerate(APPLY_COMMANDS):
        keyword = "if" if i == 0 else "elif"
        done = shlex.quote(f"{APPLY_PATCH_PASS} ({command})")
        lines.append(f"{keyword} deepswe_attempt {i} {command} {path}; then echo {done}")
    lines += [f"else echo {shlex.quote(APPLY_PATCH_FAIL)}; exit 1", "fi", ")"]
    return "\n".join(lines) + "\n"
