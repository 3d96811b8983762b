"""Wrong fixes made from the right one: mutants of a task's gold patch, each a plausible fix that is
nearly right (a boundary off by one, a comparison turned, a condition negated or dropped, two
arguments swapped, one changed line back to its old value, one hunk left out).

    gold patch -> each operator's candidates (pure, over the diff text) -> a seeded sample of k

A mutant is the gold diff with one added line changed, or one hunk dropped: it applies where gold
applies (the hunk headers still count right) and is graded like any episode
(`deepswe.eval.strength`). Operators are a registry (`OPERATORS`, looked up like every plug point
with `deepswe.env.registry.resolve`): a `module:function` taking the gold patch's parsed lines
and returning candidates plugs in a user's own, or a model that writes wrong fixes.

Only Python lines are mutated, token by token (a string's or a comment's text is never touched).
"""

from __future__ import annotations

import io
import keyword
import random
import re
import tokenize
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from unidiff import PatchSet
from unidiff.errors import UnidiffParseError

from deepswe.env.registry import resolve


@dataclass(frozen=True)
class Mutant:
    """One wrong fix: the whole patch, the operator that made it and what it changed."""

    operator: str
    patch: str
    change: str
    """One line: where and what, e.g. `calc/ops.py:+12: '<' -> '<='`."""


@dataclass(frozen=True)
class Site:
    """An added line of the gold patch an operator may change."""

    file: int  # index of the file in the PatchSet
    hunk: int
    line: int  # index of the line in the hunk
    path: str
    text: str  # the line's value, without its newline
    old: str | None  # the removed line it replaces (paired in order within its run), or None


Operator = Callable[[str, list[Site]], list[Mutant]]

_SWAPS = {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "=="}
_KEYWORD = re.compile(r"^(\*|\w+\s*=(?!=))")  # a keyword argument, *args or **kwargs


def sites(gold: str) -> list[Site]:
    """Every added line of a Python file in `gold`, with the line it replaces."""
    try:
        files = PatchSet(gold)
    except UnidiffParseError:
        return []
    out = []
    for fi, f in enumerate(files):
        if not f.path.endswith(".py"):
            continue
        for hi, hunk in enumerate(f):
            removed: list[str] = []
            added_since = 0
            inside: str | None = None  # the new file's open triple quote, as the hunk shows it
            for li, line in enumerate(hunk):
                if line.is_removed:
                    if added_since:
                        removed, added_since = [], 0
                    removed.append(line.value.rstrip("\n"))
                    continue
                text = line.value.rstrip("\n")
                in_string, inside = inside is not None, _triple_quotes(text, inside)
                if line.is_added:
                    old = removed[added_since] if added_since < len(removed) else None
                    added_since += 1
                    if not in_string:  # a docstring's inner line is text, not code
                        out.append(Site(fi, hi, li, f.path, text, old))
                else:
                    removed, added_since = [], 0
    return out


def _triple_quotes(text: str, inside: str | None) -> str | None:
    """The triple quote still open after `text`, given the one open before it (None: none).
    Only what the hunk shows: a string opened above its first line is not seen."""
    i = 0
    while i < len(text):
        if inside is not None:
            end = text.find(inside, i)
            if end < 0:
                return inside
            i, inside = end + 3, None
            continue
        starts = [(text.find(q, i), q) for q in ('"""', "'''")]
        starts = [(at, q) for at, q in starts if at >= 0]
        hash_at = text.find("#", i)
        if not starts or (0 <= hash_at < min(starts)[0]):
            return None
        at, inside = min(starts)
        i = at + 3
    return inside


def with_line(gold: str, site: Site, text: str) -> str:
    """`gold` with the added line at `site` made `text`."""
    files = PatchSet(gold)
    line = files[site.file][site.hunk][site.line]
    line.value = text + ("\n" if line.value.endswith("\n") else "")
    return str(files)


def _tokens(text: str) -> list[tokenize.TokenInfo]:
    """The tokens of one line (a fragment: an unclosed bracket ends the list, not an error)."""
    out = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text.lstrip() + "\n").readline):
            out.append(tok)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    pad = len(text) - len(text.lstrip())
    return [
        t._replace(start=(t.start[0], t.start[1] + pad), end=(t.end[0], t.end[1] + pad))
        for t in out
    ]


