"""Is a swe-mini problem statement an issue a person could act on? Four checks of one statement:

- `title_names_api`: the title's code names a call or attribute of the project's API (a module
  of the project, a name the reproduction imports from it, or a value the reproduction builds
  from those), not a bare literal or a name nobody defined;
- `self_contained`: the reproduction parses, defines or imports every name it uses, and imports
  only the project and the standard library (never the project's tests, never pytest);
- `reproduces`: run as written at the base commit it shows the behaviour the text describes (the
  value it prints last, the exception it raises, or that it does not raise);
- `fixed_by_gold`: with the gold patch applied it no longer shows it.

The first two read only the text; the last two judge runs of the snippet (`snippet.py`). The
claim is read from the body, in the phrasings `statement.py` writes.
"""

from __future__ import annotations

import ast
import builtins
import re
import sys
from dataclasses import dataclass
from enum import Enum

from deepswe.data.swemini.snippet import SnippetRun

_BUILTINS = set(dir(builtins))


class Check(str, Enum):
    TITLE_NAMES_API = "title_names_api"
    SELF_CONTAINED = "self_contained"
    REPRODUCES = "reproduces"
    FIXED_BY_GOLD = "fixed_by_gold"


STATIC_CHECKS = (Check.TITLE_NAMES_API, Check.SELF_CONTAINED)


@dataclass(frozen=True)
class Claim:
    """What the issue says the reproduction does now."""

    kind: str  # compare | raises | no_raise | truth
    actual: str = ""  # compare: the value shown as printed
    exception: str = ""  # raises: "Type: message" as shown; no_raise: the type expected
    expected: str = ""  # raises: the exception it should raise instead ("": none); compare: the
    # value it should print


@dataclass(frozen=True)
class Statement:
    title: str
    body: str
    reproduction: str | None
    claim: Claim | None


_TITLE = re.compile(r"^### (.*)$", re.M)
_REPRO = re.compile(r"Reproduction:\s*```python[ \t]*\n(.*?)```", re.S)
_FENCE = re.compile(r"```[^\n]*\n.*?```", re.S)
_EXC = r"(?P<exc>[A-Za-z_][\w.]*(?::[^`\n]*)?)"  # "KeyError: 'x'", "re.error: ...", "SystemExit"
_COMPARE = [
    re.compile(
        r"\ngives `(?P<actual>[^`\n]*)`, but I expected(?: it to be `(?P<expected>[^`\n]*)`\.)?"
    ),
    re.compile(
        r"` returns `(?P<actual>[^`\n]*)`\. The expected result(?: is `(?P<expected>[^`\n]*)`\.)?"
    ),
    re.compile(r"` produces `(?P<actual>[^`\n]*)`; it should be(?: `(?P<expected>[^`\n]*)`\.)?"),
]
_RAISES = [
    re.compile(r"` raises:\s*```\n" + _EXC + r"\n```"),
    re.compile(r"```\s*raises:\s*```\n" + _EXC + r"\n```"),
    re.compile(r"` crashes with `" + _EXC + r"`"),
    re.compile(r"fails with `" + _EXC + r"`"),
    re.compile(r"This fails:\s*```python\n.*?```\s*```\n" + _EXC + r"\n```", re.S),
]
_INSTEAD = re.compile(r"It should raise `([^`\n]+)` instead\.|instead of raising `([^`\n]+)`")
_NO_RAISE = [
    re.compile(r"` should raise (?P<exc>[\w.]+) for this input"),
    re.compile(r"No (?P<exc>[\w.]+) is raised by `"),
]
_TRUTH = re.compile(r"should be true but is not|I expected `.*?` to hold", re.S)


def parse_statement(text: str) -> Statement:
    m = _TITLE.search(text)
    title = m.group(1).strip() if m else ""
    body = text[m.end() :] if m else text
    repro = _REPRO.search(body)
    return Statement(title, body, repro.group(1) if repro else None, claim_of(body))


def claim_of(body: str) -> Claim | None:
    for pattern in _NO_RAISE:
        if m := pattern.search(body):
            return Claim("no_raise", exception=m.group("exc"))
    for pattern in _COMPARE:
        if m := pattern.search(body):
            return Claim("compare", actual=m.group("actual"), expected=m.group("expected") or "")
    for pattern in _RAISES:
        if m := pattern.search(body):
            instead = _INSTEAD.search(body)
            expected = (instead.group(1) or instead.group(2)) if instead else ""
            return Claim("raises", exception=m.group("exc").strip(), expected=expected)
    return Claim("truth") if _TRUTH.search(body) else None


