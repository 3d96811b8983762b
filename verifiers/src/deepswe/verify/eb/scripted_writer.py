"""A SCRIPTED STAND-IN for the test-writing agent, for the tiny profile only.

The tiny model cannot write reproduction tests, so this writer turns the issue's own
reproduction snippet into one: no model is involved, and its name ("scripted-standin"), this
docstring and the header of every test it writes say so. It reads only the public problem
statement (what a test-writing agent sees), never hidden tests or the gold patch.

What it needs from the issue:
- a reproduction snippet: the ```python block after "Reproduction:", else the last one;
- a claim it can check, in the phrasing issues use (swe-mini's statements are written so):
    compare   "`call` gives/returns/produces `A` ... expected it to be / should be `B`"
    raises    "`call` raises X" / "crashes with `X: ...`"  (the fix: no exception; the message,
              when the issue shows it, must match too: a snippet that fails for another
              reason, e.g. a name it never defines, does not reproduce the issue)
    no_raise  "should raise X" / "No X is raised"           (the fix: X is raised)
    truth     "should be true but is not" / "expected `call` to hold"
Without both, the writer reports NOT_APPLICABLE with the reason; so it does when the snippet
ends by printing an expression of literals and builtins only (no fix could change it).

The test runs the snippet with its stdout captured, reads the last line it printed and any
exception, and prints "Issue reproduced" when that matches the reported behaviour, "Issue
resolved" when it matches the expected one, "Other issues" otherwise. A reported value shown
shortened with "..." matches by its pieces, in order. For "different from" and other non-equality
expectations any exception-free value other than the reported one counts as resolved: weaker
than an agent's test, and said here so nobody mistakes it for one.
"""

from __future__ import annotations

import ast
import builtins
import re
from dataclasses import dataclass

NAME = "scripted-standin"
HEADER = (
    "# STAND-IN reproduction test, written by a script (deepswe.verify.eb.scripted_writer),\n"
    "# not by a model: the issue's own reproduction snippet and its stated behaviour.\n"
)

_BLOCK = re.compile(r"```python[ \t]*\n(.*?)```", re.S)
_REPRO = re.compile(r"Reproduction:?\s*```python[ \t]*\n(.*?)```", re.S)
_COMPARE = re.compile(
    r"(?:gives|returns|produces) `(?P<actual>[^`]*)`[^`]*?"
    r"(?:expected it to be|expected result is|should be) (?P<op>[a-z ]*?)\s*`(?P<expected>[^`]*)`"
)
_EXC = r"(?P<exc>[A-Za-z_][\w.]*(?:Error|Exception|Warning|Exit|Interrupt|Iteration))"
_RAISES = [
    re.compile(r"raises:\s*```\w*\n" + _EXC + r"(?::[ \t]*(?P<msg>[^\n]*))?"),
    re.compile(r"crashes with `" + _EXC + r"(?::[ \t]*(?P<msg>[^`]*))?"),
    re.compile(r"` raises " + _EXC),
    re.compile(_EXC + r" raised by `"),
]
_NO_RAISE = [re.compile(r"should raise " + _EXC), re.compile(r"No " + _EXC + r" is raised")]
_TRUTH = re.compile(r"should be true but is not|expected `[^`]*` to hold")


@dataclass(frozen=True)
class Claim:
    """What the issue says the snippet does now, and what it should do."""

    kind: str  # compare | raises | no_raise | truth
    actual: str = ""
    op: str = ""
    expected: str = ""
    exception: str = ""
    message: str = ""  # the exception's message as the issue shows it ("" when not shown)


def snippet_of(statement: str) -> str | None:
    m = _REPRO.search(statement)
    blocks = _BLOCK.findall(statement)
    code = m.group(1) if m else (blocks[-1] if blocks else None)
    return code if code and code.strip() else None