def _replace(text: str, tok: tokenize.TokenInfo, new: str) -> str:
    return text[: tok.start[1]] + new + text[tok.end[1] :]


def _mutant(gold: str, site: Site, op: str, text: str, what: str) -> Mutant:
    return Mutant(op, with_line(gold, site, text), f"{site.path}: {what}")


def comparison(gold: str, found: list[Site]) -> list[Mutant]:
    """A comparison turned: `<` and `<=`, `>` and `>=`, `==` and `!=` swapped."""
    out = []
    for site in found:
        for tok in _tokens(site.text):
            if tok.type == tokenize.OP and tok.string in _SWAPS:
                new = _replace(site.text, tok, _SWAPS[tok.string])
                out.append(
                    _mutant(
                        gold, site, "comparison", new, f"{tok.string!r} -> {_SWAPS[tok.string]!r}"
                    )
                )
    return out


def boundary(gold: str, found: list[Site]) -> list[Mutant]:
    """An integer literal off by one, up and down."""
    out = []
    for site in found:
        for tok in _tokens(site.text):
            if tok.type == tokenize.NUMBER and tok.string.isdigit():
                for delta in (1, -1):
                    value = int(tok.string) + delta
                    if value >= 0:
                        new = _replace(site.text, tok, str(value))
                        out.append(_mutant(gold, site, "boundary", new, f"{tok.string} -> {value}"))
    return out


def _condition(site: Site) -> tuple[str, str] | None:
    """(the `if`/`elif`/`while` head, its condition) of a line, or None."""
    toks = _tokens(site.text)
    if (
        len(toks) < 3
        or toks[0].type != tokenize.NAME
        or toks[0].string not in ("if", "elif", "while")
    ):
        return None
    colon = max(
        (i for i, t in enumerate(toks) if t.type == tokenize.OP and t.string == ":"), default=None
    )
    if colon is None or colon < 2:
        return None
    head_end, cond_end = toks[0].end[1], toks[colon].start[1]
    return site.text[:head_end], site.text[head_end:cond_end].strip()


def negate_condition(gold: str, found: list[Site]) -> list[Mutant]:
    """A condition negated: `if x:` -> `if not (x):`."""
    out = []
    for site in found:
        cond = _condition(site)
        if cond:
            head, expr = cond
            rest = site.text[site.text.index(expr, len(head)) + len(expr) :]
            new = f"{head} not ({expr}){rest}"
            out.append(_mutant(gold, site, "negate-condition", new, f"{expr!r} negated"))
    return out


def drop_condition(gold: str, found: list[Site]) -> list[Mutant]:
    """A condition dropped: `if x:` -> `if True:` (the check a partial fix forgets)."""
    out = []
    for site in found:
        cond = _condition(site)
        if cond and cond[0].strip() != "while":
            head, expr = cond
            rest = site.text[site.text.index(expr, len(head)) + len(expr) :]
            out.append(
                _mutant(gold, site, "drop-condition", f"{head} True{rest}", f"{expr!r} dropped")
            )
    return out


def swap_arguments(gold: str, found: list[Site]) -> list[Mutant]:
    """The first two positional arguments of a call swapped: `f(a, b)` -> `f(b, a)`."""
    out = []
    for site in found:
        toks = _tokens(site.text)
        for i, tok in enumerate(toks):
            if not (
                tok.type == tokenize.OP
                and tok.string == "("
                and i
                and toks[i - 1].type == tokenize.NAME
                # a keyword before it makes a tuple, not a call: `except (A, B)` catches the same
                # in either order (an equivalent mutant found on aiohttp_0fdcc291)
                and not keyword.iskeyword(toks[i - 1].string)
            ):
                continue
            args = list(_arguments(site.text, toks, i))
            positional = [a for a in args[:2] if not _KEYWORD.match(a.strip())]
            if len(args) >= 2 and len(positional) == 2:
                first, second = args[0], args[1]
                a0, a1 = first.strip(), second.strip()
                if a0 != a1:
                    # each argument's text swapped, the spaces around it kept where they were
                    s0 = first.span[0] + len(first.raw) - len(first.raw.lstrip())
                    s1 = second.span[0] + len(second.raw) - len(second.raw.lstrip())
                    t = site.text
                    new = t[:s0] + a1 + t[s0 + len(a0) : s1] + a0 + t[s1 + len(a1) :]
                    out.append(
                        _mutant(gold, site, "swap-arguments", new, f"{a0!r} and {a1!r} swapped")
                    )
    return out


