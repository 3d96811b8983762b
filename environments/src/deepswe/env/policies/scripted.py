"""Scripted policies: the gold baseline (a known patch replayed through the real tools) and the
empty baseline (submit at once). They are also the test double everything else uses.

The gold policy writes each hunk as one `file_editor str_replace` (context and removed lines ->
context and added lines), creates new files with `create`, removes deleted files with
`execute_bash rm`, and then calls `finish`. It does not read observations: a hunk whose old text
is not unique in its file fails as a real model's edit would, and the grade shows it.
"""

from __future__ import annotations

from unidiff import PatchSet

from deepswe.env.policies import Reply

FINISH = "<function=finish>\n<parameter=command>submit</parameter>\n</function>"


def _call(name: str, **params: str) -> str:
    body = "".join(f"<parameter={k}>{v}</parameter>\n" for k, v in params.items())
    return f"<function={name}>\n{body}</function>"


def patch_to_actions(patch: str, root: str = "/testbed") -> list[str]:
    """The tool calls, as model text, that turn the repository into the patched one."""
    actions: list[str] = []
    for f in PatchSet(patch):
        path = f"{root}/{f.path}"
        if f.is_removed_file:
            actions.append(_call("execute_bash", cmd=f"rm {path}"))
        elif f.is_added_file:
            text = "".join(line.value for h in f for line in h if line.is_added)
            actions.append(_call("file_editor", command="create", path=path, file_text=text))
        else:
            for hunk in f:
                old = "".join(line.value for line in hunk if not line.is_added)
                new = "".join(line.value for line in hunk if not line.is_removed)
                actions.append(
                    _call("file_editor", command="str_replace", path=path, old_str=old, new_str=new)
                )
    return actions


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


class GoldPolicy(ScriptedPolicy):
    """Applies `patch` (a task's gold patch) through the tools, then submits."""

    name = "gold"

    def __init__(self, patch: str, root: str = "/testbed") -> None:
        super().__init__(patch_to_actions(patch, root) + [FINISH])


class EmptyPolicy(ScriptedPolicy):
    """Submits without changing anything: the 0% baseline."""

    name = "empty"

    def __init__(self) -> None:
        super().__init__([FINISH])
