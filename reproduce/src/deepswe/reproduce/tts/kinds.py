"""The scripted candidate kinds of `deepswe-reproduce tts`: patches made from a task's gold patch
and its files at the base commit, each kind a way to be almost right. The grader, not the kind,
says what a candidate is; `expect` is only what the construction predicts.

    right        the gold patch                                               expect resolved
    partial      a proper subset of the gold's hunks, or of one hunk's change blocks
    misedit      the fixed code with one of swe-mini's mutation operators applied on a line the
                 gold changes (deepswe.data.swemini.mutate): a plausible wrong edit of the
                 right lines; neither the bug nor the fix
    wrong_place  a mutation of the base code away from the gold's lines, in the same function
                 first and of the bug's own operator first: a fix in the wrong place (the bug
                 stays)                                                       expect unresolved
    regression   the gold patch plus another task's bug in code this task's passing tests
                 cover (its FAIL_TO_PASS tests are among ours PASS_TO_PASS, none of ours): the
                 fix passes FAIL_TO_PASS and breaks PASS_TO_PASS              expect unresolved
    comment      a comment above or beside the buggy line, the bug kept (the old scripted wrong
                 fix, one labelled kind among many)                          expect unresolved
    empty        no change                                                    expect unresolved

Every made patch differs from the base, from the gold and from the other variants; a Python file
it touches must still parse; a comment variant must leave the module's AST as it is (a `#`
inside a string would change code). Variants are ordered by a seeded shuffle per task and kind,
mutation variants round-robin over operators so that the first few differ in kind.
"""

from __future__ import annotations

import ast
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import islice

from deepswe.data.swemini.mutate import Mutation, mutation_sites_where
from deepswe.reproduce.tts.edits import EditError, Hunk, apply, hunks, make_patch

NOTES = (
    "fix: handle this case as the issue describes",
    "checked against the reported example",
    "edge case from the issue handled here",
    "keep in sync with the documented behaviour",
    "see the issue report",
)


@dataclass(frozen=True)
class Made:
    """One scripted candidate: its kind, patch, what it is, and what the construction predicts
    (True resolved, False unresolved, None: only the grader knows)."""

    kind: str
    patch: str
    detail: str
    expect: bool | None


@dataclass(frozen=True)
class Partner:
    """Another task of the same repository whose bug this task's passing tests catch."""

    instance_id: str
    gold_hunks: tuple[Hunk, ...]


def parses(path: str, text: str) -> bool:
    if not path.endswith(".py"):
        return True
    try:
        ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    return True