@dataclass(frozen=True)
class _Arg:
    raw: str
    span: tuple[int, int]

    def strip(self) -> str:
        return self.raw.strip()


def _arguments(text: str, toks: list[tokenize.TokenInfo], open_at: int) -> Iterator[_Arg]:
    """The top-level arguments of the call whose `(` is toks[open_at] (each with its spaces)."""
    depth, start = 0, toks[open_at].end[1]
    for tok in toks[open_at:]:
        if tok.type == tokenize.OP and tok.string in "([{":
            depth += 1
        elif tok.type == tokenize.OP and tok.string in ")]}":
            depth -= 1
            if depth == 0:
                if text[start : tok.start[1]].strip():
                    yield _Arg(text[start : tok.start[1]], (start, tok.start[1]))
                return
        elif tok.type == tokenize.OP and tok.string == "," and depth == 1:
            yield _Arg(text[start : tok.start[1]], (start, tok.start[1]))
            start = tok.end[1]


def old_value(gold: str, found: list[Site]) -> list[Mutant]:
    """One changed line back to the line it replaced (the rest of the fix kept)."""
    return [
        _mutant(gold, s, "old-value", s.old, f"{s.text.strip()!r} back to {s.old.strip()!r}")
        for s in found
        if s.old is not None and s.old.strip() != s.text.strip()
    ]


def partial_fix(gold: str, found: list[Site]) -> list[Mutant]:
    """Gold with one hunk of Python source left out (a patch of two hunks or more). A hunk in any
    other file (docs, a changelog) changes no behaviour: leaving it out would only make a mutant
    equivalent to gold."""
    try:
        files = PatchSet(gold)
    except UnidiffParseError:
        return []
    hunks = [(fi, hi) for fi, f in enumerate(files) for hi in range(len(f))]
    if len(hunks) < 2:
        return []
    out = []
    for fi, hi in hunks:
        if not files[fi].path.endswith(".py"):
            continue
        cut = PatchSet(gold)
        f = cut[fi]
        del f[hi]
        if not len(f):
            del cut[fi]
        where = files[fi][hi]
        out.append(
            Mutant(
                "partial-fix", str(cut), f"{files[fi].path}: hunk @@ -{where.source_start} left out"
            )
        )
    return out


OPERATORS: dict[str, str] = {
    name: f"deepswe.eval.mutants:{fn}"
    for name, fn in (
        ("comparison", "comparison"),
        ("boundary", "boundary"),
        ("negate-condition", "negate_condition"),
        ("drop-condition", "drop_condition"),
        ("swap-arguments", "swap_arguments"),
        ("old-value", "old_value"),
        ("partial-fix", "partial_fix"),
    )
}


def make_mutants(
    gold: str, k: int, seed: int | str = 0, operators: list[str] | None = None
) -> list[Mutant]:
    """Up to `k` distinct mutants of `gold` (none equal to gold), drawn with `random.Random(seed)`
    from every named operator's candidates (all of `OPERATORS` by default), one operator at a
    time in turn so no single operator fills the sample."""
    found = sites(gold)
    pools: list[list[Mutant]] = []
    seen = {gold}
    for name in operators or list(OPERATORS):
        op: Operator = resolve(OPERATORS, name, "mutation operator")
        pool = []
        for m in op(gold, found):
            if m.patch not in seen:
                seen.add(m.patch)
                pool.append(m)
        pools.append(pool)
    rng = random.Random(f"mutants:{seed}")
    for pool in pools:
        rng.shuffle(pool)
    out: list[Mutant] = []
    while len(out) < k and any(pools):
        for pool in pools:
            if pool and len(out) < k:
                out.append(pool.pop())
    return out


__all__ = ["OPERATORS", "Mutant", "Site", "make_mutants", "sites", "with_line"]
