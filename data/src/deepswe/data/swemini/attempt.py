"""Trying one mutant against the project's own tests on the host, and judging it.

A mutant is kept only if (1) at least one test that passed on the clean code now fails
(FAIL_TO_PASS), (2) the other tests of the affected test files still pass (PASS_TO_PASS), and
(3) a second run of exactly the task's test command gives identical statuses (no flaky task).
Everything else is rejected with a reason, counted in the synthesis report.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from deepswe.data.swemini.mutate import Mutation
from deepswe.data.swemini.runner import RunResult, failure_key, run_pytest

MAX_SECTIONS = 8  # failure sections kept per mutant, for its problem statement


@dataclass
class Attempt:
    """The cached outcome of one mutant (independent of the seed: keyed by the mutation)."""

    status: str  # "accepted" or a rejection reason
    fail_to_pass: list[str] = field(default_factory=list)
    pass_to_pass: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    sections: dict[str, str] = field(default_factory=dict)  # F2P node id -> failure section
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)


def test_file(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def related_files(mutation: Mutation, all_files: list[str]) -> list[str]:
    """Test files named after the mutated module (test_foo.py for foo.py), else all of them."""
    parts = Path(mutation.path).with_suffix("").parts
    stem = parts[-2] if parts[-1] == "__init__" and len(parts) > 1 else parts[-1]
    stem = stem.lstrip("_")
    named = [f for f in all_files if stem and stem in Path(f).stem]
    return named or all_files


def _judge(first: RunResult, baseline: dict[str, str], files: list[str]) -> Attempt:
    if first.timed_out:
        return Attempt("timeout", seconds=first.seconds)
    if first.collection_errors:
        return Attempt("collection_error", seconds=first.seconds)
    f2p = sorted(
        t
        for t, s in first.statuses.items()
        if s in ("FAILED", "ERROR") and baseline.get(t) == "PASSED"
    )
    if not f2p:
        return Attempt("no_failing_test", seconds=first.seconds)
    task_files = sorted({test_file(t) for t in f2p})
    p2p = sorted(
        t
        for t, s in first.statuses.items()
        if test_file(t) in task_files
        and t not in f2p
        and s == "PASSED"
        and baseline.get(t) == "PASSED"
    )
    sections = {}
    for t in f2p:
        text = first.failures.get(failure_key(t))
        if text is not None and len(sections) < MAX_SECTIONS:
            sections[t] = text
    return Attempt("accepted", f2p, p2p, task_files, sections, first.seconds)


def try_mutant(
    mutation: Mutation,
    repo: Path,
    python: Path,
    pythonpath: str,
    baseline: dict[str, str],
    all_files: list[str],
    timeout: float = 60.0,
) -> Attempt:
    """Apply `mutation` in `repo`'s working tree, run the tests twice, restore the file."""
    path = repo / mutation.path
    original = path.read_bytes()
    try:
        path.write_bytes(mutation.apply(original))
        candidates = related_files(mutation, all_files)
        first = run_pytest(python, repo, pythonpath, candidates, timeout)
        attempt = _judge(first, baseline, candidates)
        if attempt.status != "accepted":
            return attempt
        second = run_pytest(python, repo, pythonpath, attempt.files, timeout, "random")
        seen = {t: s for t, s in first.statuses.items() if test_file(t) in attempt.files}
        if second.timed_out or second.statuses != seen:
            return Attempt("flaky", seconds=first.seconds + second.seconds)
        attempt.seconds += second.seconds
        return attempt
    finally:
        path.write_bytes(original)