def claim_of(statement: str) -> Claim | None:
    for pattern in _NO_RAISE:
        if m := pattern.search(statement):
            return Claim("no_raise", exception=m.group("exc").rsplit(".", 1)[-1])
    if m := _COMPARE.search(statement):
        return Claim(
            "compare",
            actual=m.group("actual"),
            op=m.group("op").strip(),
            expected=m.group("expected"),
        )
    for pattern in _RAISES:
        if m := pattern.search(statement):
            msg = (m.groupdict().get("msg") or "").strip()
            return Claim("raises", exception=m.group("exc").rsplit(".", 1)[-1], message=msg)
    if _TRUTH.search(statement):
        return Claim("truth")
    return None


def prints_constant(code: str) -> bool:
    """The snippet ends by printing an expression of literals and builtins only: its output
    cannot change with the repository, so no fix can turn it into the expected value."""
    try:
        last = ast.parse(code).body[-1]
    except (SyntaxError, IndexError):
        return False
    if not (isinstance(last, ast.Expr) and isinstance(last.value, ast.Call)):
        return False
    names = {n.id for n in ast.walk(last.value) if isinstance(n, ast.Name)}
    attrs = any(isinstance(n, ast.Attribute) for n in ast.walk(last.value))
    return not attrs and names <= set(dir(builtins))


# The test's own logic; kept to Python 3.6 (the oldest interpreter a task image may have).
_BODY = """
import contextlib
import io


def run_snippet():
    namespace, out, error = {"__name__": "__issue_snippet__"}, io.StringIO(), None
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(SNIPPET, "<issue snippet>", "exec"), namespace)
    except Exception as exc:  # the snippet's own failure is what is being checked
        error = exc
    lines = [line.strip() for line in out.getvalue().splitlines() if line.strip()]
    return namespace, error, (lines[-1] if lines else None)


def shown_as(text, shown):
    if text is None:
        return False
    parts = shown.split("...")
    if len(parts) == 1:
        return text == shown
    end = len(text) - len(parts[-1])
    if end < len(parts[0]) or not (text.startswith(parts[0]) and text.endswith(parts[-1])):
        return False
    pos = len(parts[0])
    for part in parts[1:-1]:  # the shown pieces between elisions, in order
        pos = text.find(part, pos, end)
        if pos < 0:
            return False
        pos += len(part)
    return True


def raised(error, name, message=""):
    if error is None or name not in {c.__name__ for c in type(error).__mro__}:
        return False
    return not message or shown_as(str(error).strip(), message)


def verdict():
    namespace, error, last = run_snippet()
    kind = CLAIM["kind"]
    if kind == "compare":
        if error is not None:
            return "Other issues"
        if shown_as(last, CLAIM["actual"]):
            return "Issue reproduced"
        if CLAIM["op"]:
            return "Issue resolved"
        try:
            wanted = repr(eval(CLAIM["expected"], namespace))
        except Exception:
            wanted = None
        return "Issue resolved" if last in (CLAIM["expected"], wanted) else "Other issues"
    if kind == "raises":
        if error is None:
            return "Issue resolved"
        reported = raised(error, CLAIM["exception"], CLAIM["message"])
        return "Issue reproduced" if reported else "Other issues"
    if kind == "no_raise":
        if error is None:
            return "Issue reproduced"
        return "Issue resolved" if raised(error, CLAIM["exception"]) else "Other issues"
    if isinstance(error, AssertionError) or last == "False":
        return "Issue reproduced"
    return "Issue resolved" if error is None and last == "True" else "Other issues"


print(verdict())
"""


def write_standin_test(statement: str) -> tuple[str | None, str]:
    """(test source, account) from a problem statement; source None when not applicable."""
    code = snippet_of(statement)
    if code is None:
        return None, "not applicable: the issue has no ```python reproduction snippet"
    claim = claim_of(statement)
    if claim is None:
        return None, "not applicable: the issue states no behaviour the stand-in can check"
    if claim.kind in ("compare", "truth") and prints_constant(code):
        return None, "not applicable: the snippet prints a value that does not depend on the code"
    fields = {k: getattr(claim, k) for k in ("kind", "actual", "op", "expected", "exception")}
    fields["message"] = claim.message
    source = f"{HEADER}\nSNIPPET = {code!r}\nCLAIM = {fields!r}\n{_BODY}"
    return source, f"{NAME}: {claim.kind} claim from the issue's reproduction snippet"
