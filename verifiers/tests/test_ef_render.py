"""The judge's prompt: what it shows, condensation to the judge's token budget, R2E-Gym records."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from deepswe.env.trajectory import Ending, Step, Trajectory
from deepswe.verify.ef.r2e import r2e_trajectory
from deepswe.verify.ef.render import (
    OMITTED,
    QUESTION,
    SYSTEM_PROMPT,
    RenderStatus,
    judge_steps,
    judge_target,
    render_prompt,
)
from deepswe.verify.ef.tokens import ChatTokens

tokenizer_mod = pytest.importorskip("deepswe.train.tokenizer", reason="needs deepswe-train")
FIXTURES = Path(os.environ["DEEPSWE_R2E_FIXTURES"])
CALL = "<function=execute_bash>\n  <parameter=cmd>pytest -q</parameter>\n</function>"


@pytest.fixture(scope="module")
def count() -> ChatTokens:
    return ChatTokens(tokenizer_mod.build_small_tokenizer())


def trajectory(thoughts: list[str]) -> Trajectory:
    steps = [
        Step(index=i, assistant=f"{t}\n{CALL}", observation=f"output {i}")
        for i, t in enumerate(thoughts)
    ]
    return Trajectory(
        instance_id="pkg-1", policy="test", messages=[], steps=steps, ending=Ending.SUBMITTED
    )


def test_the_prompt_shows_issue_every_step_and_patch_then_asks(count):
    traj = trajectory(["look at add()", "fix the sign"])
    p = render_prompt("add() subtracts", judge_steps(traj), "--- a/x.py\n+++ b/x.py", count, 10**6)
    system, user = p.messages
    assert system == {"role": "system", "content": SYSTEM_PROMPT}
    text = user["content"]
    for part in (
        "add() subtracts",
        "look at add()",
        "fix the sign",
        "output 0",
        "output 1",
        "<function=execute_bash>",
        "pytest -q",
        "+++ b/x.py",
    ):
        assert part in text
    assert text.endswith(QUESTION)
    assert (p.status, p.condensed, p.tokens) == (RenderStatus.FITS, 0, count(p.messages))
    assert judge_target(True)["content"] == "<judgement>YES</judgement>"
    assert judge_target(False) == {"role": "assistant", "content": "<judgement>NO</judgement>"}


def test_condensing_replaces_the_longest_thoughts_never_the_first_and_fits(count):
    thoughts = ["plan: " + "read the code " * 60, "short", "long " * 400, "longer " * 600, "ok"]
    steps = judge_steps(trajectory(thoughts))
    full = render_prompt("issue", steps, "patch", count, 10**6).tokens
    budget = full - count([{"role": "user", "content": "longer " * 600}]) + 50
    p = render_prompt("issue", steps, "patch", count, budget)
    text = p.messages[1]["content"]
    assert p.status is RenderStatus.FITS and p.tokens <= budget == p.budget
    assert p.tokens == count(p.messages)
    assert thoughts[0].strip() in text  # the first thought is kept whole
    assert "longer longer" not in text and "long long" in text  # only the longest went
    assert (p.condensed, text.count(OMITTED)) == (1, 1)


def test_when_only_the_first_thought_is_left_the_outcome_is_too_long(count):
    steps = judge_steps(trajectory(["plan " * 500, "a " * 300, "b " * 300]))
    first_alone = render_prompt("issue", judge_steps(trajectory(["plan " * 500])), "", count, 10**6)
    p = render_prompt("issue", steps, "", count, first_alone.tokens // 2)
    assert p.status is RenderStatus.TOO_LONG and p.tokens > p.budget
    assert p.condensed == 2 and ("plan " * 500).strip() in p.messages[1]["content"]


def _fixtures() -> list[Path]:
    files = sorted(FIXTURES.glob("trajectory_*.json"))
    if not files:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI needs the R2E-Gym fixtures at {FIXTURES}", pytrace=False)
        pytest.skip(f"no R2E-Gym fixtures at {FIXTURES} (set DEEPSWE_R2E_FIXTURES)")
    return files


def test_r2e_gym_recorded_trajectories_render_for_the_judge():
    """Five real DeepSWE-style runs (24k-30k Qwen tokens rendered whole): at 16k tokens each
    fits by condensing thoughts; at 6k, thoughts alone cannot make room: TOO_LONG."""
    files = _fixtures()
    count = ChatTokens(tokenizer_mod.build_qwen_tokenizer())  # the judge's (Qwen3) tokenizer
    for path in files:
        record = json.loads(path.read_text())
        traj = r2e_trajectory(record, path.stem.removeprefix("trajectory_"))
        raw = record["trajectory_steps"]
        assert len(traj.steps) == len(raw) and traj.patch == record["output_patch"]
        assert all(s.action is not None for s in traj.steps)  # every recorded step made a call
        assert {s.action.name for s in traj.steps} <= {
            "file_editor",
            "execute_bash",
            "search",
            "finish",
        }
        steps = judge_steps(traj)
        whole = render_prompt(record["problem_statement"], steps, traj.patch, count, 10**6)
        p = render_prompt(record["problem_statement"], steps, traj.patch, count, 16000)
        text = p.messages[1]["content"]
        assert record["problem_statement"].strip()[:200] in text
        assert raw[0]["thought"].strip()[:200] in text  # first thought always kept
        assert raw[-1]["observation"].strip()[:100] in text and record["output_patch"][:80] in text
        assert p.status is RenderStatus.FITS and p.tokens <= 16000
        assert (p.condensed > 0) == (whole.tokens > 16000)
        tight = render_prompt(record["problem_statement"], steps, traj.patch, count, 6000)
        assert tight.status is RenderStatus.TOO_LONG and tight.tokens > 6000
