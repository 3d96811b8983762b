"""What a patch may touch, checked before any apply attempt: the same rule the agent's own patch
obeys by construction (`deepswe.env.workspace`), applied to whatever text is submitted.

The grader's apply chain ends in GNU `patch`, which writes where a diff's headers point:
`.git/hooks/post-checkout` (then run as root by the grader's own `git checkout`), bytecode that
shadows a module, a path the repository ignores (so `git add -A` never lists it), or a path
through a symlink that leaves the repository. `git apply` refuses some of these and `patch`
does not, so the rule is not left to either: the paths are read here, from every line of the
diff that names a file for either tool, and a patch naming one such path is refused before the
first attempt (`patch_apply_failed`, the path named). The paths read here are also the
patch's change list: what the tree looks like to git afterwards cannot hide one.

    parse (pure: `read_patch`) -> paths refused by name -> paths refused by the tree (in the
    sandbox: ignored by the repository, or resolving outside it through a symlink)

The paths reach the sandbox in a file, never on a command line (a patch may add thousands of
files; Linux refuses one argv string over 128 KiB), and a tree check that fails on a sandbox
that still answers refuses the patch: the failure is the patch's, not infrastructure's.

Only unified diffs (git's or plain) are taken: GNU patch also reads context, normal and ed
diffs, whose file names come from elsewhere; the agent never writes one.
"""

from __future__ import annotations

import posixpath
import re
import secrets
import shlex
from dataclasses import dataclass, field

from deepswe.env.sandbox import Sandbox, SandboxError

_HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")
# Header lines that name a file for `git apply` or GNU `patch`.
_NAMING = ("--- ", "+++ ", "rename from ", "rename to ", "copy from ", "copy to ", "Index: ")
_SYMLINK_MODE = re.compile(r"^(?:new file mode|new mode) 120000\s*$")
# Lines by which GNU patch would read a context, normal or ed diff.
_OTHER_FORMATS = (
    re.compile(r"^\*{15}"),
    re.compile(r"^\*\*\* \d+(?:,\d+)? \*\*\*\*"),
    re.compile(r"^\d+(?:,\d+)?[acd]\d+(?:,\d+)?\s*$"),
)
_BYTECODE = (".pyc", ".pyo")
_C_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\", "a": "\a", "b": "\b", "f": "\f"}


@dataclass(frozen=True)
class PatchPaths:
    """What a diff names: every path, as written (prefix included), and its symlinks."""

    names: list[str] = field(default_factory=list)
    """Every file name a header line could give either tool, as written (prefix included; for
    an unquoted `diff --git` line with spaces, every way of splitting it)."""
    paths: list[str] = field(default_factory=list)
    """The repository paths the patch changes."""
    symlinks: dict[str, str] = field(default_factory=dict)
    """Repository path -> target, for each symlink the diff creates."""
    problem: str = ""
    """Why the text cannot be taken as a unified diff at all ("" when it can)."""


