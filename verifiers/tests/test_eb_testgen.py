"""Test writing: the scripted stand-in's reading of issues (offline, on swe-mini's 326 shipped
statements), and the agent writer's episode against an OpenAI-compatible HTTP endpoint served
in this process (docker). The server scripts the replies; it proves the loop, the prompt on
the wire, the file taken from the sandbox and the base check, not a model's skill. Writers work
without the answer: a canary put in every answer-bearing field of a task never reaches a
writer, a test it writes or the endpoint (docker)."""

from __future__ import annotations

import json

import pytest

from deepswe.data.loaders import load_jsonl
from deepswe.data.swemini.manifest import TASKS
from deepswe.data.toy import make_toy_tasks
from deepswe.env.agent import prompts
from deepswe.env.policies import PolicySpec, Reply
from deepswe.env.policies.fake_endpoint import FakeEndpoint, chat_completion
from deepswe.env.policies.scripted import FINISH, ScriptedPolicy
from deepswe.env.sandbox import SandboxLimits
from deepswe.verify.eb import (
    AgentTestWriter,
    IssueTestStatus,
    SandboxPlan,
    ScriptedStandinWriter,
    Written,
    generate_tests,
    make_writer,
)
from deepswe.verify.eb.agent_writer import TestgenPolicy
from deepswe.verify.eb.scripted_writer import claim_of, write_standin_test
from deepswe.verify.eb.testgen import writer_view
from deepswe.verify.store import VerdictStore

TEST = "from toycalc.ops import add\nprint('Issue reproduced' if add(2, 3) != 5 else 'Issue resolved')\n"
WRITE = (
    "<function=file_editor>\n<parameter=command>create</parameter>\n"
    f"<parameter=path>/testbed/test_issue.py</parameter>\n<parameter=file_text>{TEST}</parameter>\n"
    "</function>"
)


def test_the_standin_reads_nearly_every_swe_mini_issue_and_nothing_hidden():
    rows = load_jsonl(TASKS)
    written = {r.instance_id: write_standin_test(r.public().problem_statement) for r in rows}
    applicable = [i for i, (src, _) in written.items() if src is not None]
    # 324 of 326 today (the statements are written from a run reproduction); the 2 others name
    # exceptions the stand-in does not know (boltons MissingArgument, parse's re.error)
    assert len(applicable) >= 0.8 * len(rows), len(applicable)
    for row in rows:
        src, why = written[row.instance_id]
        if src is None:
            assert why.startswith("not applicable")
            continue
        compile(src, row.instance_id, "exec")
        assert src.startswith("# STAND-IN")
        for test_id in row.hidden.fail_to_pass:  # a hidden test's name never reaches the test
            name = test_id.split("::")[-1].split("[")[0]
            assert name not in src or name in row.problem_statement, (row.instance_id, name)


def test_one_factory_makes_each_writer_by_its_name():
    """tts.eb.writer and deepswe-verify's --writer both come here (verify.eb.writers)."""
    assert isinstance(make_writer("scripted-standin"), ScriptedStandinWriter)
    spec = PolicySpec(name="openai", base_url="http://h/v1", model="m")
    assert isinstance(make_writer("agent", spec), AgentTestWriter)
    with pytest.raises(ValueError, match="needs a policy with an endpoint"):
        make_writer("agent")
    with pytest.raises(ValueError, match="unknown test writer 'nope'"):
        make_writer("nope")


def test_claims_read_from_issue_phrasing():
    compare = "`f(1)` returns `2`. The expected result is `3`.\n\n```python\nprint(f(1))\n```"
    assert claim_of(compare).__dict__ == {
        "kind": "compare",
        "actual": "2",
        "op": "",
        "expected": "3",
        "exception": "",
        "message": "",
    }
    raises = "Calling `g()` raises:\n\n```\nKeyError: 'x'\n```\n\nIt should not raise."
    assert (claim_of(raises).kind, claim_of(raises).exception) == ("raises", "KeyError")
    assert claim_of("`h()` should raise ValueError for this input").kind == "no_raise"
    assert claim_of("It is slow.") is None
    crash = "### `a.f()` raises NameError\n\nCalling `a.f()` raises:\n\n```\nNameError: name 'x' is not defined\n```"
    assert claim_of(crash).message == "name 'x' is not defined"


def test_the_standin_runs_its_claims_and_rejects_what_no_fix_could_change(tmp_path):
    """A snippet failing for another reason than the issue's (a name it never defines) does
    not reproduce it; one printing a constant is not applicable."""
    import subprocess
    import sys

    def run(statement: str) -> str:
        src, why = write_standin_test(statement)
        assert src is not None, why
        (tmp_path / "t.py").write_text(src)
        return subprocess.run(
            [sys.executable, str(tmp_path / "t.py")], capture_output=True, text=True, check=True
        ).stdout.strip()

    issue = (
        "Calling `f()` raises:\n\n```\nKeyError: 'k'\n```\n\nReproduction:\n\n```python\n{}\n```"
    )
    assert run(issue.format("{}['k']")) == "Issue reproduced"
    assert run(issue.format("a.f()")) == "Other issues"  # NameError, not the KeyError shown
    assert run(issue.format("{}.get('k')")) == "Issue resolved"
    shortened = "`f()` returns `{{'a': 1...9, ...}}`; it should be `1`.\n\n```python\n{}\n```"
    assert (
        run(shortened.format("d = dict(a=1, b=2, c=9, d=4)\nprint(repr(d))")) == "Issue reproduced"
    )
    constant = "`f()` returns `None`; it should be `1`.\n\n```python\nprint(repr(None))\n```"
    assert "does not depend" in write_standin_test(constant)[1]


