"""Reproduction tests: written per task, kept only if they reproduce the issue at the base commit.

    writer (an agent episode, or the tiny profile's scripted stand-in) -> test_issue.py
    fresh sandbox at the base commit, no patch: `python test_issue.py`
    kept iff a line of its output is exactly "Issue reproduced" and none is "Issue resolved"

Written without the answer, as R2E-Gym's are: a writer is given `writer_view(task)`, the task
with its gold patch, hidden tests (lists, test patch, test files' text, graded files), test
command and metadata (swe-mini's names the mutated file, line and function) taken out, and the
task's image, the repository at the base commit. A test is kept because it fails at the base commit,
never because a fix passes it: nothing here runs the gold patch.

The format is R2E-Gym's (its DeepSWE TTS reproduction notes): a script that prints "Issue
reproduced" on the buggy repository and "Issue resolved" once fixed. Every test written is
stored, kept or rejected, with the reason and the base run's output:

    runs/<ID>/eb/testgen/<instance_id>.json    {"writer", "fingerprint", "tests": [IssueTest]}

A task's file is written once all its tests are checked; an infrastructure failure writes
nothing, so a resume writes that task's tests again. Writers: `ScriptedStandinWriter` here (no
model; named as a stand-in everywhere) and `deepswe.verify.eb.agent_writer.AgentTestWriter`.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from deepswe.data.task import HiddenTests, Task, TestSpec
from deepswe.env.episode import INFRA_EXCEPTIONS
from deepswe.env.sandbox import ExecResult, Sandbox
from deepswe.eval.store import atomic_write_json
from deepswe.verify.eb import scripted_writer
from deepswe.verify.eb.common import (
    WORKDIR,
    Log,
    SandboxPlan,
    ensure_images,
    fresh_sandbox,
    run_pool,
    task_fingerprint,
)
from deepswe.verify.store import VerdictStore

TEST_FILE = "test_issue.py"
REPRODUCED, RESOLVED = "Issue reproduced", "Issue resolved"
TEST_TIMEOUT_S = 120.0


class IssueTestStatus(str, Enum):
    KEPT = "kept"
    REJECTED = "rejected"  # written, but it does not reproduce the issue at the base commit
    NOT_APPLICABLE = "not_applicable"  # the writer had nothing legitimate to write from


class IssueTest(BaseModel):
    """One written reproduction test and what became of it."""

    model_config = ConfigDict(extra="forbid")

    instance_id: str
    index: int = Field(ge=0)
    writer: str
    status: IssueTestStatus
    reason: str
    source: str = ""
    base_output: str = Field("", description="the test's output at the base commit (tail)")
    seconds: float = 0.0


@dataclass(frozen=True)
class Written:
    """What a writer produced: a test's source, or None with the reason (`not_applicable`:
    the issue offers nothing legitimate to write from, as opposed to a writer that failed)."""

    source: str | None
    account: str
    not_applicable: bool = False


class TestWriter(Protocol):
    """Writes the `index`-th reproduction test for a task, given its `writer_view` (no answer
    in it) and its image at the base commit. Infra failures raise."""

    __test__ = False
    name: str

    def write(self, task: Task, image: str, plan: SandboxPlan, index: int) -> Written: ...


class ScriptedStandinWriter:
    """STAND-IN (tiny profile): the issue's own snippet as a test, no model involved
    (`deepswe.verify.eb.scripted_writer`). Deterministic: one test per task however many
    are asked for."""

    name = scripted_writer.NAME

    def write(self, task: Task, image: str, plan: SandboxPlan, index: int) -> Written:
        source, account = scripted_writer.write_standin_test(task.public().problem_statement)
        return Written(source, account, not_applicable=source is None)


def writer_view(task: Task) -> Task:
    """What a test writer is given: `task` without the material that holds or points at the
    answer. It keeps the id, repository, base commit, problem statement and environment, and
    the NAMES of R2E-Gym's hidden test files with their text blanked: an episode on an R2E-Gym
    image removes those files before the agent acts only when it knows the task has them
    (deepswe.env.r2e_layout.uses_r2e_layout)."""
    spec = TestSpec(command="", log_parser=task.test_spec.log_parser)
    hidden = HiddenTests(test_files=dict.fromkeys(task.hidden.test_files, ""))
    return task.model_copy(
        update={"gold_patch": None, "hidden": hidden, "metadata": {}, "test_spec": spec}
    )


def output_lines(text: str) -> set[str]:
    """The lines of a test's output, surrounding whitespace removed: a verdict must be a whole
    line, never a substring ("Issue resolved?? not" is not "Issue resolved")."""
    return {line.strip() for line in text.splitlines()}


def run_issue_test(sandbox: Sandbox, source: str) -> ExecResult:
    """Put the test at /testbed/test_issue.py (over anything a patch left there) and run it
    from /testbed, as its writer ran it."""
    sandbox.write_file(f"{WORKDIR}/{TEST_FILE}", source)
    return sandbox.run(f"python {TEST_FILE} 2>&1", cwd=WORKDIR, timeout=TEST_TIMEOUT_S)


def check_on_base(task: Task, image: str, source: str, plan: SandboxPlan) -> tuple[bool, str, str]:
    """(kept, reason, output tail) of a test run at the base commit in a fresh sandbox."""
    with fresh_sandbox(image, plan) as sandbox:
        r = run_issue_test(sandbox, source)
    lines, tail = output_lines(r.stdout), r.stdout[-2000:]
    if r.timed_out:
        return False, f"timed out after {TEST_TIMEOUT_S:.0f}s at the base commit", tail
    if RESOLVED in lines:
        return False, f"prints {RESOLVED!r} at the base commit", tail
    if REPRODUCED not in lines:
        last = r.stdout.strip().splitlines()[-1:] or ["(no output)"]
        return (
            False,
            f"does not print {REPRODUCED!r} at the base commit (last: {last[0][:200]})",
            tail,
        )
    return True, f"prints {REPRODUCED!r} at the base commit", tail


def _write_and_check(
    task: Task, image: str, writer: TestWriter, n: int, plan: SandboxPlan
) -> list[IssueTest]:
    out: list[IssueTest] = []
    seen: set[str] = set()
    for index in range(n):
        started = time.monotonic()
        written = writer.write(writer_view(task), image, plan, index)
        base = {"instance_id": task.instance_id, "index": index, "writer": writer.name}
        if written.source is None:
            status = (
                IssueTestStatus.NOT_APPLICABLE
                if written.not_applicable
                else IssueTestStatus.REJECTED
            )
            if not any(t.reason == written.account for t in out):  # the same reason once
                out.append(
                    IssueTest(
                        **base,
                        status=status,
                        reason=written.account,
                        seconds=time.monotonic() - started,
                    )
                )
            continue
        if written.source in seen:  # identical tests count once
            continue
        seen.add(written.source)
        kept, reason, tail = check_on_base(task, image, written.source, plan)
        status = IssueTestStatus.KEPT if kept else IssueTestStatus.REJECTED
        out.append(
            IssueTest(
                **base,
                status=status,
                reason=f"{written.account}; {reason}",
                source=written.source,
                base_output=tail,
                seconds=time.monotonic() - started,
            )
        )
    return out


def testgen_dir(store: VerdictStore) -> Path:
    return Path(store.root).parent / "eb" / "testgen"


def load_tests(store: VerdictStore, task: Task) -> list[IssueTest] | None:
    """The stored tests of `task`, or None if none were written (or the task has changed)."""
    p = testgen_dir(store) / f"{task.instance_id}.json"
    if not p.is_file():
        return None
    data = json.loads(p.read_text(encoding="utf-8"))
    if data.get("fingerprint") != task_fingerprint(task):
        return None
    return [IssueTest.model_validate(t) for t in data["tests"]]


def generate_tests(
    tasks: list[Task],
    store: VerdictStore,
    writer: TestWriter,
    *,
    n: int = 1,
    plan: SandboxPlan | None = None,
    log: Log = print,
) -> dict[str, list[IssueTest]]:
    """Up to `n` reproduction tests per task, each checked at the base commit; tasks whose
    tests are already stored are read back. Returns instance_id -> tests (kept and rejected);
    tasks that met an infrastructure failure are absent (run again to retry them)."""
    plan = plan or SandboxPlan()
    out = {t.instance_id: got for t in tasks if (got := load_tests(store, t)) is not None}
    todo = [t for t in tasks if t.instance_id not in out]
    images = ensure_images(todo, log)

    def job(task: Task) -> list[IssueTest] | None:
        image = images[task.instance_id]
        if not isinstance(image, str):
            return None
        try:
            tests = _write_and_check(task, image, writer, n, plan)
        except INFRA_EXCEPTIONS as exc:
            log(f"{task.instance_id}: test writing met an infra failure, retried next time ({exc})")
            return None
        payload = {"writer": writer.name, "fingerprint": task_fingerprint(task)}
        payload["tests"] = [t.model_dump(mode="json") for t in tests]
        atomic_write_json(testgen_dir(store) / f"{task.instance_id}.json", payload)
        return tests

    for task, tests in run_pool(todo, job, plan.workers, log, f"testgen ({writer.name})"):
        if tests is not None:
            out[task.instance_id] = tests
    return out
