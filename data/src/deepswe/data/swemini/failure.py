"""Reading one pytest failure section (long traceback, `-l` locals) into where it failed.

pytest separates the traceback's entries with `_ _ _` lines. A long entry (the test's own frame,
the raising frame) shows the function's source, `>` at the failing line, its locals unindented,
then `path:line: ...`; a short entry (frames in between) starts with `path:line: in func`, then
the failing line, then its locals indented. `read_failure` keeps each frame's file, line and
literal-looking locals (as pytest printed them) and the exception (`E` line): what the
reproduction builder (`repro.py`) needs to turn test code into a script.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath

_LOCATION = re.compile(r"^(\S+\.py):(\d+):")
_SEPARATOR = re.compile(r"^(?:_ )+_\s*$")
_LONG_LOCAL = re.compile(r"^([A-Za-z_]\w*) += (.+)$")
_SHORT_LOCAL = re.compile(r"^ {8}([A-Za-z_]\w*) += (.+)$")
_ARGS_SPLIT = re.compile(r", (?=[A-Za-z_]\w* = )")
_ADDR = re.compile(r" at 0x[0-9a-f]+")
MAX_VALUE = 240


@dataclass
class Frame:
    path: str  # relative to the repository root
    line: int
    locals: dict[str, str] = field(default_factory=dict)  # name -> repr, as pytest showed it


@dataclass
class Failure:
    frames: list[Frame]  # outermost (the test function) first
    exception: str  # the `E` line: "TypeError: ..." or "AssertionError: assert ..."

    def test_frames(self) -> list[Frame]:
        """Frames in test code, innermost first: where the test itself called the project."""
        return [f for f in reversed(self.frames) if is_test_path(f.path)]


def is_test_path(rel: str) -> bool:
    """Test code as synthesis sees it: never mutated, never shown as the project's."""
    name = PurePosixPath(rel).name
    return (
        "/tests/" in f"/{rel}"
        or "/test/" in f"/{rel}"
        or name.startswith("test_")
        or name == "conftest.py"
    )


def short(text: str) -> str:
    """One value as an issue shows it: no addresses, at most MAX_VALUE characters."""
    text = _ADDR.sub("", text.strip())
    return text if len(text) <= MAX_VALUE else text[: MAX_VALUE - 3] + "..."


def _entries(section: str) -> list[list[str]]:
    out, cur = [], []
    for line in section.splitlines():
        if _SEPARATOR.match(line):
            out.append(cur)
            cur = []
        else:
            cur.append(line)
    out.append(cur)
    return [e for e in out if any(x.strip() for x in e)]


def _frame(entry: list[str]) -> Frame | None:
    lines = [x for x in entry if x.strip()]
    locations = [(i, m) for i, x in enumerate(lines) if (m := _LOCATION.match(x))]
    if not locations:
        return None
    i, m = locations[0] if locations[0][0] == 0 else locations[-1]
    frame = Frame(m.group(1), int(m.group(2)))
    pattern = _SHORT_LOCAL if i == 0 else _LONG_LOCAL
    for line in lines[2:] if i == 0 else lines[:i]:
        # a long entry opens with its arguments on one line (`a = 1, b = 'x'`); the locals
        # block after the source repeats them one a line, and wins
        for part in _ARGS_SPLIT.split(line) if i else [line]:
            if local := pattern.match(part):
                frame.locals[local.group(1)] = local.group(2)
    return frame


def _exception(section: str) -> str:
    """The first `E` line: `TypeError: ...` or `AssertionError: assert x == y`."""
    for line in section.splitlines():
        if line.startswith("E ") and line[1:].strip():
            text = short(line[1:].strip())
            return f"AssertionError: {text}" if text.startswith("assert ") else text
    return ""


def read_failure(section: str) -> Failure | None:
    """The frames and the exception of one failure section; None when it shows no frame."""
    frames = [f for e in _entries(section) if (f := _frame(e)) is not None]
    return Failure(frames, _exception(section)) if frames else None