def test_the_testgen_prompt_replaces_the_fix_prompt_and_keeps_reminders():
    inner = ScriptedPolicy([FINISH])
    seen: list[list[dict]] = []
    inner.reply = lambda messages, timeout: seen.append(messages) or Reply(text=FINISH)
    chat = prompts.build_messages("add is wrong {x}", "eval", max_steps=5)
    TestgenPolicy(inner, "add is wrong {x}").reply(chat, timeout=1)
    user = seen[0][1]["content"]
    assert user.startswith("I have uploaded") and "Do NOT fix the issue" in user
    assert "add is wrong {x}" in user and user.endswith("Steps Remaining: 5")
    assert chat[1]["content"].startswith(prompts.user_prompt("add is wrong {x}", "eval"))


def _writes_then_finishes(body: dict) -> tuple[int, dict]:
    """An agent that writes test_issue.py, then finishes."""
    turn = sum(m["role"] == "assistant" for m in body["messages"])
    return 200, chat_completion([WRITE, FINISH][min(turn, 1)])


CANARY = "CANARY-answer-7f3a"


def with_the_answer_everywhere(task):
    """`task` with a canary in every field that holds or points at the answer."""
    hidden = task.hidden.model_copy(
        update={
            "fail_to_pass": [f"tests/test_ops.py::{CANARY}"],
            "pass_to_pass": [CANARY],
            "test_patch": f"+{CANARY}\n",
            "graded_files": [f"{CANARY}.py"],
            "expected_statuses": {CANARY: "PASSED"},
        }
    )
    spec = task.test_spec.model_copy(update={"command": f"{task.test_spec.command} # {CANARY}"})
    return task.model_copy(
        update={
            "gold_patch": f"{task.gold_patch}\n# {CANARY}\n",
            "hidden": hidden,
            "test_spec": spec,
            "metadata": {"file": CANARY, "line": "3"},
        }
    )


def test_the_writers_view_holds_no_answer(tmp_path):
    (task,) = make_toy_tasks(tmp_path / "src", n=1)
    view = writer_view(with_the_answer_everywhere(task))
    assert CANARY not in view.model_dump_json()
    assert (view.problem_statement, view.base_commit) == (task.problem_statement, task.base_commit)
    r2e = task.model_copy(
        update={"hidden": task.hidden.model_copy(update={"test_files": {"test_1.py": CANARY}})}
    )
    # an R2E-Gym image's hidden files are still known by name, so the episode removes them
    assert writer_view(r2e).hidden.test_files == {"test_1.py": ""}


class LeakyWriter:
    """A writer that would copy whatever it is given into its test: if it were given the gold
    patch or the hidden tests, its test would carry them. It also keeps what it got."""

    name = "leaky"

    def __init__(self) -> None:
        self.got = []

    def write(self, task, image, plan, index) -> Written:
        self.got.append(task)
        test = TEST + "".join(f"# {line}\n" for line in task.model_dump_json().splitlines())
        return Written(test, "leaky: the task it was given, as comments")


@pytest.mark.docker
def test_a_writer_never_reads_the_gold_patch_or_the_hidden_tests(tmp_path):
    """Regression (#25): the stand-in's tests must be written without the answer and kept
    because they fail at the base commit, never because the gold patch passes them."""
    (task,) = make_toy_tasks(tmp_path / "src", n=1)
    leaky = with_the_answer_everywhere(task)
    writer = LeakyWriter()
    plan = SandboxPlan(limits=SandboxLimits(memory="1g", pids=256), workers=1)
    got = generate_tests([leaky], VerdictStore(tmp_path / "run"), writer, plan=plan)
    (test,) = got[task.instance_id]
    assert test.status is IssueTestStatus.KEPT, test.reason  # it fails at base: kept for that
    assert CANARY not in test.source and CANARY not in test.base_output
    (seen,) = writer.got
    assert seen.gold_patch is None and not seen.hidden.fail_to_pass and not seen.metadata
    assert seen.test_spec.command == ""


@pytest.mark.docker
def test_an_agent_episode_writes_a_test_that_is_kept_at_base(tmp_path):
    (task,) = make_toy_tasks(tmp_path / "src", n=1)
    task = with_the_answer_everywhere(task)
    with FakeEndpoint(_writes_then_finishes) as server:
        spec = PolicySpec(name="openai", base_url=server.base_url, model="testgen-m")
        writer = AgentTestWriter(spec, episodes_dir=tmp_path / "episodes")
        plan = SandboxPlan(limits=SandboxLimits(memory="1g", pids=256), workers=1)
        got = generate_tests([task], VerdictStore(tmp_path / "run"), writer, plan=plan)
    seen = [b["messages"][1]["content"] for b in server.requests]
    bodies = server.raw
    (test,) = got[task.instance_id]
    assert test.status is IssueTestStatus.KEPT, test.reason
    assert test.writer == "agent:testgen-m" and test.source.strip() == TEST.strip()
    assert seen and all("Do NOT fix the issue" in p for p in seen)
    assert bodies and not any(CANARY.encode() in b for b in bodies)  # the model never sees it
    episode = json.loads((tmp_path / "episodes" / task.instance_id / "episode-0.json").read_text())
    assert "Do NOT fix the issue" in episode["messages"][1]["content"]
