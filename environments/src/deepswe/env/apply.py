"""The agent's patch applied in a sandbox, as the reward run applies it: its paths checked
(grading.patch_check), then SWE-bench's apply chain from the start snapshot (grading.patch). The
verifiers apply patches through the same function, so both see one apply step."""

from __future__ import annotations

from dataclasses import dataclass

from deepswe.env.grading.patch import RESET_EXIT, patch_apply_script
from deepswe.env.grading.patch_check import check_in_tree, check_text
from deepswe.env.sandbox import Sandbox, SandboxError

PATCH_PATH = "/tmp/deepswe/model.patch"
APPLY_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Applied:
    """What applying a patch did: `ok`, the paths it names, why not (empty when it applied or
    when every attempt simply failed), and what the apply printed (for people, never graded)."""

    ok: bool
    paths: list[str]
    why: str = ""
    output: str = ""


def apply_patch(
    sandbox: Sandbox, patch: str, workdir: str = "/testbed", path: str = PATCH_PATH
) -> Applied:
    """`patch` checked (grading.patch_check: paths out of the tree, into .git, ignored,
    bytecode...) and applied by SWE-bench's chain from the start snapshot (`take_snapshot` first).
    The script's exit status decides, never what it printed (a patch's own lines are echoed).
    A timeout on a sandbox that still answers is the patch's (GNU patch's fuzz grinding on), and
    so is a tree check of its paths that fails there (refused); the patch and its paths reach
    the sandbox in files, never on a command line (thousands of new files must grade).
    SandboxError when the sandbox does not answer or cannot be put back between attempts."""
    if not patch.strip():
        return Applied(ok=True, paths=[])
    paths, refused = check_text(patch)
    refused = refused or check_in_tree(sandbox, paths, workdir)
    if refused:
        return Applied(ok=False, paths=paths, why=f"refused before any attempt: {refused}")
    sandbox.write_file(path, patch if patch.endswith("\n") else patch + "\n")
    r = sandbox.run(patch_apply_script(path, workdir), timeout=APPLY_TIMEOUT_S)
    if r.timed_out:
        if sandbox.run("true", timeout=30).exit_code != 0:
            raise SandboxError(f"applying the patch timed out after {APPLY_TIMEOUT_S:.0f}s")
        why = f"timed out after {APPLY_TIMEOUT_S:.0f}s"
        return Applied(ok=False, paths=paths, why=why, output=r.output)
    if r.exit_code == RESET_EXIT:
        raise SandboxError("the sandbox could not be put back to its start between attempts")
    return Applied(ok=r.exit_code == 0, paths=paths, output=r.output)


__all__ = ["APPLY_TIMEOUT_S", "PATCH_PATH", "Applied", "apply_patch"]
