"""Problem statements in the style of a GitHub issue, written from the observed failure.

Input: the `Observation` of one failing test and the test module's imports. Output: a title, what
was called with which inputs, what came back, what was expected, and a short reproduction. The
text never names the test file, the test function, or the fix. Templates are picked with
`random.Random(seed)`, so the same seed gives the same text.
"""

from __future__ import annotations

import ast
import random

from deepswe.data.swemini.failure import Observation

TITLES = {
    "compare": [
        "`{call}` returns `{actual}` instead of `{expected}`",
        "Wrong result from `{call}`",
        "Unexpected return value: `{call}`",
        "`{call}` gives an incorrect result",
    ],
    "truth": [
        "`{call}` does not hold any more",
        "Check `{call}` unexpectedly fails",
        "Wrong behaviour: `{call}`",
    ],
    "raises": [
        "`{call}` raises {exc_type}",
        "{exc_type} raised by `{call}`",
        "Crash: {exc_type} in `{call}`",
    ],
    "no_raise": ["`{call}` no longer raises {expected}", "Missing {expected} for invalid input"],
    "other": ["Regression: `{call}` misbehaves", "Unexpected failure in {project}"],
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
        "Evaluating\n\n```python\n{call}\n```\n\ngives `{actual}`, but I expected it to be {op_words}`{expected}`.",
        "`{call}` returns `{actual}`. The expected result is {op_words}`{expected}`.",
        "Calling `{call}` produces `{actual}`; it should be {op_words}`{expected}`.",
    ],
    "truth": [
        "The following should be true but is not:\n\n```python\n{call}\n```\n\n({exc})",
        "I expected `{call}` to hold, but it fails ({exc}).",
    ],
    "raises": [
        "Calling `{call}` raises:\n\n```\n{exc}\n```\n\nIt should not raise; this used to work.",
        "`{call}` crashes with `{exc}` instead of returning a result.",
    ],
    "no_raise": [
        "`{call}` should raise {expected} for this input, but it returns normally.",
        "No {expected} is raised by `{call}`; invalid input is silently accepted.",
    ],
    "other": [
        "This fails:\n\n```python\n{call}\n```\n\n```\n{exc}\n```",
        "Running `{call}` fails with `{exc}`.",
    ],
}
TITLE_CALL = 72  # characters of the call shown in a title; the body has it whole
CLOSERS = ["", "Thanks!", "Could you take a look?", "Let me know if you need more details.", ""]
_OP_WORDS = {"==": "", "!=": "different from", "in": "contained in", "not in": "absent from",
             "is": "", "is not": "not", "<": "less than", "<=": "at most", ">": "greater than",
             ">=": "at least"}  # fmt: skip


def needed_imports(test_source: str, names: set[str]) -> list[str]:
    """The test module's top-level import lines that bind any of `names`."""
    try:
        tree = ast.parse(test_source)
    except SyntaxError:
        return []
    lines = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound = {(a.asname or a.name).split(".")[0] for a in node.names}
            if bound & names and not (isinstance(node, ast.ImportFrom) and node.level):
                keep = [a for a in node.names if (a.asname or a.name).split(".")[0] in names]
                node = type(node)(**{**node.__dict__, "names": keep})
                lines.append(ast.unparse(node))
    return lines


def reproduction(obs: Observation, imports: list[str]) -> str:
    if obs.kind == "compare":
        line = f"print(repr({obs.call}))"
    elif obs.kind in ("truth",):
        line = f"print({obs.call})"
    else:
        line = obs.call or obs.statement
    return "\n".join([*imports, "", obs.context, line]).replace("\n\n\n", "\n\n").strip()


def write_statement(
    obs: Observation, test_source: str, project: str, version: str, seed: str
) -> str:
    """The issue text for one observed failure (deterministic in `seed`)."""
    rng = random.Random(seed)
    kind = obs.kind if obs.call or obs.kind == "other" else "other"
    fields = {
        "call": obs.call or obs.statement,
        "actual": obs.actual,
        "expected": obs.expected,
        "exc": obs.exception,
        "exc_type": obs.exception.split(":", 1)[0] or "an exception",
        "project": project,
        "version": version,
        "op_words": f"{_OP_WORDS[obs.op]} " if _OP_WORDS.get(obs.op) else "",
    }
    call = " ".join(fields["call"].split())
    short = {"call": call if len(call) <= TITLE_CALL else call[: TITLE_CALL - 3] + "..."}
    title = rng.choice(TITLES[kind]).format(**{**fields, **short})
    body = rng.choice(BODIES[kind]).format(**fields)
    repro = reproduction(obs, needed_imports(test_source, obs.names))
    parts = [
        f"### {title}",
        rng.choice(OPENERS).format(**fields),
        body,
        f"Reproduction:\n\n```python\n{repro}\n```",
        rng.choice(CLOSERS),
    ]
    return "\n\n".join(p for p in parts if p).strip() + "\n"
