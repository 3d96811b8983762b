"""Reproduction tests in real containers, on the toy dataset's `add` task (deepswe.data.toy)
given an issue in swe-mini's style: written, kept or rejected at the base commit, then run
against candidates."""

from __future__ import annotations

import pytest

from deepswe.data.task import Task
from deepswe.data.toy import make_toy_tasks
from deepswe.env.sandbox import SandboxLimits
from deepswe.verify.eb import (
    IssueTestStatus,
    SandboxPlan,
    ScriptedStandinWriter,
    Written,
    generate_tests,
    score_reproduction,
)
from deepswe.verify.store import VerdictStore
from deepswe.verify.types import Candidate, VerdictStatus

pytestmark = pytest.mark.docker

PLAN = SandboxPlan(limits=SandboxLimits(memory="1g", pids=256), workers=2)
ISSUE = (
    "### `add(2, 3)` returns `{actual}` instead of `5`\n\nEvaluating\n\n```python\nadd(2, 3)\n```"
    "\n\ngives `{actual}`, but I expected it to be `5`.\n\nReproduction:\n\n```python\n"
    "from toycalc.ops import add\n\nprint(repr(add(2, 3)))\n```\n"
)
GOOD = "from toycalc.ops import add\nprint('Issue reproduced' if add(2, 3) != 5 else 'Issue resolved')\n"
NOISY = "from toycalc.ops import add\nprint('Issue reproduced' if add(2, 3) != 5 else 'Issue resolved?? not')\n"


class TwoTestWriter:
    """A writer standing in for an agent: a proper test, then one whose 'fixed' output only
    contains the word resolved (the reference counted that substring)."""

    name = "fixed-two"

    def write(self, task, image, plan, index) -> Written:
        return Written([GOOD, NOISY][index], f"fixed test {index}")


@pytest.fixture(scope="module")
def tasks(tmp_path_factory) -> dict[str, Task]:
    (toy,) = make_toy_tasks(tmp_path_factory.mktemp("toy"), n=1)

    def variant(name: str, statement: str) -> Task:
        return toy.model_copy(update={"instance_id": f"toy-{name}", "problem_statement": statement})

    return {
        t.instance_id: t
        for t in [
            variant("snippet", ISSUE.replace("{actual}", "-1")),
            variant("wrong-claim", ISSUE.replace("{actual}", "7")),  # not what the bug prints
            variant("prose", "`add` gives the wrong answer for 2 and 3."),
            variant("agent", ISSUE.replace("{actual}", "-1")),
        ]
    }


def test_scripted_standin_keeps_only_tests_that_reproduce_at_base(tasks, tmp_path):
    store = VerdictStore(tmp_path)
    chosen = [tasks[i] for i in ("toy-snippet", "toy-wrong-claim", "toy-prose")]
    got = generate_tests(chosen, store, ScriptedStandinWriter(), n=3, plan=PLAN, log=print)
    (kept,) = got["toy-snippet"]  # deterministic: three asked, one written
    assert kept.status is IssueTestStatus.KEPT and kept.writer == "scripted-standin"
    assert kept.source.startswith("# STAND-IN") and "Issue reproduced" in kept.base_output
    (wrong,) = got["toy-wrong-claim"]
    assert wrong.status is IssueTestStatus.REJECTED and "does not print" in wrong.reason
    (prose,) = got["toy-prose"]
    assert prose.status is IssueTestStatus.NOT_APPLICABLE and "no ```python" in prose.reason
    assert (tmp_path / "eb" / "testgen" / "toy-wrong-claim.json").is_file()  # rejected kept too


def test_reproduction_scores_whole_lines_only_and_gold_beats_empty(tasks, tmp_path):
    store = VerdictStore(tmp_path)
    generate_tests([tasks["toy-snippet"]], store, ScriptedStandinWriter(), plan=PLAN)
    two = generate_tests([tasks["toy-agent"]], store, TwoTestWriter(), n=2, plan=PLAN)
    assert [t.status for t in two["toy-agent"]] == [IssueTestStatus.KEPT] * 2
    gold = tasks["toy-snippet"].gold_patch or ""
    pools = {
        i: [Candidate(instance_id=i, run=k, patch=p) for k, p in enumerate([gold, "", gold])]
        for i in ("toy-snippet", "toy-agent")
    }
    logs: list[str] = []
    got = score_reproduction(pools, tasks, store, plan=PLAN, log=logs.append)
    assert all(v.status is VerdictStatus.SCORED for v in got.values())
    assert [got[("toy-snippet", k)].score for k in range(3)] == [1.0, 0.0, 1.0]
    # the noisy test prints "Issue resolved?? not" for gold: it does not count
    assert got[("toy-agent", 0)].extra["per_test"] == [1, 0]
    assert [got[("toy-agent", k)].score for k in range(3)] == [1.0, 0.0, 1.0]
    assert sum("reproduction runs" in line for line in logs) == 4  # gold and empty, per task
    pools["toy-prose"] = [Candidate(instance_id="toy-prose", run=0, patch=gold)]
    generate_tests([tasks["toy-prose"]], store, ScriptedStandinWriter(), plan=PLAN)
    v = score_reproduction(pools, tasks, store, plan=PLAN)[("toy-prose", 0)]
    assert v.status is VerdictStatus.NOT_APPLICABLE and "no kept reproduction test" in v.detail
