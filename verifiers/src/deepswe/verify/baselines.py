"""Baselines a verifier must beat: rules that read only the patch's text.

    changes-code  1 when the patch changes a line of non-test code that is not a comment (or
                  blank), else 0: the one-line rule that separated the old scripted pools
                  perfectly (a comment beside the buggy line was their only wrong fix)
    smallest      among patches that change code, the one changing the fewest code lines;
                  patches that change none rank below every one that does
    random        a uniform pick (select.py), and the oracle, the ceiling

Both rules are scores like a verifier's (one float per candidate, higher picked first), so the
same selection, Best@k, AUC and calibration code measures them (Scores.changes_code,
Scores.smallest). A verifier is worth what it adds over the best of them.

What counts as code: files with a source suffix (CODE_SUFFIXES) that are not tests (a
`test`/`tests`/`testing` folder, `test_*.py`, `*_test.py`, `conftest.py`). In Python files a
line's comment is dropped (by the tokenizer, so a `#` inside a string stays), and blank lines
are dropped. Each hunk's old side (context and removed lines) and new side (context and added
lines) are compared as sequences of what is left (difflib): the lines in its differing blocks
are the changed code lines. So a removed `x = 1` against an added `x = 1  # note` is no code
change, and two blocks swapped are one (the same lines in another order).
"""

from __future__ import annotations

import difflib
import io
import re
import tokenize
from dataclasses import dataclass
from pathlib import PurePosixPath

CODE_SUFFIXES = frozenset(
    {
        ".py",
        ".pyx",
        ".pxd",
        ".pyi",
        ".c",
        ".h",
        ".cc",
        ".cpp",
        ".hpp",
        ".js",
        ".ts",
        ".go",
        ".rs",
        ".java",
        ".rb",
    }
)
TEST_DIRS = frozenset({"test", "tests", "testing"})
_HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")


@dataclass(frozen=True)
class PatchFacts:
    """What the baselines read from one patch."""

    changes_code: bool
    code_lines: int  # non-test code lines in the differing blocks of the hunks, both sides
    files: int  # files the patch touches, any kind


def is_test_path(path: str) -> bool:
    p = PurePosixPath(path)
    name = p.name
    return (
        any(part in TEST_DIRS for part in p.parts[:-1])
        or (name.startswith("test_") and name.endswith(".py"))
        or name.endswith("_test.py")
        or name == "conftest.py"
    )


def is_code_path(path: str) -> bool:
    return PurePosixPath(path).suffix in CODE_SUFFIXES and not is_test_path(path)


def code_of(line: str, python: bool) -> str:
    """A changed line's code: the line without its comment and trailing blanks ('' for none).
    A line the tokenizer cannot read alone (inside a multi-line string) is kept as it is."""
    if not python:
        return line.rstrip()
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(line).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return line.rstrip()
    comments = [t for t in tokens if t.type == tokenize.COMMENT]
    if not comments:
        return line.rstrip()
    return line[: comments[0].start[1]].rstrip()


def patch_hunks(patch: str) -> list[tuple[str, list[str], list[str]]]:
    """(path, old side, new side) of every hunk of a unified diff, read by its hunk counts (so
    a removed line that itself starts with '--' is still a line)."""
    out: list[tuple[str, list[str], list[str]]] = []
    lines = patch.splitlines()
    path, old_path, i = "", "", 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("--- "):
            old_path = _strip_prefix(line[4:])
        elif line.startswith("+++ "):
            new = _strip_prefix(line[4:])
            path = new if new != "/dev/null" else old_path
        elif (m := _HUNK.match(line)) and path:
            old_left = int(m.group(1)) if m.group(1) is not None else 1
            new_left = int(m.group(2)) if m.group(2) is not None else 1
            old, new_side = [], []
            while (old_left > 0 or new_left > 0) and i + 1 < len(lines):
                i += 1
                body = lines[i]
                if body.startswith("\\"):  # "\ No newline at end of file"
                    continue
                tag, text = body[:1], body[1:]
                if tag != "+":
                    old.append(text)
                    old_left -= 1
                if tag != "-":
                    new_side.append(text)
                    new_left -= 1
            out.append((path, old, new_side))
        i += 1
    return out


def _strip_prefix(name: str) -> str:
    name = name.split("\t", 1)[0].strip()
    return name[2:] if name[:2] in ("a/", "b/") else name


def patch_facts(patch: str) -> PatchFacts:
    hunks = patch_hunks(patch)
    total = 0
    for path, old, new in hunks:
        if not is_code_path(path):
            continue
        python = path.endswith((".py", ".pyi"))
        a = [c for c in (code_of(x, python) for x in old) if c.strip()]
        b = [c for c in (code_of(x, python) for x in new) if c.strip()]
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(
            None, a, b, autojunk=False
        ).get_opcodes():
            if tag != "equal":
                total += (i2 - i1) + (j2 - j1)
    return PatchFacts(changes_code=total > 0, code_lines=total, files=len({h[0] for h in hunks}))


def baseline_scores(patch: str) -> dict[str, float]:
    """The baselines' scores of one patch: changes_code in {0, 1}; smallest = 1 / (1 + changed
    code lines) for a patch that changes code, 0 for one that does not (ranked below all)."""
    facts = patch_facts(patch)
    smallest = 1.0 / (1 + facts.code_lines) if facts.changes_code else 0.0
    return {"changes_code": float(facts.changes_code), "smallest": smallest}