def _line_of(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


def _touches(m: Mutation, data: bytes, lines: set[int]) -> bool:
    last = _line_of(data, max(m.start, m.end - 1))
    return any(line in lines for line in range(m.line, last + 1))


def _nearby(m: Mutation, data: bytes, near: set[int], function: str, anchor: int) -> bool:
    """In the gold's function, else within 40 lines of its change; never on its lines."""
    close = m.function == function or abs(m.line - anchor) <= 40
    return close and not _touches(m, data, near)


def _round_robin(sites: list[Mutation], rng: random.Random) -> list[Mutation]:
    """Sites shuffled, then taken one operator at a time (operators in shuffled order)."""
    rng.shuffle(sites)
    by_kind: dict[str, list[Mutation]] = {}
    for m in sites:
        by_kind.setdefault(m.kind, []).append(m)
    out, queues = [], list(by_kind.values())
    while queues:
        out += [q.pop(0) for q in queues]
        queues = [q for q in queues if q]
    return out


class TaskEdits:
    """A task's gold patch over its files at the base commit, and the kinds made from them."""

    def __init__(
        self,
        instance_id: str,
        gold: str,
        read: Callable[[str], str],
        seed: int = 0,
        function: str = "",
        operator: str = "",
    ) -> None:
        """`read(path)`: a file's text at the base commit."""
        self.id, self.gold, self.seed, self.read = instance_id, gold, seed, read
        self.hunks = hunks(gold)
        self.base = {p: read(p) for p in sorted({h.path for h in self.hunks})}
        self.fixed = apply(self.base, self.hunks)
        self.function, self.operator = function, operator

    def load(self, paths: set[str]) -> None:
        """Add files the gold does not touch (their text is the same at base and fixed)."""
        for p in sorted(paths - set(self.base)):
            self.base[p] = self.fixed[p] = self.read(p)

    def rng(self, kind: str) -> random.Random:
        return random.Random(f"{self.seed}:{self.id}:{kind}")

    def made(self, kind: str, texts: dict[str, str], detail: str, expect: bool | None) -> Made:
        return Made(kind, make_patch(self.base, texts), detail, expect)

    def fresh(self, texts: dict[str, str]) -> bool:
        """Neither the base nor the fix, and every Python file parses."""
        return (
            texts != self.base
            and texts != self.fixed
            and all(parses(p, t) for p, t in texts.items() if t != self.base[p])
        )

    # --- the kinds ------------------------------------------------------------------------
    def right(self) -> Iterator[Made]:
        yield Made("right", self.gold, "the gold patch", True)

    def empty(self) -> Iterator[Made]:
        yield Made("empty", "", "no change", False)

    def partial(self) -> Iterator[Made]:
        if len(self.hunks) >= 2:
            parts = [[h] for h in self.hunks]
        else:
            parts = [[h] for h in _blocks(self.hunks[0])] if self.hunks else []
            if len(parts) < 2:
                return
        for k, part in enumerate(parts):
            try:
                texts = apply(self.base, part)
            except EditError:
                continue
            if self.fresh(texts):
                yield self.made(
                    "partial", texts, f"part {k + 1} of {len(parts)} of the gold's changes", None
                )

    def misedit(self) -> Iterator[Made]:
        seen: set[str] = set()
        for path in sorted({h.path for h in self.hunks}):
            data = self.fixed[path].encode()
            lines = set()
            for h in self.hunks:
                if h.path == path:  # added lines, or the line after a pure removal
                    lines |= set(h.added) or {h.new_anchor}
            sites = mutation_sites_where(path, data, partial(_touches, data=data, lines=lines))
            for m in _round_robin(sites, self.rng("misedit")):
                texts = {**self.fixed, path: m.apply(data).decode("utf-8", "surrogateescape")}
                if self.fresh(texts) and texts[path] not in seen:
                    seen.add(texts[path])
                    yield self.made(
                        "misedit",
                        texts,
                        f"the fix, then {m.kind} at {path}:{m.line} ({m.function})",
                        None,
                    )

    def wrong_place(self) -> Iterator[Made]:
        seen: set[str] = set()
        for path in sorted({h.path for h in self.hunks}):
            data = self.base[path].encode()
            near = {h.anchor for h in self.hunks if h.path == path}
            near |= {n for h in self.hunks if h.path == path for n in h.removed}
            anchor = min(near)
            nearby = partial(_nearby, data=data, near=near, function=self.function, anchor=anchor)
            sites = mutation_sites_where(path, data, nearby)
            self.rng("wrong_place").shuffle(sites)
            sites.sort(
                key=lambda m: (
                    m.function != self.function,
                    m.kind != self.operator,
                    abs(m.line - anchor),
                )
            )
            for m in sites:
                texts = {**self.base, path: m.apply(data).decode("utf-8", "surrogateescape")}
                if self.fresh(texts) and texts[path] not in seen:
                    seen.add(texts[path])
                    yield self.made(
                        "wrong_place",
                        texts,
                        f"{m.kind} at {path}:{m.line} ({m.function}), the bug left",
                        False,
                    )

    def regression(self, partners: Sequence[Partner]) -> Iterator[Made]:
        ours = {
            (h.path, n)
            for h in self.hunks
            for n in range(h.target_start, h.target_start + len(h.new))
        }
        order = list(partners)
        self.rng("regression").shuffle(order)
        for p in order:
            theirs = {
                (h.path, n)
                for h in p.gold_hunks
                for n in range(h.target_start, h.target_start + len(h.new))
            }
            if ours & theirs:
                continue
            self.load({h.path for h in p.gold_hunks})
            try:
                texts = apply(self.fixed, list(p.gold_hunks), reverse=True)
            except EditError:
                continue
            if self.fresh(texts):
                yield self.made(
                    "regression",
                    texts,
                    f"the gold patch and {p.instance_id}'s bug, which our passing tests catch",
                    False,
                )

    def comment(self) -> Iterator[Made]:
        h = self.hunks[0]
        lines = self.base[h.path].splitlines(keepends=True)
        at = min(max(h.anchor, 1), len(lines)) - 1
        anchor = lines[at]
        indent = anchor[: len(anchor) - len(anchor.lstrip())]
        order = list(range(2 * len(NOTES)))  # even: a line above; odd: after it on its line
        self.rng("comment").shuffle(order)
        for v in order:
            note = NOTES[v // 2]
            new = list(lines)
            if v % 2 == 0 or not anchor.strip():
                new.insert(at, f"{indent}# {note}\n")
            else:
                new[at] = anchor.rstrip("\n").rstrip() + f"  # {note}\n"
            text = "".join(new)
            if text != self.base[h.path] and _same_code(h.path, self.base[h.path], text):
                yield self.made(
                    "comment",
                    {**self.base, h.path: text},
                    f"a comment at {h.path}:{at + 1}, the bug kept",
                    False,
                )

    def variants(self, kind: str, limit: int, partners: Sequence[Partner] = ()) -> list[Made]:
        """Up to `limit` distinct variants of `kind` (fewer when the task offers fewer); right
        and empty are one patch, repeated `limit` times (as identical rollouts are)."""
        if kind in ("right", "empty"):
            return list(getattr(self, kind)()) * limit
        made = self.regression(partners) if kind == "regression" else getattr(self, kind)()
        return list(islice(made, limit))


def _same_code(path: str, a: str, b: str) -> bool:
    """`b` differs from `a` by comments only (Python: the same AST)."""
    if not path.endswith(".py"):
        return False
    try:
        return ast.dump(ast.parse(a)) == ast.dump(ast.parse(b))
    except (SyntaxError, ValueError):
        return False


def _blocks(h: Hunk) -> list[Hunk]:
    """A hunk split into its change blocks (runs of removed/added lines between context), each
    as a hunk of its own with the hunk's context around it."""
    blocks: list[tuple[int, int, int, int]] = []  # (old index, old count, new index, new count)
    oi = ni = 0
    i_old, i_new = list(h.old), list(h.new)
    start = None
    while oi < len(i_old) or ni < len(i_new):
        o_line, n_line = h.source_start + oi, h.target_start + ni
        if o_line in h.removed or n_line in h.added:
            if start is None:
                start = (oi, ni)
            if o_line in h.removed:
                oi += 1
            else:
                ni += 1
            continue
        if start is not None:
            blocks.append((start[0], oi - start[0], start[1], ni - start[1]))
            start = None
        oi, ni = oi + 1, ni + 1
    if start is not None:
        blocks.append((start[0], oi - start[0], start[1], ni - start[1]))
    out = []
    for o, oc, n, nc in blocks:
        # the block alone: the old text of the whole hunk with only this block replaced
        new = tuple(i_old[:o]) + tuple(i_new[n : n + nc]) + tuple(i_old[o + oc :])
        out.append(
            Hunk(h.path, h.source_start, h.target_start, h.old, new, (), (), h.anchor, h.new_anchor)
        )
    return out
