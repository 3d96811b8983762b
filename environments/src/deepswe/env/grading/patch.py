"""The bash snippet that applies a patch in a sandbox and prints a marker `grade` reads."""

from __future__ import annotations

import shlex

from deepswe.env.grading.markers import APPLY_PATCH_FAIL, APPLY_PATCH_PASS

# SWE-bench's fallback chain, in its order (swebench 4.1.0, harness/run_evaluation.py
# GIT_APPLY_CMDS). The file path is appended to each.
APPLY_COMMANDS: tuple[str, ...] = (
    "git apply --verbose",
    "git apply --verbose --reject",
    "patch --batch --fuzz=5 -p1 -i",
)


def patch_apply_script(patch_path: str, cwd: str = "/testbed") -> str:
    """Bash that applies the patch at `patch_path` inside `cwd`, trying each command in turn.

    Prints `>>>>> Applied Patch (<command>)` and exits 0 on the first success, else prints
    `>>>>> Patch Apply Failed` and exits 1. It runs in a subshell, so it can be embedded in a
    longer script without changing its directory or ending it. As in SWE-bench, a failed
    `git apply --reject` may leave the hunks that did apply (and `.rej` files) for `patch`
    to meet; we keep that behaviour so verdicts match SWE-bench's harness.
    """
    path, where = shlex.quote(patch_path), shlex.quote(cwd)
    lines = [
        "(",
        f"cd {where} || {{ echo {shlex.quote(APPLY_PATCH_FAIL + ' (no directory ' + cwd + ')')}; exit 1; }}",
    ]
    for i, command in enumerate(APPLY_COMMANDS):
        keyword = "if" if i == 0 else "elif"
        done = shlex.quote(f"{APPLY_PATCH_PASS} ({command})")
        lines.append(f"{keyword} {command} {path}; then echo {done}")
    lines += [f"else echo {shlex.quote(APPLY_PATCH_FAIL)}; exit 1", "fi", ")"]
    return "\n".join(lines) + "\n"
