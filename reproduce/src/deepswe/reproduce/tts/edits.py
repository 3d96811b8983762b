"""Patches as text edits, for making candidates: a unified diff applied to file texts, the lines
it touches, and a diff written back from old and new texts.

The diffs written here are what `git diff` writes for a modified file (a `diff --git` header,
`---`/`+++` names with a/ and b/, three lines of context, `\\ No newline at end of file` where
a side lacks its final newline), so the grader's apply chain (git apply, then patch) takes them
as it takes a gold patch. Only modified files: candidates here never add or delete a file.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from unidiff import PatchSet
from unidiff.constants import LINE_TYPE_NO_NEWLINE


class EditError(ValueError):
    """A patch does not fit the texts it is applied to; the message names file and hunk."""


@dataclass(frozen=True)
class Hunk:
    """One hunk of a modified file, its sides as whole lines (newlines kept)."""

    path: str
    source_start: int  # 1-based first line of `old` in the old file
    target_start: int  # 1-based first line of `new` in the new file
    old: tuple[str, ...]  # context and removed lines
    new: tuple[str, ...]  # context and added lines
    removed: tuple[int, ...]  # 1-based old-file lines removed
    added: tuple[int, ...]  # 1-based new-file lines added
    anchor: int  # the old-file line where the change starts (a pure insertion: the line after)
    new_anchor: int  # the new-file line where it starts (a pure removal: the line after)


def hunks(patch: str) -> list[Hunk]:
    """The hunks of every modified file of `patch`, in order; EditError for added or removed
    files (not made here) and for a patch unidiff cannot read."""
    try:
        files = PatchSet(patch)
    except Exception as exc:  # unidiff raises its own UnidiffParseError and ValueErrors
        raise EditError(f"not a unified diff: {exc}") from None
    out = []
    for f in files:
        if f.is_added_file or f.is_removed_file:
            raise EditError(f"{f.path}: an added or removed file; only modified files are edited")
        for h in f:
            old: list[str] = []
            new: list[str] = []
            removed: list[int] = []
            added: list[int] = []
            anchor: int | None = None
            new_anchor: int | None = None
            prev = None
            for line in h:
                if line.line_type == LINE_TYPE_NO_NEWLINE:  # the line before ends the file
                    if prev is not None and not prev.is_added:
                        old[-1] = old[-1].rstrip("\n")
                    if prev is not None and not prev.is_removed:
                        new[-1] = new[-1].rstrip("\n")
                    continue
                if line.is_removed:
                    removed.append(line.source_line_no)
                    anchor = anchor or line.source_line_no
                    new_anchor = new_anchor or h.target_start + len(new)
                elif line.is_added:
                    added.append(line.target_line_no)
                    anchor = anchor or h.source_start + len(old)
                    new_anchor = new_anchor or line.target_line_no
                if not line.is_added:
                    old.append(line.value)
                if not line.is_removed:
                    new.append(line.value)
                prev = line
            out.append(
                Hunk(
                    f.path,
                    h.source_start,
                    h.target_start,
                    tuple(old),
                    tuple(new),
                    tuple(removed),
                    tuple(added),
                    anchor or h.source_start,
                    new_anchor or h.target_start,
                )
            )
    return out


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def _replace(
    lines: list[str], old: tuple[str, ...], new: tuple[str, ...], hint: int, where: str
) -> list[str]:
    """`lines` with the block `old` replaced by `new`: at `hint` (0-based) if it is there, else
    at its one occurrence; EditError when it is nowhere or in several places."""
    n = len(old)
    if 0 <= hint <= len(lines) - n and tuple(lines[hint : hint + n]) == old:
        at = hint
    else:
        found = [i for i in range(len(lines) - n + 1) if tuple(lines[i : i + n]) == old]
        if len(found) != 1:
            raise EditError(f"{where}: its old lines occur {len(found)} times, not once")
        at = found[0]
    return lines[:at] + list(new) + lines[at + n :]


def apply(texts: dict[str, str], patch_hunks: list[Hunk], reverse: bool = False) -> dict[str, str]:
    """`texts` (path -> text) with the hunks applied (or undone); files not named unchanged."""
    out = dict(texts)
    shift: dict[str, int] = {}
    for k, h in enumerate(patch_hunks):
        if h.path not in out:
            raise EditError(f"{h.path}: no text to apply hunk {k + 1} to")
        old, new = (h.new, h.old) if reverse else (h.old, h.new)
        start = (h.target_start if reverse else h.source_start) - 1 + shift.get(h.path, 0)
        out[h.path] = "".join(
            _replace(_lines(out[h.path]), old, new, start, f"{h.path} hunk {k + 1}")
        )
        shift[h.path] = shift.get(h.path, 0) + len(new) - len(old)
    return out


def make_patch(old: dict[str, str], new: dict[str, str]) -> str:
    """`git diff`'s form of the change from `old` to `new` (same paths; unchanged files left
    out); "" when nothing changed."""
    parts = []
    for path in sorted(old):
        a, b = old[path], new[path]
        if a == b:
            continue
        body = []
        for line in difflib.unified_diff(_lines(a), _lines(b), f"a/{path}", f"b/{path}", n=3):
            body.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
        parts.append(f"diff --git a/{path} b/{path}\n" + "".join(body))
    return "".join(parts)
