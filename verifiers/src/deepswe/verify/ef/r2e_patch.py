"""The final patch as R2E-Gym's verifier input shows it (`true_output_patch_only_existing_files`).

Source, read and restated (not copied): agentica-project/R2E-Gym at 353348a0,
src/r2egym/agenthub/trajectory/trajectory.py (`true_output_patch_only_existing_files`,
`editor_files`, `created_files`, `parsed_pred_commit`), src/r2egym/commit_models/parse_diff.py
(`CommitParser`), src/r2egym/commit_models/diff_classes.py (`ParsedCommit.get_patch`,
`FileDiff.get_patch`) and src/r2egym/agenthub/action/action.py (`Action.from_string`).

`traj2verifier_data` shows this rebuilt patch when the record carries its dataset row (`ds`;
R2E-Gym's runner always sets it, src/r2egym/agenthub/run/edit.py), else `output_patch` as it is:

1. keep = the paths the agent edited with `file_editor` `str_replace`, minus those it made with
   `create`; a path counts when its last component holds a "."; every "/testbed/" is removed;
2. the recorded diff is parsed into file sections (R2E-Gym's parser: below) and each section
   kept is written again from its parts;
3. a section is kept when its path ends in ".py" and, if keep is not empty, is in keep. An
   EMPTY keep keeps every .py section, created files included (R2E-Gym tests `if include_files`).

Anything the parser refuses (a header line it does not know: "similarity index", "rename from";
a rename; a bad hunk header; an index line without "..") gives the recorded patch unchanged, as
R2E-Gym's `except` does. Quirks reproduced because the verifier saw them: non-.py files (C, .pyx,
docs) vanish from the patch; inside a hunk an empty line is a context line written back as " ",
so a diff's final newline adds a " " line to the last hunk kept from the end; a line no hunk
prefix explains is dropped; "\\" note lines lose their second character; hunk ranges are written
back as integers (no leading zeros), the section text after "@@" left-stripped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

# Action.from_string: the first `<function=NAME>` anywhere, every `<parameter=KEY>VALUE</parameter>`
# (values may span lines; key and value stripped; a later key overwrites).
_FUNCTION = re.compile(r"<function\s*=\s*([^>]+)>")
_PARAMETER = re.compile(r"<parameter\s*=\s*([^>]+)>(.*?)</parameter>", re.DOTALL)
# CommitParser's header and hunk-header patterns (the rule, restated with the same regexes).
_DIFF_HEADER = re.compile(r'diff --git (?:")?a/([^"]+)(?:")? (?:")?b/([^"]+)(?:")?', re.UNICODE)
_HUNK_HEADER = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)")
_MODE_PREFIXES = ("old mode", "new mode", "deleted file mode", "new file mode")


class DiffFormatError(ValueError):
    """A line R2E-Gym's diff parser refuses; the caller falls back to the recorded patch."""


def r2e_call(action: str) -> tuple[str, dict[str, str]]:
    """(function name, parameters) of a recorded action, as R2E-Gym's Action.from_string."""
    name = _FUNCTION.search(action)
    params = {k.strip(): v.strip() for k, v in _PARAMETER.findall(action)}
    return (name.group(1).strip() if name else ""), params


def editor_paths(actions: Iterable[str], command: str) -> list[str]:
    """Paths given to `file_editor` with `command` (R2E-Gym's editor_files / created_files)."""
    out = []
    for action in actions:
        name, params = r2e_call(action)
        path = params.get("path") or ""
        if (
            name == "file_editor"
            and params.get("command") == command
            and "." in path.split("/")[-1]
        ):
            out.append(path.replace("/testbed/", ""))
    return out


def kept_paths(actions: Iterable[str]) -> set[str]:
    """Files edited with str_replace that the agent did not create."""
    actions = list(actions)
    return set(editor_paths(actions, "str_replace")) - set(editor_paths(actions, "create"))


def _range(start: str, length: str | None) -> str:
    return f"{int(start)},{int(length)}" if length else f"{int(start)}"