# ---- static checks ---------------------------------------------------------------------------


def free_names(nodes: list[ast.AST], shadowing: set[str] = frozenset()) -> list[str]:
    """Names read by `nodes` and bound by none of them (nor by Python, unless the name is in
    `shadowing`: a test's parameter called `input` is not the builtin), in order of use."""
    bound: set[str] = set()
    loaded: list[str] = []
    for tree in nodes:
        for n in ast.walk(tree):
            if isinstance(n, ast.Name):
                if isinstance(n.ctx, ast.Load):
                    loaded.append(n.id)
                else:
                    bound.add(n.id)
            elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bound.add(n.name)
            elif isinstance(n, ast.arg):
                bound.add(n.arg)
            elif isinstance(n, (ast.Import, ast.ImportFrom)):
                bound |= {(a.asname or a.name).split(".")[0] for a in n.names}
            elif isinstance(n, ast.ExceptHandler) and n.name:
                bound.add(n.name)
    return list(
        dict.fromkeys(
            x for x in loaded if x not in bound and (x not in _BUILTINS or x in shadowing)
        )
    )


def imported_modules(code: str) -> set[str]:
    tree = ast.parse(code)
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            out |= {a.name.split(".")[0] for a in n.names}
        elif isinstance(n, ast.ImportFrom):
            out.add("." if n.level else (n.module or "").split(".")[0])
    return out


def check_self_contained(code: str | None, api_modules: set[str]) -> str | None:
    """None when `code` runs on its own; else why not."""
    if not code or not code.strip():
        return "no reproduction"
    try:
        free = free_names([ast.parse(code)])
        foreign = imported_modules(code) - api_modules - set(sys.stdlib_module_names)
    except SyntaxError as e:
        return f"reproduction does not parse: {e.msg}"
    if free:
        return f"uses names it never defines: {', '.join(sorted(free))}"
    if foreign:
        return f"imports what is neither the project nor the standard library: {', '.join(sorted(foreign))}"
    return None


def api_names(code: str | None, api_modules: set[str]) -> set[str]:
    """The project's modules, the names `code` imports from them, and every name it assigns
    from an expression using those (to a fixed point): the values that are the project's."""
    names = set(api_modules)
    try:
        tree = ast.parse(code or "")
    except SyntaxError:
        return names
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            names |= {
                (a.asname or a.name).split(".")[0]
                for a in n.names
                if a.name.split(".")[0] in api_modules
            }
        elif isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] in api_modules:
            names |= {a.asname or a.name for a in n.names}
    flows = []  # (targets, value) of each binding statement
    for n in ast.walk(tree):
        if isinstance(n, ast.Assign):
            flows.append((n.targets, n.value))
        elif isinstance(n, (ast.AnnAssign, ast.AugAssign)) and n.value is not None:
            flows.append(([n.target], n.value))
        elif isinstance(n, (ast.For, ast.comprehension)):
            flows.append(([n.target], n.iter))
        elif isinstance(n, ast.withitem) and n.optional_vars is not None:
            flows.append(([n.optional_vars], n.context_expr))
        elif isinstance(n, ast.ClassDef):
            flows.append(([ast.Name(n.name, ast.Store())], ast.Tuple(n.bases, ast.Load())))
    changed = True
    while changed:
        changed = False
        for targets, value in flows:
            if _reads(value) & names:
                new = {t.id for tg in targets for t in ast.walk(tg) if isinstance(t, ast.Name)}
                if not new <= names:
                    names |= new
                    changed = True
    return names


def _reads(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _root(node: ast.AST) -> ast.AST:
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node


def _names_api(code: str, names: set[str]) -> bool:
    try:
        tree = ast.parse(code)
    except SyntaxError:
        # a span cut short in a title: the dotted names that open calls or attribute reads
        roots = re.findall(r"(?<![\w.'\"])([A-Za-z_]\w*)(?=\s*\(|\.[A-Za-z_])", code)
        return any(r in names for r in roots)
    for n in ast.walk(tree):
        if isinstance(n, (ast.Call, ast.Attribute)):
            root = _root(n)
            if isinstance(root, ast.Name) and root.id in names:
                return True
        if isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] in names:
            return True
    return False


def check_title(title: str, reproduction: str | None, api_modules: set[str]) -> str | None:
    """None when the title's code names a call or attribute of the project's API."""
    spans = re.findall(r"`([^`]+)`", title)
    if not spans:
        return "the title shows no code"
    names = api_names(reproduction, api_modules)
    if any(_names_api(s, names) for s in spans):
        return None
    return f"the title names no call of the project: {' / '.join(spans)[:120]}"


