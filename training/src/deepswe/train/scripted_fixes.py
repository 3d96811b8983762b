"""Scripted right and wrong fixes of a task, played through the real tools: the SFT warm
start's data (deepswe.train.sft).

Per task one RIGHT fix (the gold patch as `str_replace` calls, each cut to its changed lines plus
the least context that makes the old text unique, then `finish`) and `wrong_per_task` WRONG ones
(a no-op edit of the same hunk: a comment or a `pass` line inserted before the buggy line, which
is left as it was, so the grade is unresolved). `record_episodes` plays each through
`deepswe.env.episode.run_task` with a `ScriptedPolicy` in a real sandbox and grades it with the
hidden tests.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from unidiff import PatchSet

from deepswe.data.task import Task
from deepswe.env.agent.loop import EpisodeLimits
from deepswe.env.episode import run_task
from deepswe.env.policies.scripted import FINISH, ScriptedPolicy
from deepswe.env.sandbox import SandboxLimits
from deepswe.env.trajectory import Trajectory

# Lines a wrong fix inserts before the buggy line: a change that runs and fixes nothing.
WRONG_LINES = ("# TODO: check this", "pass")
Line = tuple[str, str]  # a hunk line: (text with its newline, " " | "-" | "+")


@dataclass
class ScriptedEpisode:
    """One recorded scripted episode: which fix it plays, its trajectory, its graded reward."""

    instance_id: str
    label: str  # "right" | "wrong-0" | "wrong-1" ...
    trajectory: Trajectory

    @property
    def reward(self) -> float:
        return float(self.trajectory.reward or 0.0)


def _call(name: str, **params: str) -> str:
    body = "".join(f"<parameter={k}>{v}</parameter>\n" for k, v in params.items())
    return f"<function={name}>\n{body}</function>"


def _base_file(task: Task, path: str) -> str | None:
    """`path` at the task's base commit, when its source is a local git repository."""
    src = task.environment.source if task.environment else ""
    if not src or not Path(src).is_dir():
        return None
    r = subprocess.run(
        ["git", "-C", src, "show", f"{task.base_commit}:{path}"], capture_output=True, text=True
    )
    return r.stdout if r.returncode == 0 else None


def _span(lines: list[Line], text: str | None) -> list[Line]:
    """The changed lines of a hunk with the least context that makes their old text unique in
    `text` (the whole hunk when `text` is unknown): a short str_replace, as a model writes."""
    changed = [i for i, (_, kind) in enumerate(lines) if kind != " "]
    lo, hi = changed[0], changed[-1]
    while text is not None:
        # The agent's parser strips parameter values: the stripped text must be unique.
        old = "".join(v for v, kind in lines[lo : hi + 1] if kind != "+").strip()
        if old and text.count(old) == 1:
            return lines[lo : hi + 1]
        if lo == 0 and hi == len(lines) - 1:
            break
        lo, hi = max(lo - 1, 0), min(hi + 1, len(lines) - 1)
    return lines


def fix_edits(task: Task) -> list[tuple[str, list[Line]]]:
    """The gold patch as (path, hunk lines) edits, each hunk cut to its unique changed span."""
    if not task.gold_patch:
        raise ValueError(f"{task.instance_id}: no gold patch to script a fix from")
    edits = []
    for f in PatchSet(task.gold_patch):
        if f.is_added_file or f.is_removed_file:
            raise ValueError(f"{task.instance_id}: the scripted fixes edit existing files only")
        text = _base_file(task, f.path)
        for hunk in f:
            lines = [
                (ln.value, "+" if ln.is_added else "-" if ln.is_removed else " ") for ln in hunk
            ]
            edits.append((f.path, _span(lines, text)))
    return edits


def _str_replace(path: str, lines: list[Line], root: str) -> str:
    old = "".join(v for v, kind in lines if kind != "+")
    new = "".join(v for v, kind in lines if kind != "-")
    return _call(
        "file_editor", command="str_replace", path=f"{root}/{path}", old_str=old, new_str=new
    )


def right_fix_actions(edits: list[tuple[str, list[Line]]], root: str = "/testbed") -> list[str]:
    """The gold fix: one str_replace per edit, then `finish`."""
    return [_str_replace(path, lines, root) for path, lines in edits] + [FINISH]


def wrong_fix_actions(
    edits: list[tuple[str, list[Line]]], k: int, root: str = "/testbed"
) -> list[str]:
    """A wrong fix: the first edit's old text kept, with `WRONG_LINES[k]` inserted (indented
    like it) before the first line the gold patch changes; then `finish`."""
    path, lines = edits[0]
    noop = WRONG_LINES[k % len(WRONG_LINES)]
    out: list[Line] = []
    for value, kind in lines:
        if kind == "+":
            continue  # the wrong fix never writes the gold lines
        if kind == "-" and not any(t == "+" for _, t in out):
            indent = value[: len(value) - len(value.lstrip())]
            out.append((f"{indent}{noop}\n", "+"))
        out.append((value, " "))
    if not any(t == "+" for _, t in out):  # a pure insertion: the no-op goes at its end
        out.append((noop + "\n", "+"))
    return [_str_replace(path, out, root), FINISH]


def fix_scripts(task: Task, wrong_per_task: int) -> list[tuple[str, list[str]]]:
    """(label, model texts) of the right fix and `wrong_per_task` wrong ones."""
    edits = fix_edits(task)
    scripts = [("right", right_fix_actions(edits))]
    scripts += [(f"wrong-{k}", wrong_fix_actions(edits, k)) for k in range(wrong_per_task)]
    return scripts


def record_episodes(
    tasks: list[Task],
    limits: EpisodeLimits,
    sandbox_limits: SandboxLimits | None = None,
    wrong_per_task: int = 2,
    backend: str = "docker",
    log: Callable[[str], None] = print,
) -> list[ScriptedEpisode]:
    """Play every fix script of every task through the real tools and grade it."""
    out = []
    for task in tasks:
        for label, script in fix_scripts(task, wrong_per_task):
            traj = run_task(
                task,
                ScriptedPolicy(script),
                limits=limits,
                backend=backend,
                sandbox_limits=sandbox_limits,
            )
            out.append(ScriptedEpisode(task.instance_id, label, traj))
            outcome = traj.outcome.value if traj.outcome is not None else "not graded"
            log(f"sft data: {task.instance_id} {label}: {traj.ending.value}, {outcome}")
    return out
