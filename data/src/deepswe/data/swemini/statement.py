"""Problem statements in the style of a GitHub issue, written from a reproduction that was run.

Input: an `Issue`: what the reproduction showed at the base commit (the value it printed last,
or the exception it raised, or that it did not raise) and what it shows with the fix (the value
a user expects), the call the title names, the reproduction itself. Output: a title, an opener,
the claim, the reproduction. The text never names the test file, the test function, or the fix.
Templates are picked with `random.Random(seed)`, so the same seed gives the same text. The
claim phrasings are the ones `statement_check.claim_of` (and deepswe.verify's scripted
reproduction writer) read back.
"""

from __future__ import annotations

import ast
import random
from dataclasses import dataclass

from deepswe.data.task import Reproduction


@dataclass(frozen=True)
class Issue:
    kind: str  # "compare" | "truth" | "raises" | "no_raise"
    call: str  # the expression the issue is about
    title_call: str  # what the title names: the call, or the project's call it goes through
    shown: str  # the code quoted in the body (the call, the check, or the last statements)
    reproduction: str
    actual: str = ""  # compare: the value printed at the base commit
    expected: str = ""  # compare: the value printed with the fix; no_raise: the exception's
    # type; raises: the exception the fix raises instead, if any
    exception: str = ""  # raises: the exception as Python printed it


TITLES = {
    "compare": [
        "`{title_call}` returns `{actual_short}` instead of `{expected_short}`",
        "Wrong result from `{title_call}`",
        "Unexpected return value: `{title_call}`",
        "`{title_call}` gives an incorrect result",
    ],
    "truth": [
        "Check on `{title_call}` unexpectedly fails",
        "Wrong behaviour: `{title_call}`",
        "`{title_call}` does not behave as expected any more",
    ],
    "raises": [
        "`{title_call}` raises {exc_type}",
        "{exc_type} raised by `{title_call}`",
        "Crash: {exc_type} in `{title_call}`",
    ],
    "no_raise": [
        "`{title_call}` no longer raises {expected}",
        "Missing {expected} from `{title_call}`",
    ],
}
# when the subject names nothing of the project (`len(cache)`), the title names the project's
# call the reproduction goes through instead
TITLES_AFTER = {
    "compare": ["Wrong result after `{title_call}`"],
    "truth": ["Unexpected behaviour after `{title_call}`"],
    "raises": ["{exc_type} after `{title_call}`"],
    "no_raise": ["Missing {expected} after `{title_call}`"],
}
OPENERS = [
    "I'm using {project} {version} and ran into this.",
    "Found a problem in {project} ({version}).",
    "With {project} {version}, the following does not behave as documented.",
    "Hi! I think there's a bug in {project} {version}.",
    "While upgrading to {project} {version} one of my scripts started misbehaving.",
]
BODIES = {
    "compare": [
        "Evaluating\n\n```python\n{call}\n```\n\ngives `{actual}`, but I expected it to be `{expected}`.",
        "`{call}` returns `{actual}`. The expected result is `{expected}`.",
        "Calling `{call}` produces `{actual}`; it should be `{expected}`.",
    ],
    "truth": [
        "The following should be true but is not:\n\n```python\n{shown}\n```\n\nIt evaluates to `False`.",
        "I expected `{shown}` to hold, but it is `False`.",
    ],
    "raises": [
        "Calling `{call}` raises:\n\n```\n{exception}\n```\n\nIt should not raise; this used to work.",
        "`{call}` crashes with `{exception}` instead of returning a result.",
    ],
    "raises_block": [
        "Running\n\n```python\n{shown}\n```\n\nraises:\n\n```\n{exception}\n```\n\nIt should not raise; this used to work.",
    ],
    "raises_instead": [
        "Calling `{call}` raises:\n\n```\n{exception}\n```\n\nIt should raise `{expected}` instead.",
        "`{call}` crashes with `{exception}` instead of raising `{expected}`.",
    ],
    "no_raise": [
        "`{call}` should raise {expected} for this input, but it returns normally.",
        "No {expected} is raised by `{call}`; invalid input is silently accepted.",
    ],
}
TITLE_CALL = 72  # characters of the call shown in a title; the body has it whole
TITLE_VALUE = 40  # characters of a value shown in a title
CLOSERS = ["", "Thanks!", "Could you take a look?", "Let me know if you need more details.", ""]


