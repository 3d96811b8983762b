"""The comparison rules of bench/parity.py: how an observation of ours and R2E-Gym's recorded
one are normalised (timings, walk order, the interpreter's paths, run-to-run randomness; each
rule stated in parity.py's docstring) and, where they still differ, which category the
difference falls in, with an excerpt a reader can check."""

from __future__ import annotations

import difflib
import re
from collections import Counter

# --- normalisation -------------------------------------------------------------------------

_PYTEST_SUMMARY = re.compile(r"^=+ .* =+$")
_SECONDS = re.compile(r"\d+(?:\.\d+)?s\b")
_HMS = re.compile(r"\(\d+:\d\d:\d\d\)")
_DURATION_LINE = re.compile(r"^\s*\d+(?:\.\d+)?s (?:call|setup|teardown)\s")
_UNITTEST_RAN = re.compile(r"^(Ran \d+ tests? in )\d+(?:\.\d+)?s$")
_SITE = re.compile(
    r"(?:/[\w.+-]+)*/lib/python\d\.\d+/site-packages/|/usr/lib/python3/dist-packages/"
)
_STDLIB = re.compile(r"(?:/[\w.+-]+)*/lib/python\d\.\d+/")
_EXECUTABLE = re.compile(r"(?:/[\w.+-]+)+/bin/python[\d.]*\b")
_RELEASE = re.compile(r"\bPython (\d+\.\d+)\.\d+\b")
_WALKS = re.compile(
    r"^\s*(?:cd \S+\s*&&\s*)?(?:find\s|grep\s(?:[^|]*\s)?-(?:\w*[rR]\w*|-recursive)\b)"
)
_DIRECTORY_VIEW = "files and directories up to 2 levels deep"
_ADDRESS = re.compile(r"\b0x[0-9a-f]{8,16}\b")
_TMPNAME = re.compile(r"/tmp/tmp[a-z0-9_]{8}\b")
TIMING, WALK, INTERPRETER, RANDOM = "<T>s", "walk order", "interpreter path", "randomness"
RELEASE = "interpreter patch release"


def _timings(text: str) -> str:
    lines = []
    for line in text.split("\n"):
        if _PYTEST_SUMMARY.match(line.strip()):
            line = _HMS.sub("(<T>)", _SECONDS.sub(TIMING, line))
        elif _DURATION_LINE.match(line):
            line = f"<durations line: {TIMING}>"
        else:
            line = _UNITTEST_RAN.sub(rf"\g<1>{TIMING}", line)
        lines.append(line)
    return "\n".join(lines)


def _interpreter(text: str) -> str:
    text = _STDLIB.sub("<stdlib>/", _SITE.sub("<site-packages>/", text))
    return _EXECUTABLE.sub("<python>", text)


def _release(text: str) -> str:
    return _RELEASE.sub(r"Python \g<1>.<patch>", text)


def walks_tree(function: str, params: dict[str, str], recorded: str) -> bool:
    """Whether the call's output lists what a walk of the tree found (rule 2)."""
    if function == "search":
        return True
    if function == "file_editor":
        return _DIRECTORY_VIEW in recorded
    if function == "execute_bash":
        return bool(_WALKS.match(params.get("cmd", params.get("command", ""))))
    return False


def _randomness(text: str) -> str:
    return _TMPNAME.sub("/tmp/tmp<random>", _ADDRESS.sub("0x<address>", text))


_PLUGINS = re.compile(r"^(plugins: )(.+)$", re.M)


def _plugin_order(text: str) -> str:
    """pytest's `plugins:` header in sorted order: pytest lists them as importlib.metadata finds
    their distributions, which is the order site-packages' directory is read (rule 2's)."""
    return _PLUGINS.sub(lambda m: m.group(1) + ", ".join(sorted(m.group(2).split(", "))), text)


def normalise(text: str, walk: bool) -> str:
    text = _randomness(_plugin_order(_release(_interpreter(_timings(text)))))
    if walk:  # a multiset of lines: sorted
        text = "\n".join(sorted(line.rstrip() for line in text.split("\n")))
    return text


# --- categories of difference ---------------------------------------------------------------

_LOCATION = re.compile(r'File "[^"]*", line \d+')
_CARETS = re.compile(r"^\s*[\^~]+\s*$")
_TRUNCATED = "<Observation truncated in middle"
# bash's "Aborted (core dumped)": a core was written, which R2E-Gym's hosts did (Ubuntu's
# core_pattern pipes it to apport) and this one would only do into the working directory
_CORE = " (core dumped)"
_LS = re.compile(r"^\s*(?:cd \S+\s*&&\s*)?ls\b")
_ENV_LINE = re.compile(
    r"warn|^platform |^plugins:|^rootdir:|^cachedir:|^configfile:|python \d|version", re.I
)


