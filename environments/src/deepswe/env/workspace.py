"""The repository as its sandbox started, and the agent's change: the patch that gets graded.

    snapshot (sandbox start) -> the agent works -> agent_patch = start snapshot vs. the tree now

The patch is the agent's change and nothing else. Diffing against HEAD (`git add -A && git diff
--cached`, what R2E-Gym and SWE-agent do) gets two things wrong: files the image's own install
left untracked (`*.egg-info`, build outputs) enter every patch and then fail to apply in the
fresh grading sandbox, where they already exist; and an agent that runs `git commit` moves HEAD
and submits nothing. So the start is recorded once, before the agent acts, as a git tree (every
file that is tracked or untracked-but-not-ignored) under `START_REF`, with the index that listed
it beside the git dir's other files; the patch is that tree against the working tree when the
agent stops, whatever happened to HEAD, the index, branches or stashes in between.

Bytecode never enters a snapshot or a patch (`__pycache__/`, `*.pyc`, `*.pyo`): images set
PYTHONDONTWRITEBYTECODE, but an agent can still write it. A binary file the agent really changed
is carried (`--binary`). Renames are written as delete + add (`--no-renames`), which every apply
command in the grader's chain understands. The same snapshot lets the grader put a sandbox back
to its start between apply attempts (`RESTORE_FUNCTION`) and restore graded test files.

Everything here runs inside the sandbox as bash with git; nothing is installed there.
"""

from __future__ import annotations

import shlex

from deepswe.env.sandbox import Sandbox, SandboxError

START_REF = "refs/deepswe/start"
START_INDEX = "deepswe-start.index"  # in the repository's git dir, beside its own index
PATCH_FILE = "/tmp/deepswe/agent.patch"
MAX_PATCH_BYTES = 64 << 20  # what one helper read returns (server.py's default max_bytes)

# Exit status of the scripts below when the start snapshot is gone: the agent removed the
# repository (or its .git, or the ref). Its change cannot be taken; that is the agent's doing.
GONE = 3

# Settings an agent could have put in .git/config that would change what `add` or `diff` write.
_GIT = (
    "git -c core.hooksPath=/dev/null -c core.quotepath=false -c core.fsmonitor=false "
    "-c core.autocrlf=false "
    "-c diff.noprefix=false -c diff.mnemonicPrefix=false -c diff.relative=false "
    "-c color.ui=false"
)
_PATHS = "-- . ':(exclude,glob)**/__pycache__/**' ':(exclude,glob)**/*.py[co]'"

# Shell functions shared by the scripts. `_deepswe_index` hashes the working tree into a private
# index seeded from the start index (so only files whose stat changed are read again) and leaves
# its path in $_d_idx; the repository's own index is never touched. Every index copy keeps its
# source's mtime (`cp -p`): git trusts an entry's stat data only when the file is older than the
# index file, so a fresh mtime on a copy would hide an edit that kept the file's size and fell in
# the same second as the index was written ("racy git").
_FUNCTIONS = f"""\
_deepswe_git() {{ {_GIT} "$@"; }}
_deepswe_has_start() {{
  _deepswe_git rev-parse -q --verify '{START_REF}^{{tree}}' >/dev/null 2>&1 \\
    && test -f "$(_deepswe_git rev-parse --git-dir)/{START_INDEX}"
}}
_deepswe_index() {{
  _d_idx=$(mktemp) || return 1
  cp -p "$(_deepswe_git rev-parse --git-dir)/{START_INDEX}" "$_d_idx" || return {GONE}
  GIT_INDEX_FILE=$_d_idx _deepswe_git add -A {_PATHS} >&2
}}
"""

RESTORE_FUNCTION = (
    _FUNCTIONS
    + f"""\
# Put the working tree back to the start snapshot: changed files rewritten, files that were not
# there at the start (new files, .rej files) removed; ignored files are left alone.
deepswe_restore() {{
  _deepswe_has_start || return {GONE}
  _deepswe_index || return $?
  GIT_INDEX_FILE=$_d_idx _deepswe_git read-tree --reset -u '{START_REF}' >&2
  _d_rc=$?
  rm -f "$_d_idx"
  return $_d_rc
}}
"""
)


def snapshot_script(workdir: str = "/testbed") -> str:
    """Bash that records `workdir` as it is now under START_REF (run once, at sandbox start)."""
    return f"""{_FUNCTIONS}
cd {shlex.quote(workdir)} || exit 1
_deepswe_git rev-parse --git-dir >/dev/null || {{ echo "{workdir} is not a git repository" >&2; exit 1; }}
_d_gd=$(_deepswe_git rev-parse --git-dir)
cp -p "$_d_gd/index" "$_d_gd/{START_INDEX}" 2>/dev/null || rm -f "$_d_gd/{START_INDEX}"
GIT_INDEX_FILE="$_d_gd/{START_INDEX}" _deepswe_git add -A {_PATHS} >&2 || exit 1
_d_tree=$(GIT_INDEX_FILE="$_d_gd/{START_INDEX}" _deepswe_git write-tree) || exit 1
_deepswe_git update-ref {START_REF} "$_d_tree" || exit 1
echo "$_d_tree"
"""