@dataclass
class FileSection:
    """One file of a diff, kept as the parts R2E-Gym's FileDiff writes back."""

    path: str
    misc: list[str] = field(default_factory=list)  # mode lines
    index: str | None = None
    binary: str | None = None
    minus: str | None = None
    plus: str | None = None
    hunks: list[list[str]] = field(default_factory=list)  # each: header, then lines, rewritten

    def text(self) -> str:
        out = [f"diff --git a/{self.path} b/{self.path}"]
        out += ["\n".join(self.misc)] if self.misc else []
        out += [self.index] if self.index is not None else []
        out += [self.binary] if self.binary is not None else []
        if self.minus is not None and self.plus is not None:
            out += [f"--- {self.minus}", f"+++ {self.plus}"]
        for hunk in self.hunks:
            out += hunk
        return "".join(line + "\n" for line in out)


def _section(line: str) -> FileSection:
    m = _DIFF_HEADER.match(line)
    if not m:
        raise DiffFormatError(f"invalid diff header: {line!r}")
    old, new = m.groups()
    if not old or not new or old != new:
        raise DiffFormatError(f"a rename ({old!r} -> {new!r}) is not supported")
    return FileSection(old)


def _header_line(sec: FileSection, line: str) -> None:
    if line.startswith("index"):
        parts = line.split()
        if len(parts) < 2 or parts[0] != "index" or len(parts[1].split("..")) != 2:
            raise DiffFormatError(f"invalid index line: {line!r}")
        old, new = parts[1].split("..")
        mode = parts[2] if len(parts) > 2 else ""
        sec.index = f"index {old}..{new}{' ' if mode else ''}{mode}"
    elif line.startswith(_MODE_PREFIXES):
        sec.misc.append(line)
    elif line.startswith("+++ "):
        sec.plus = line[4:]
    elif line.startswith("--- "):
        sec.minus = line[4:]
    elif line.startswith("Binary files"):
        sec.binary = line
    elif line != "":
        raise DiffFormatError(f"unexpected line: {line!r}")


def _hunk_line(line: str) -> str | None:
    if line == "" or line.startswith(" "):
        return " " + line[1:]
    if line[0] in "-+":
        return line
    if line[0] == "\\":
        return "\\ " + line[2:]
    return None  # dropped, as R2E-Gym drops it


def parse_sections(diff: str) -> list[FileSection]:
    """The diff's file sections as R2E-Gym's CommitParser reads them. Raises DiffFormatError."""
    sections: list[FileSection] = []
    sec: FileSection | None = None
    for line in diff.split("\n"):
        if line.startswith("diff --git"):
            sec = _section(line)
            sections.append(sec)
            continue
        if sec is None:
            continue  # text before the first file is ignored
        if line.startswith("@@ "):
            m = _HUNK_HEADER.match(line)
            if not m:
                raise DiffFormatError(f"invalid hunk header: {line!r}")
            section = m.group(5).lstrip()
            head = f"@@ -{_range(m[1], m[2])} +{_range(m[3], m[4])} @@"
            sec.hunks.append([head + (f" {section}" if section else "")])
            continue
        if not sec.hunks:
            _header_line(sec, line)
        elif (rewritten := _hunk_line(line)) is not None:
            sec.hunks[-1].append(rewritten)
    return sections


def python_patch(diff: str, keep: set[str]) -> str:
    """The .py sections of `diff` (those in `keep`, when it is not empty), written back.
    Raises DiffFormatError where R2E-Gym's parser raises."""
    return "".join(
        s.text()
        for s in parse_sections(diff)
        if s.path.endswith(".py") and (not keep or s.path in keep)
    )


def verifier_patch(output_patch: str, actions: Iterable[str]) -> str:
    """The patch R2E-Gym's verifier input shows for a run with its dataset row: the rebuilt
    .py sections of files edited but not created, or `output_patch` if the parser refuses it."""
    try:
        return python_patch(output_patch, kept_paths(actions))
    except DiffFormatError:
        return output_patch