def _unquote(name: str) -> str:
    """A file name as git writes it: C-quoted when it holds unusual bytes."""
    if not (len(name) >= 2 and name[0] == name[-1] == '"'):
        return name
    out, i, body = [], 0, name[1:-1]
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt in "01234567" and re.match(r"[0-7]{3}", body[i + 1 : i + 4]):
                out.append(chr(int(body[i + 1 : i + 4], 8)))
                i += 4
                continue
            out.append(_C_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _header_name(line: str) -> str:
    """The file name of a `--- `/`+++ `/`rename from `... line (a timestamp after a tab dropped)."""
    rest = next(line[len(p) :] for p in _NAMING if line.startswith(p))
    rest = rest.rstrip("\n").split("\t")[0].rstrip() if not rest.startswith('"') else rest.strip()
    return _unquote(rest)


def _git_header_names(line: str) -> list[str]:
    """The names in `diff --git a/X b/Y`: both, or every plausible split when unquoted."""
    rest = line[len("diff --git ") :].rstrip("\n")
    if rest.startswith('"'):
        try:
            return [_unquote(t if t.startswith('"') else t) for t in shlex.split(rest, posix=False)]
        except ValueError:
            return [rest]
    # Unquoted names may hold spaces: every "a/... b/..." split counts.
    names = [rest]
    for m in re.finditer(r" (?=[^ ]*/)", rest):
        names += [rest[: m.start()], rest[m.end() :]]
    return names


def _git_header_pair(line: str, found: list[str]) -> list[str]:
    """The two names of a `diff --git` line when they can be told apart (quoted, or the same
    path twice, as git writes them); [] otherwise (the ---/+++ lines then name the file)."""
    if line[len("diff --git ") :].startswith('"'):
        return found[:2]
    rest = found[0]
    n = (len(rest) - 5) // 2
    return (
        [rest[: n + 2], rest[n + 3 :]] if rest == f"a/{rest[2 : n + 2]} b/{rest[2 : n + 2]}" else []
    )


def read_patch(patch: str) -> PatchPaths:
    """Every file name `patch` gives either apply tool, and the symlinks it creates (pure)."""
    names: list[str] = []
    paths: list[str] = []
    symlinks: dict[str, str] = {}
    lines = patch.splitlines()
    i, symlink_next, current = 0, False, ""
    while i < len(lines):
        line = lines[i]
        hunk = _HUNK.match(line)
        if hunk:
            old = int(hunk[1]) if hunk[1] is not None else 1
            new = int(hunk[2]) if hunk[2] is not None else 1
            body: list[str] = []
            i += 1
            while i < len(lines) and (old > 0 or new > 0):
                tag = lines[i][:1]
                if tag == " " or lines[i] == "":
                    old, new = old - 1, new - 1
                elif tag == "-":
                    old -= 1
                elif tag == "+":
                    new -= 1
                    body.append(lines[i][1:])
                elif tag != "\\":
                    why = f"a hunk of {current or 'the patch'} ends early"
                    return PatchPaths(names, paths, symlinks, why)
                i += 1
            if symlink_next and current:
                symlinks[current] = "".join(body)
                symlink_next = False
            continue
        if any(rx.match(line) for rx in _OTHER_FORMATS):
            why = f"not a unified diff (line {i + 1}: {line[:60]!r})"
            return PatchPaths(names, paths, symlinks, why)
        if line.startswith("diff --git "):
            found = _git_header_names(line)
            names += found
            paths += [_strip_prefix(n) for n in _git_header_pair(line, found)]
            symlink_next = False
        elif line.startswith(_NAMING):
            name = _header_name(line)
            names.append(name)
            if name != "/dev/null":
                paths.append(name if line.startswith(("rename", "copy")) else _strip_prefix(name))
            if line.startswith("+++ ") and name != "/dev/null":
                current = _strip_prefix(name)
        elif _SYMLINK_MODE.match(line):
            symlink_next = True
        i += 1
    return PatchPaths(names, sorted(set(paths)), symlinks)


def _strip_prefix(path: str) -> str:
    return path[2:] if path[:2] in ("a/", "b/") else path


def refused_name(path: str) -> str:
    """Why a file name from a diff may not be written, or "". Every component is looked at, so
    no `-p` strip level reaches `.git/` or climbs out with `..`."""
    if path == "/dev/null":
        return ""
    if path.startswith("/"):
        return "an absolute path"
    parts = path.split("/")
    if ".." in parts:
        return "a path that climbs out with '..'"
    if any(p.lower() == ".git" for p in parts):
        return "a path inside .git"
    if "__pycache__" in parts or path.endswith(_BYTECODE):
        return "bytecode"
    return ""


def refused_symlink(path: str, target: str) -> str:
    """Why a symlink the diff creates may not be, or "": it must stay inside the repository and
    out of .git."""
    if target.startswith("/"):
        return f"a symlink to an absolute path ({target[:80]!r})"
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
    if resolved == ".." or resolved.startswith("../"):
        return f"a symlink leaving the repository ({target[:80]!r})"
    if any(p.lower() == ".git" for p in resolved.split("/")):
        return f"a symlink into .git ({target[:80]!r})"
    return ""


def check_text(patch: str) -> tuple[list[str], str]:
    """(the repository paths `patch` changes, why it is refused or "") from its text alone."""
    read = read_patch(patch)
    if read.problem:
        return [], read.problem
    for name in read.names:
        why = refused_name(name)
        if why:
            return [], f"{why}: {name[:200]!r}"
    for path, target in read.symlinks.items():
        why = refused_symlink(path, target)
        if why:
            return [], f"{path[:200]!r}: {why}"
    return read.paths, ""


# Where the grader writes the patch's paths for the tree check (NUL-separated; one file a check,
# removed by it: a local sandbox shares the host's /tmp).
PATHS_LIST = "/tmp/deepswe/patch-paths-{key}.list"


def write_paths(sandbox: Sandbox, path: str, paths: list[str]) -> None:
    """`paths` written to the file `path` in `sandbox`, each ended by a NUL (bash reads them with
    `read -r -d ''`). Data a patch controls goes to a script through a file, never on a command
    line: Linux refuses one argv string over 128 KiB, and a patch may name thousands of files."""
    sandbox.write_file(path, "".join(f"{p}\0" for p in paths).encode("utf-8", "surrogatepass"))


def _tree_script(list_path: str, workdir: str) -> str:
    """Bash printing `ignored PATH` / `outside PATH` for each path listed (NUL-separated) in the
    file `list_path` that the repository ignores or that resolves outside it (through a symlink
    already in the tree). All paths are resolved by one `realpath` where it can (thousands of
    paths in a second), else one by one."""
    root, listed = shlex.quote(workdir), shlex.quote(list_path)
    real = shlex.quote(list_path + ".real")
    return f"""trap 'rm -f {listed} {real}' EXIT
cd {root} || exit 1
top=$(pwd -P)
if xargs -0 -r realpath -m -z -- < {listed} > {real} 2>/dev/null; then
  while IFS= read -r -d '' p <&3 && IFS= read -r -d '' r <&4; do
    case "$r" in "$top"/*) ;; *) echo "outside $p";; esac
  done 3< {listed} 4< {real}
else
  while IFS= read -r -d '' p; do
    r=$(realpath -m -- "$p") || {{ echo "outside $p"; continue; }}
    case "$r" in "$top"/*) ;; *) echo "outside $p";; esac
  done < {listed} || exit 1
fi
git -c core.hooksPath=/dev/null check-ignore -z --stdin < {listed} \\
  | tr '\\0' '\\n' | sed 's/^/ignored /'
exit 0
"""


def check_in_tree(sandbox: Sandbox, paths: list[str], workdir: str = "/testbed") -> str:
    """Why the tree refuses one of `paths` (ignored by the repository, or outside it through a
    symlink), or "". Run before the patch is applied, on the start tree; the paths reach the
    script through a file (`write_paths`), never its command line.

    A check that fails or times out on a sandbox that still answers (`true` runs) is the
    patch's: its paths are what the check was reading, so the patch is refused (a refusal,
    `patch_apply_failed`). SandboxError only when the sandbox does not answer."""
    if not paths:
        return ""
    listed = PATHS_LIST.format(key=secrets.token_hex(8))
    write_paths(sandbox, listed, paths)
    r = sandbox.run(_tree_script(listed, workdir), cwd="/", timeout=120)
    if r.timed_out or r.exit_code != 0:
        if sandbox.run("true", timeout=30).exit_code != 0:
            raise SandboxError(f"cannot check the patch's paths (exit {r.exit_code})")
        how = "timed out" if r.timed_out else f"exit {r.exit_code}"
        return f"its paths could not be checked against the tree ({how})"
    for line in r.stdout.splitlines():
        kind, _, path = line.partition(" ")
        if kind == "ignored" and path:
            return f"a path the repository ignores: {path[:200]!r}"
        if kind == "outside" and path:
            return f"a path that resolves outside the repository: {path[:200]!r}"
    return ""


__all__ = [
    "PATHS_LIST",
    "PatchPaths",
    "check_in_tree",
    "check_text",
    "read_patch",
    "refused_name",
    "write_paths",
]
