"""Execution-based (EB) verifiers: candidates judged by running tests in fresh sandboxes.

Two verifiers, each scoring candidate pools into a `VerdictStore` (resumable: what
`store.done(verifier)` lists is skipped; UNREACHABLE verdicts are asked again):

    score_regression(pools, tasks, store, plan=, log=)    verifier "regression"
        tests passing at the base commit that still pass with the patch (a count)
    generate_tests(tasks, store, writer, n=, plan=, log=) reproduction tests, kept iff they
        print "Issue reproduced" at the base commit; a writer gets `writer_view(task)` (no gold
        patch, no hidden tests, no test command, no metadata) and the base commit's image
    score_reproduction(pools, tasks, store, plan=, log=)  verifier "reproduction"
        sum over a task's kept tests of 1 when the test prints the line "Issue resolved"

`pools` is instance_id -> candidates (`deepswe.verify.store.candidates_from_run`); `tasks` is
instance_id -> Task with its test command filled in. Writers: `ScriptedStandinWriter` (tiny
profile: the issue's own snippet as a test, no model; a stand-in, named so everywhere) and
`AgentTestWriter(PolicySpec(...))` (the agent loop with a test-writing prompt, any
OpenAI-compatible endpoint), made by name with `make_writer` (eb/writers.py, the one factory). `SandboxPlan` sets the backend, limits and worker count.

Files, beside the verdicts of the same run (`runs/<ID>/`):

    eb/regression/<instance_id>/{base,<patch sha256>}.json          cached test runs
    eb/testgen/<instance_id>.json                                   tests written, kept or not
    eb/reproduction/<instance_id>/<patch sha256>-<test sha>.json    cached test runs

Choices, each explained in its module: a patch that does not apply scores 0 (SCORED, with
`extra.apply_failed`); graded test files and the files of base-passing tests are restored
before regression tests run; the hidden test patch is never applied; only a whole output line
"Issue resolved" counts (R2E-Gym counted any substring "resolved").
"""

from deepswe.verify.eb.agent_writer import AgentTestWriter
from deepswe.verify.eb.common import SandboxPlan
from deepswe.verify.eb.regression import score_regression
from deepswe.verify.eb.reproduction import score_reproduction
from deepswe.verify.eb.testgen import (
    IssueTest,
    IssueTestStatus,
    ScriptedStandinWriter,
    TestWriter,
    Written,
    generate_tests,
    load_tests,
    writer_view,
)
from deepswe.verify.eb.writers import WRITERS, make_writer

__all__ = [
    "AgentTestWriter",
    "IssueTest",
    "IssueTestStatus",
    "SandboxPlan",
    "ScriptedStandinWriter",
    "TestWriter",
    "WRITERS",
    "Written",
    "generate_tests",
    "load_tests",
    "make_writer",
    "score_regression",
    "score_reproduction",
    "writer_view",
]
