"""One kept mutant's problem statement, written only from what a reproduction really does.

The failing tests' tracebacks give reproductions (`repro.py`), best kinds first. Each is run at
the base commit (twice, under two hash seeds: a claim must not depend on set order) and with the
fix; the difference between those runs is the claim (a value that changes, an exception that
goes away, an exception that appears), written as an issue (`statement.py`), and the text is
kept only if it names no test and passes every statement check (`statement_check.py`) against
the same runs. No candidate passing: no statement, and the synthesis drops the task.
"""

from __future__ import annotations

import ast
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from deepswe.data.swemini.attempt import Attempt
from deepswe.data.swemini.failure import Failure, read_failure, short
from deepswe.data.swemini.repro import Script, scripts
from deepswe.data.swemini.snippet import SnippetRun
from deepswe.data.swemini.statement import Issue, reproduction_of, shorten_code, write_statement
from deepswe.data.swemini.statement_check import (
    api_call_in,
    check_runs,
    check_self_contained,
    check_static,
    names_api,
)
from deepswe.data.task import Reproduction

Runner = Callable[[str, bool, str], SnippetRun]  # (code, at the base commit?, PYTHONHASHSEED)
MAX_CANDIDATES = 12  # reproductions run per mutant at most


@dataclass
class Written:
    statement: str | None
    tried: list[str] = field(default_factory=list)  # why each candidate before it failed
    reproduction: Reproduction | None = None  # the statement's, and what it does once fixed

    @property
    def reason(self) -> str:
        """Why there is no statement: what was wrong with the best candidate."""
        return self.tried[0] if self.tried else "no reproduction could be built from the tests"


def forbidden_words(attempt: Attempt) -> set[str]:
    """Names a problem statement must not contain: the failing tests' functions, classes,
    files and modules."""
    words = set()
    for nodeid in attempt.fail_to_pass + attempt.pass_to_pass:
        path, _, rest = nodeid.partition("::")
        words |= {Path(path).name, Path(path).stem}
        words |= {part.split("[")[0] for part in rest.split("::")}
    return {w for w in words if len(w) > 3}


# Machine-specific text (paths, temp names, addresses) would make the statement differ between
# machines and runs, and says nothing about the bug.
_LOCAL_TEXT = re.compile(r"/tmp/|/root/|/home/|site-packages|swe-mini|0x[0-9a-fA-F]{6,}")


def leaks(text: str, words: set[str]) -> bool:
    return any(w in text for w in words) or _LOCAL_TEXT.search(text) is not None


def _rank(failure: Failure) -> int:
    """A wrong value first, then a crash, then a missing exception."""
    exc = failure.exception
    if exc.startswith("Failed: DID NOT RAISE") or "not raised" in exc:
        return 2
    return 0 if exc.startswith("AssertionError") else 1


def candidates(
    attempt: Attempt, rng: random.Random, read: Callable[[str], str | None], api: set[str]
) -> list[Script]:
    """Reproductions from every readable failing test, best first (ties shuffled by rng)."""
    failures = [
        (t, f) for t, s in sorted(attempt.sections.items()) if (f := read_failure(s)) is not None
    ]
    rng.shuffle(failures)
    failures.sort(key=lambda tf: _rank(tf[1]))  # stable: ties keep the shuffle
    out: list[Script] = []
    for nodeid, failure in failures:
        found = [s for s in scripts(failure, nodeid, read, api) if s not in out]
        # a script that never calls the project cannot show its bug; one whose subject is the
        # project's call makes the clearest issue
        found = [s for s in found if api_call_in(s.code, api) is not None]
        out += sorted(found, key=lambda s: not names_api(s.subject, s.code, api))
    return out


def _same(a: SnippetRun, b: SnippetRun) -> bool:
    return (short(a.last or ""), short(a.exception or "")) == (
        short(b.last or ""),
        short(b.exception or ""),
    )


def _first_line(exception: str) -> str:
    return short(exception.splitlines()[0])


def claim(script: Script, title_call: str, base: SnippetRun, gold: SnippetRun) -> Issue | None:
    """The issue the two runs support, or None when they show no clean difference."""
    common = {
        "call": script.subject,
        "title_call": title_call,
        "shown": script.shown,
        "reproduction": script.code,
    }
    if base.exception and not gold.exception:
        return Issue("raises", exception=_first_line(base.exception), **common)
    if (
        base.exception
        and gold.exception
        and script.expects
        and (base.exception_types[0] != gold.exception_types[0])
    ):  # the test expects an exception, and a different one comes
        exc, expected = _first_line(base.exception), _first_line(gold.exception)
        return Issue("raises", exception=exc, expected=expected, **common)
    if not base.exception and gold.exception and script.final == "statement" and script.expects:
        return Issue("no_raise", expected=gold.exception_types[0], **common)
    if base.exception or gold.exception or script.final == "statement":
        return None
    if base.last is None or gold.last is None or _same(base, gold):
        return None
    if script.final == "truth":
        ok = (base.last, gold.last) == ("False", "True")
        return Issue("truth", **common) if ok else None
    return Issue("compare", actual=short(base.last), expected=short(gold.last), **common)


def _title_call(script: Script, api: set[str]) -> str | None:
    """What the title names: the subject if it shows a call of the project once shortened for
    a title, else the project's call inside it, else the last one the script makes."""
    try:
        inner = [
            ast.unparse(n)
            for n in ast.walk(ast.parse(script.subject, mode="eval"))
            if isinstance(n, ast.Call)
        ]
    except SyntaxError:
        inner = []
    last = api_call_in(script.code, api)
    for option in [script.subject, *inner, *([last] if last else [])]:
        if names_api(shorten_code(option), script.code, api):
            return option
    return None


def _inline_safe(issue: Issue) -> bool:
    """Code and values shown inline hold no backtick or newline (they would break the text)."""
    inline = [issue.call, issue.title_call, issue.actual, issue.expected, issue.exception]
    if issue.kind == "truth":
        inline.append(issue.shown)
    return not any("`" in x or "\n" in x for x in inline)


def write_issue(
    attempt: Attempt,
    read: Callable[[str], str | None],
    api: set[str],
    run: Runner,
    project: str,
    version: str,
    seed: str,
) -> Written:
    """The statement for `attempt`, from the first reproduction that holds up (seeded)."""
    words, tried = forbidden_words(attempt), []
    for script in candidates(attempt, random.Random(seed), read, api)[:MAX_CANDIDATES]:
        why = check_self_contained(script.code, api)
        title_call = _title_call(script, api)
        if why or title_call is None:
            why = why or "the title would name no call of the project"
            tried.append(why)
            continue
        base = run(script.code, True, "0")
        gold = run(script.code, False, "0") if not base.timed_out else base
        issue = claim(script, title_call, base, gold)
        if issue is None or not _inline_safe(issue):
            tried.append("the reproduction shows no difference the fix makes")
            continue
        if not _same(base, run(script.code, True, "1")):
            tried.append("the reproduction's output depends on the hash seed")
            continue
        text = write_statement(issue, project, version, seed)
        verdicts = {**check_static(text, api), **check_runs(text, base, gold)}
        failed = [f"{c.value}: {v}" for c, v in verdicts.items() if v]
        if failed or leaks(text, words):
            tried.append(failed[0] if failed else "the statement would name a test")
            continue
        return Written(text, tried, reproduction_of(issue))
    return Written(None, tried)