def diff_script(workdir: str = "/testbed", out: str = PATCH_FILE) -> str:
    """Bash that writes the start snapshot vs. the working tree, as a git diff, to `out` and
    prints its size in bytes. Exits GONE when there is no start snapshot to diff against."""
    q = shlex.quote(out)
    return f"""{_FUNCTIONS}
cd {shlex.quote(workdir)} 2>/dev/null || exit {GONE}
_deepswe_has_start || exit {GONE}
_deepswe_index || exit $?
mkdir -p "$(dirname {q})" || exit 1
GIT_INDEX_FILE=$_d_idx _deepswe_git diff --cached --binary --no-color --no-ext-diff \\
  --no-textconv --no-renames --src-prefix=a/ --dst-prefix=b/ '{START_REF}' > {q} || exit 1
rm -f "$_d_idx"
wc -c < {q}
"""


def changed_paths_script(workdir: str = "/testbed") -> str:
    """Bash that prints, NUL-separated, `STATUS\0PATH\0` for every path that differs between
    the start snapshot and the working tree (A added, M modified, D deleted, T type changed).
    Exits GONE when there is no start snapshot."""
    return f"""{_FUNCTIONS}
cd {shlex.quote(workdir)} 2>/dev/null || exit {GONE}
_deepswe_has_start || exit {GONE}
_deepswe_index || exit $?
GIT_INDEX_FILE=$_d_idx _deepswe_git diff --cached --name-status -z --no-renames '{START_REF}' || exit 1
rm -f "$_d_idx"
"""


def parse_name_status(text: str) -> dict[str, str]:
    """`changed_paths_script`'s output -> {path: status letter}."""
    fields = text.split("\0")
    return {fields[i + 1]: fields[i][:1] for i in range(0, len(fields) - 1, 2) if fields[i]}


def changed_paths(sandbox: Sandbox, workdir: str = "/testbed") -> dict[str, str]:
    """{path: status letter} of every path that differs from the start snapshot now."""
    r = sandbox.run(changed_paths_script(workdir), cwd="/", timeout=300)
    if r.timed_out or r.exit_code != 0:
        why = "timed out" if r.timed_out else f"exit {r.exit_code}: {r.stderr.strip()[-300:]}"
        raise SandboxError(f"cannot list the changes of {workdir} ({why})")
    return parse_name_status(r.stdout)


class PatchNotTaken(Exception):
    """The agent's change could not be taken because the agent destroyed the start snapshot
    (removed the repository or its git data). Not an infrastructure failure."""


def take_snapshot(sandbox: Sandbox, workdir: str = "/testbed", timeout: float = 300.0) -> str:
    """Record the start of `workdir` in `sandbox`; returns the tree id. SandboxError if the
    repository cannot be snapshotted (not a git repository, git failed, timed out)."""
    r = sandbox.run(snapshot_script(workdir), cwd="/", timeout=timeout)
    if r.timed_out or r.exit_code != 0:
        why = "timed out" if r.timed_out else f"exit {r.exit_code}: {r.stderr.strip()[-500:]}"
        raise SandboxError(f"cannot snapshot {workdir} at sandbox start ({why})")
    return r.stdout.strip()


def agent_patch(sandbox: Sandbox, workdir: str = "/testbed", timeout: float = 300.0) -> str:
    """The agent's change in `sandbox` since `take_snapshot`, as a git diff ("" for none).

    Raises PatchNotTaken when the agent removed the snapshot, SandboxError when taking the patch
    failed or timed out (an infrastructure failure: never an empty patch).
    """
    r = sandbox.run(diff_script(workdir), cwd="/", timeout=timeout)
    if r.timed_out:
        raise SandboxError(f"taking the patch timed out after {timeout:.0f}s")
    if r.exit_code == GONE:
        raise PatchNotTaken(
            f"the start snapshot of {workdir} is gone (the agent removed the repository or its "
            "git data): no patch to submit"
        )
    if r.exit_code != 0:
        raise SandboxError(f"taking the patch failed (exit {r.exit_code}): {r.stderr[-500:]}")
    size = int(r.stdout.strip() or 0)
    if size == 0:
        return ""
    if size > MAX_PATCH_BYTES:
        raise PatchNotTaken(f"the patch is {size} bytes, over the {MAX_PATCH_BYTES} byte limit")
    data = sandbox.read_file(PATCH_FILE)
    if len(data) != size:
        raise SandboxError(f"read {len(data)} of the patch's {size} bytes")
    # Text patches are UTF-8 almost always; a byte that is not stays visible as U+FFFD.
    return data.decode("utf-8", errors="replace")


__all__ = [
    "GONE",
    "PATCH_FILE",
    "RESTORE_FUNCTION",
    "START_REF",
    "PatchNotTaken",
    "agent_patch",
    "changed_paths",
    "changed_paths_script",
    "diff_script",
    "parse_name_status",
    "snapshot_script",
    "take_snapshot",
]