def shorten_code(code: str, limit: int = TITLE_CALL) -> str:
    """`code` on one line within `limit` characters: a long call keeps its callee,
    `f(...)` (still Python), else it is cut with "..."."""
    code = " ".join(code.split())
    if len(code) <= limit:
        return code
    try:
        node = ast.parse(code, mode="eval").body
    except SyntaxError:
        node = None
    if isinstance(node, ast.Call):
        callee = f"{ast.unparse(node.func)}(...)"
        if len(callee) <= limit:
            return callee
    return code[: limit - 3] + "..."


def _is_call(issue: Issue) -> bool:
    """The issue is about one call, which the text can quote inline."""
    try:
        node = ast.parse(issue.call, mode="eval").body
    except SyntaxError:
        return False
    return isinstance(node, ast.Call) and "\n" not in issue.shown


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def write_statement(issue: Issue, project: str, version: str, seed: str) -> str:
    """The issue text (deterministic in `seed`)."""
    rng = random.Random(seed)
    fields = {
        "call": issue.call,
        "shown": issue.shown,
        "title_call": shorten_code(issue.title_call),
        "actual": issue.actual,
        "expected": issue.expected,
        "actual_short": _cut(issue.actual, TITLE_VALUE),
        "expected_short": _cut(issue.expected, TITLE_VALUE),
        "exception": issue.exception,
        "exc_type": issue.exception.split(":", 1)[0].rsplit(".", 1)[-1],
        "project": project,
        "version": version,
    }
    titles = TITLES if issue.title_call in issue.call else TITLES_AFTER
    body = issue.kind
    if issue.kind == "raises":
        body = (
            "raises_instead" if issue.expected else "raises" if _is_call(issue) else "raises_block"
        )
    parts = [
        f"### {rng.choice(titles[issue.kind]).format(**fields)}",
        rng.choice(OPENERS).format(**fields),
        rng.choice(BODIES[body]).format(**fields),
        f"Reproduction:\n\n```python\n{issue.reproduction.strip()}\n```",
        rng.choice(CLOSERS),
    ]
    return "\n\n".join(p for p in parts if p).strip() + "\n"


def reproduction_of(issue: Issue) -> Reproduction:
    """What the issue's reproduction must do once fixed, as grading checks it
    (`deepswe.data.task.Reproduction`)."""
    code = issue.reproduction.strip() + "\n"
    if issue.kind == "compare":
        return Reproduction(code=code, fixed="prints", expected=issue.expected)
    if issue.kind == "truth":
        return Reproduction(code=code, fixed="prints", expected="True")
    if issue.kind == "no_raise" or (issue.kind == "raises" and issue.expected):
        return Reproduction(code=code, fixed="raises", expected=_exception_type(issue.expected))
    return Reproduction(code=code, fixed="runs")


def _exception_type(text: str) -> str:
    return text.split(":", 1)[0].strip().rsplit(".", 1)[-1]


def read_reproduction(statement: str) -> Reproduction | None:
    """The reproduction a statement written here holds, and what it must do once fixed, read back
    from its text (`statement_check.parse_statement`: the rows released before tasks carried
    it); None when the text shows no reproduction or no claim this can read."""
    from deepswe.data.swemini.statement_check import parse_statement

    parsed = parse_statement(statement)
    claim, code = parsed.claim, parsed.reproduction
    if claim is None or not code or not code.strip():
        return None
    if claim.kind == "compare" and not claim.expected:
        return None
    if claim.kind == "no_raise":
        kind, expected = "no_raise", claim.exception
    else:
        kind, expected = claim.kind, claim.expected
    return reproduction_of(Issue(kind, "", "", "", code, expected=expected))
