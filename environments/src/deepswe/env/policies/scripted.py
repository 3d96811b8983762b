"""Scripted policies: the gold baseline (a known patch replayed through the real tools), the
gold patch itself (graded as a patch, no episode), and the empty baseline (submit at once).
They are also the test double everything else uses.

The gold policy writes each hunk as one `file_editor str_replace` (context and removed lines ->
context and added lines), creates new files with `create`, removes deleted files with
`execute_bash rm`, and then calls `finish`. When an edit answers that its old text occurs more
than once in the file, it views the lines around the hunk and tries again with that wider
context, as an agent would (pylint-6386's gold patch has such a hunk); an edit that still fails
is left failed, and the grade shows it.
"""

from __future__ import annotations

import re

from unidiff import PatchSet

from deepswe.env.policies import Reply

FINISH = "<function=finish>\n<parameter=command>submit</parameter>\n</function>"


def _call(name: str, **params: str) -> str:
    body = "".join(f"<parameter={k}>{v}</parameter>\n" for k, v in params.items())
    return f"<function={name}>\n{body}</function>"


def patch_to_actions(patch: str, root: str = "/testbed") -> list[str]:
    """The tool calls, as model text, that turn the repository into the patched one."""
    return [action for action, _ in _edits(patch, root)]


class Hunk:
    """One str_replace of a hunk, with what widening its context needs."""

    def __init__(self, path: str, start: int, old: list[str], new: list[str]) -> None:
        self.path, self.start, self.old, self.new = path, start, old, new


def _edits(patch: str, root: str) -> list[tuple[str, Hunk | None]]:
    out: list[tuple[str, Hunk | None]] = []
    for f in PatchSet(patch):
        path = f"{root}/{f.path}"
        if f.is_removed_file:
            out.append((_call("execute_bash", cmd=f"rm {path}"), None))
        elif f.is_added_file:
            text = "".join(line.value for h in f for line in h if line.is_added)
            out.append((_call("file_editor", command="create", path=path, file_text=text), None))
        else:
            for hunk in f:
                old = [line.value for line in hunk if not line.is_added]
                new = [line.value for line in hunk if not line.is_removed]
                call = _call(
                    "file_editor",
                    command="str_replace",
                    path=path,
                    old_str="".join(old),
                    new_str="".join(new),
                )
                # Hunks apply in order, so the file this one meets is already the new one up to
                # it: its old text starts at its target line.
                out.append((call, Hunk(path, hunk.target_start, old, new)))
    return out


_NOT_UNIQUE = "Multiple occurrences of"
_VIEW_LINE = re.compile(r"^\s*(\d+)\t(.*)$")
# Lines of extra context each side, tried in turn (execute_bash shows 80 lines untruncated).
WIDEN_STEPS = (3, 10, 30)


def _view(hunk: Hunk, extra: int) -> str:
    """Numbered lines around the hunk (file_editor's view refuses files other than .py)."""
    first = max(1, hunk.start - extra)
    last = hunk.start + len(hunk.old) - 1 + extra
    awk = f"awk 'NR>={first} && NR<={last} {{printf \"%6d\\t%s\\n\", NR, $0}}' {hunk.path}"
    return _call("execute_bash", cmd=awk)


def _widened(hunk: Hunk, observation: str) -> str | None:
    """The str_replace of `hunk` with the viewed lines around it as context; None when the view
    does not show the hunk's lines where they should be."""
    lines = {}
    for text in observation.splitlines():
        m = _VIEW_LINE.match(text)
        if m:
            lines[int(m[1])] = m[2] + "\n"
    end = hunk.start + len(hunk.old)
    if [lines.get(n) for n in range(hunk.start, end)] != hunk.old:
        return None
    before = [lines[n] for n in sorted(lines) if n < hunk.start]
    after = [lines[n] for n in sorted(lines) if n >= end]
    old, new = "".join(before + hunk.old + after), "".join(before + hunk.new + after)
    path = hunk.path
    return _call("file_editor", command="str_replace", path=path, old_str=old, new_str=new)


class ScriptedPolicy:
    """Replies with a fixed list of messages, then `finish` forever."""

    name = "scripted"

    def __init__(self, script: list[str]) -> None:
        self.script = script
        self.turn = 0

    def reply(self, messages: list[dict[str, str]], *, timeout: float) -> Reply:
        text = self.script[self.turn] if self.turn < len(self.script) else FINISH
        self.turn += 1
        return Reply(text=text)

    def count_tokens(self, messages: list[dict[str, str]]) -> int | None:
        return None


class GoldPolicy:
    """Applies `patch` (a task's gold patch) through the tools, then submits. A str_replace
    refused because its old text is not unique is retried with wider context (WIDEN_STEPS),
    read from a view of the lines around the hunk."""

    name = "gold"

    def __init__(self, patch: str, root: str = "/testbed") -> None:
        self.edits = _edits(patch, root)
        self.i = 0  # the edit being made
        self.widen = -1  # which WIDEN_STEPS entry is being tried for it (-1: the plain hunk)
        self.pending: str | None = None  # "view" after asking to view, "edit" after an edit

    def reply(self, messages: list[dict[str, str]], *, timeout: float) -> Reply:
        last = messages[-1].get("content", "") if messages else ""
        if self.pending == "view":
            self.pending = "edit"
            widened = _widened(self.edits[self.i][1], last)
            if widened is not None:
                return Reply(text=widened)
            self.pending = None  # the view did not show the hunk: leave this edit failed
            self.i += 1
        elif self.pending == "edit":
            hunk = self.edits[self.i][1]
            if hunk is not None and _NOT_UNIQUE in last and self.widen + 1 < len(WIDEN_STEPS):
                self.widen += 1
                self.pending = "view"
                return Reply(text=_view(hunk, WIDEN_STEPS[self.widen]))
            self.i += 1
        if self.i >= len(self.edits):
            return Reply(text=FINISH)
        self.widen, self.pending = -1, "edit"
        return Reply(text=self.edits[self.i][0])

    def count_tokens(self, messages: list[dict[str, str]]) -> int | None:
        return None


class SubmittedPatch:
    """A patch made elsewhere, as a submission: graded as it is, as swebench grades
    predictions, without an episode (`deepswe.env.episode.run_task` grades `submission`
    directly). `name` is what the records show."""

    name = "submitted"

    def __init__(self, patch: str, name: str | None = None) -> None:
        self.submission = patch
        self.name = name or type(self).name

    def reply(self, messages: list[dict[str, str]], *, timeout: float) -> Reply:
        return Reply(text=FINISH)

    def count_tokens(self, messages: list[dict[str, str]]) -> int | None:
        return None


class GoldPatchPolicy(SubmittedPatch):
    """The gold patch as a submission (`deepswe-eval validate`'s gold baseline)."""

    name = "gold-patch"


class EmptyPolicy(ScriptedPolicy):
    """Submits without changing anything: the 0% baseline."""

    name = "empty"

    def __init__(self) -> None:
        super().__init__([FINISH])