def check_static(text: str, api_modules: set[str]) -> dict[Check, str | None]:
    st = parse_statement(text)
    return {
        Check.TITLE_NAMES_API: check_title(st.title, st.reproduction, api_modules),
        Check.SELF_CONTAINED: check_self_contained(st.reproduction, api_modules),
    }


# ---- judging runs ------------------------------------------------------------------------------

_ADDR = re.compile(r" at 0x[0-9a-f]+")


def shown_as(text: str | None, shown: str) -> bool:
    """`text` is what the issue shows as `shown`, which may be cut with "..." (in order)."""
    if text is None:
        return False
    text, shown = _ADDR.sub("", text), _ADDR.sub("", shown)
    parts = shown.split("...")
    if len(parts) == 1:
        return text == shown
    if not (text.startswith(parts[0]) and text.endswith(parts[-1])):
        return False
    pos, end = len(parts[0]), len(text) - len(parts[-1])
    for part in parts[1:-1]:
        pos = text.find(part, pos, end)
        if pos < 0:
            return False
        pos += len(part)
    return pos <= end


def _raised_as_shown(run: SnippetRun, shown: str) -> bool:
    kind, _, message = shown.partition(":")
    if not run.raised(kind.strip().rsplit(".", 1)[-1]):
        return False
    got = (run.exception or "").splitlines()[0] if run.exception else ""
    got_kind, _, got_message = got.partition(":")
    return not message.strip() or shown_as(got_message.strip(), message.strip())


def shows_claim(claim: Claim, run: SnippetRun) -> bool:
    """Does `run` show what `claim` says happens?"""
    if run.timed_out or run.crashed:
        return False
    if claim.kind == "compare":
        return run.exception is None and shown_as(run.last, claim.actual)
    if claim.kind == "raises":
        return _raised_as_shown(run, claim.exception)
    if claim.kind == "no_raise":
        return run.exception is None
    return run.raised("AssertionError") or (run.exception is None and run.last == "False")


def _fixed(claim: Claim, run: SnippetRun) -> bool:
    """Does `run` (with the gold patch) behave as the issue says it should?"""
    if run.timed_out or run.crashed:
        return False
    if claim.kind == "compare":
        return run.exception is None and not shown_as(run.last, claim.actual)
    if claim.kind == "raises" and claim.expected:
        return _raised_as_shown(run, claim.expected)
    if claim.kind == "raises":
        return not _raised_as_shown(run, claim.exception)
    if claim.kind == "no_raise":
        return _raised_as_shown(run, claim.exception)
    return run.exception is None and run.last == "True"


def describe(run: SnippetRun) -> str:
    if run.timed_out:
        return "timed out"
    if run.crashed:
        return f"the interpreter failed: {run.crashed.strip()[-160:]}"
    if run.exception:
        return f"raised {run.exception[:160]}"
    return (
        f"printed {run.last!r}"[:160] if run.last is not None else "printed nothing, raised nothing"
    )


def check_runs(
    text: str, at_base: SnippetRun, with_gold: SnippetRun | None
) -> dict[Check, str | None]:
    """The run checks of one statement, from its snippet's run at the base commit and with the
    gold patch (None: not run)."""
    claim = parse_statement(text).claim
    if claim is None:
        reason = "states no behaviour a run could show"
        return {Check.REPRODUCES: reason, Check.FIXED_BY_GOLD: reason}
    out: dict[Check, str | None] = {Check.REPRODUCES: None, Check.FIXED_BY_GOLD: None}
    if not shows_claim(claim, at_base):
        out[Check.REPRODUCES] = f"at the base commit it {describe(at_base)}"
    if with_gold is None:
        out[Check.FIXED_BY_GOLD] = "not run with the gold patch"
    elif not _fixed(claim, with_gold):
        out[Check.FIXED_BY_GOLD] = f"with the gold patch it {describe(with_gold)}"
    return out


def api_call_in(code: str, api_modules: set[str]) -> str | None:
    """The last call in `code` that names the project's API (a title's stand-in for a
    subject that does not), unparsed; None when there is none."""
    names = api_names(code, api_modules)
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    for stmt in reversed(tree.body):
        calls = [
            n
            for n in ast.walk(stmt)
            if isinstance(n, ast.Call) and isinstance(_root(n), ast.Name) and _root(n).id in names
        ]
        if calls:
            return ast.unparse(calls[0])
    return None


def names_api(code: str, reproduction: str | None, api_modules: set[str]) -> bool:
    """Does `code` call or read an attribute of the project's API (as the title check says)?"""
    return _names_api(code, api_names(reproduction, api_modules))