def _without(text: str, pattern: re.Pattern) -> list[str]:
    return [line for line in text.split("\n") if not pattern.search(line)]


def category(t: dict, recorded: str, ours: str | None, tool_names: set[str], walk: bool) -> str:
    """The first category whose rule holds (texts already normalised)."""
    function, params = t["function"], t["parameters"]
    if ours is None:
        return "not replayed"
    if walk and all(_TRUNCATED in x for x in (recorded, ours)):
        return "walk order (both cut to 40+40 lines)"
    if walk:
        a = Counter(line.rstrip() for line in recorded.split("\n"))
        b = Counter(line.rstrip() for line in ours.split("\n"))
        if a >= b or b >= a:
            return "image contents"
    if function == "execute_bash" and _LS.match(params.get("cmd", "")):
        return "image contents"
    if function not in tool_names:
        return "invalid function"
    if function in ("finish", "submit"):
        return "finish"
    if any("decode" in x.lower() or "\ufffd" in x for x in (recorded, ours)):
        return "decoding"
    if ("took too long" in recorded) != ("took too long" in ours):
        return "timeout"
    a, b = recorded.split("\n"), ours.split("\n")
    if a[0] != b[0] and a[1:] == b[1:] and a[0].startswith("Exit code"):
        return "exit code"
    if (_TRUNCATED in recorded) != (_TRUNCATED in ours):
        return "truncation"
    if _without(_LOCATION.sub("<loc>", recorded), _CARETS) == _without(
        _LOCATION.sub("<loc>", ours), _CARETS
    ):
        return "traceback paths"
    if _without(recorded, _ENV_LINE) == _without(ours, _ENV_LINE):
        return "warnings/environment"
    if recorded.replace(_CORE, "") == ours.replace(_CORE, ""):
        return "core dump (the host kernel's)"
    return "other"


def excerpt(recorded: str, ours: str | None, width: int = 150) -> str:
    """The first differing line of each side."""
    if ours is None:
        return "(our episode ended before this step)"
    a, b = recorded.split("\n"), ours.split("\n")
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag != "equal":
            left = a[i1] if i1 < i2 else "(nothing)"
            right = b[j1] if j1 < j2 else "(nothing)"
            return f"R2E-Gym {left[:width]!r} | ours {right[:width]!r}"
    return "(same lines, different line endings or whitespace)"


def compare(texts: list[dict], tool_names) -> dict:
    """Raw and normalised equality of each step, with a category and excerpt where they differ
    and the rules that made them equal where only normalisation did."""
    steps, raw_same, norm_same = [], 0, 0
    for t in texts:
        rec, ours, function = t["recorded"], t["ours"], t["function"]
        walk = walks_tree(function, t["parameters"], rec)
        same = ours == rec
        same_norm = ours is not None and normalise(ours, walk) == normalise(rec, walk)
        raw_same += same
        norm_same += same_norm
        step = {"step": t["step"], "function": function, "same": same, "same_norm": same_norm}
        if not same_norm:
            ours_n = None if ours is None else normalise(ours, walk)
            step["category"] = category(t, normalise(rec, walk), ours_n, set(tool_names), walk)
            rec_n = normalise(rec, False)
            step["excerpt"] = (
                walk_excerpt(rec_n, ours_n)
                if walk and ours_n is not None
                else excerpt(rec_n, None if ours is None else normalise(ours, False))
            )
        elif not same:  # which rules made them equal
            step["rules"] = [
                name
                for name, rule in (
                    ("timings", _timings),
                    (INTERPRETER, _interpreter),
                    (RELEASE, _release),
                    (RANDOM, _randomness),
                    (WALK, _plugin_order),
                )
                if rule(ours) != ours or rule(rec) != rec
            ]
            step["rules"] += [WALK] if walk and WALK not in step["rules"] else []
        steps.append(step)
    return {"raw_same": raw_same, "norm_same": norm_same, "step_results": steps}


def walk_excerpt(recorded: str, ours: str, width: int = 150) -> str:
    """A walk's first line (in sorted order) found on one side only, for each side."""
    a = Counter(line.rstrip() for line in recorded.split("\n"))
    b = Counter(line.rstrip() for line in ours.split("\n"))
    only_a, only_b = sorted((a - b).elements()), sorted((b - a).elements())
    left = f"{only_a[0][:width]!r} (+{len(only_a) - 1} more)" if only_a else "(nothing)"
    right = f"{only_b[0][:width]!r} (+{len(only_b) - 1} more)" if only_b else "(nothing)"
    return f"only in R2E-Gym's {left} | only in ours {right}"
