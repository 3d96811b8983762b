"""R2E-Gym's verifier input (ef.r2e_input, ef.r2e_patch) against what R2E-Gym's own
traj2verifier_data wrote (fixtures/r2e_verifier_input/README.md): the five fixture trajectories at
four settings and eight quirk records, character for character; our candidates in that format;
the `render` verb; the judge asked in the format it was trained on."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from deepswe.env.trajectory import Ending, Step, Trajectory
from deepswe.verify.cli import app
from deepswe.verify.ef.answer import Judgement
from deepswe.verify.ef.r2e import r2e_trajectory
from deepswe.verify.ef.r2e_input import (
    NO_CALL,
    SYSTEM_PROMPT,
    agent_step,
    from_record,
    from_trajectory,
    limit_for,
    render_r2e,
)
from deepswe.verify.ef.r2e_patch import DiffFormatError, parse_sections, verifier_patch
from deepswe.verify.ef.render import SYSTEM_PROMPT as OUR_SYSTEM_PROMPT
from deepswe.verify.ef.render import RenderStatus, judge_target
from deepswe.verify.ef.score import judge_candidate, score_candidates
from deepswe.verify.ef.tokens import ChatTokens
from deepswe.verify.store import VerdictStore
from deepswe.verify.types import Candidate, VerdictStatus

tokenizer_mod = pytest.importorskip("deepswe.train.tokenizer", reason="needs deepswe-train")
REF = Path(__file__).resolve().parent / "fixtures" / "r2e_verifier_input"
FIXTURES = Path(os.environ["DEEPSWE_R2E_FIXTURES"])
QUIRKS = json.loads((REF / "quirks" / "records.json").read_text(encoding="utf-8"))
# thoughts condensed per fixture (aiohttp_0813710e, aiohttp_216e0828, orange3_2d9617bd,
# orange3_56706b60, pillow_0836e388) in R2E-Gym's own outputs: read off them, not chosen
CONDENSED = {
    "as-recorded-65536": [0, 0, 0, 0, 0],
    "as-recorded-20000": [12, 0, 8, 2, 10],
    "as-recorded-8192": [31, 3, 31, 11, 31],  # 31/31, 31/31, 11/11: all, still over the limit
    "with-ds-65536": [0, 0, 0, 0, 0],
}


@pytest.fixture(scope="module")
def qwen() -> ChatTokens:
    """The Qwen BPE the reference was generated with (the judge's vocabulary)."""
    return ChatTokens(tokenizer_mod.build_qwen_tokenizer())


@pytest.fixture(scope="module")
def qwen_dir(qwen, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("qwen-tokenizer")
    qwen.tokenizer.save_pretrained(folder)
    return folder


def fixture_files() -> list[Path]:
    files = sorted(FIXTURES.glob("trajectory_*.json"))
    if not files:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI needs the R2E-Gym fixtures at {FIXTURES}", pytrace=False)
        pytest.skip(f"no R2E-Gym fixtures at {FIXTURES} (set DEEPSWE_R2E_FIXTURES)")
    return files


def reference(variant: str, name: str) -> dict:
    return json.loads((REF / variant / name).read_text(encoding="utf-8"))


@pytest.mark.parametrize("variant", sorted(CONDENSED))
def test_every_fixture_trajectory_renders_as_r2e_gyms_own_function_wrote_it(variant, qwen):
    condensed = []
    for path in fixture_files():
        record = json.loads(path.read_text(encoding="utf-8"))
        if variant.startswith("with-ds"):  # the dataset row, as R2E-Gym's runner sets it
            record["ds"] = record["env_args"]["ds"]
        ref = reference(variant, path.name)
        inp = from_record(record)
        prompt = render_r2e(inp, qwen.count_text, ref["max_tokens"])
        assert prompt.messages == ref["messages"][:2], f"{variant}/{path.name} differs"
        assert judge_target(inp.resolved) == ref["messages"][2]
        assert prompt.tokens == qwen.count_text(prompt.messages[1]["content"])
        over = prompt.status is RenderStatus.TOO_LONG
        assert over == (prompt.tokens > prompt.budget)
        condensed.append(prompt.condensed)
    assert condensed == CONDENSED[variant]


@pytest.mark.parametrize("case", QUIRKS, ids=[c["name"] for c in QUIRKS])
def test_r2e_gyms_edge_rules_are_reproduced(case, qwen):
    ref = reference("quirks", f"{case['name']}.json")
    inp = from_record(case["record"])
    prompt = render_r2e(inp, qwen.count_text, case["max_tokens"])
    assert prompt.messages == ref["messages"][:2]
    assert judge_target(inp.resolved) == ref["messages"][2]


def test_our_candidates_render_as_r2e_gyms_runner_would_have_recorded_them(qwen):
    """A fixture read as our Trajectory, its replies split again by R2E-Gym's agent rule and its
    patch rebuilt, is what R2E-Gym's function writes for the record with its dataset row."""
    for path in fixture_files():
        record = json.loads(path.read_text(encoding="utf-8"))
        traj = r2e_trajectory(record, path.stem)
        inp = from_trajectory(record["problem_statement"], traj, traj.patch)
        prompt = render_r2e(inp, qwen.count_text, 65536)
        assert prompt.messages == reference("with-ds-65536", path.name)["messages"][:2]


def test_the_grade_never_changes_the_prompt_of_a_candidate(qwen):
    """R2E-Gym's limit subtracts the training target's tokens, YES or NO by the reward; on Qwen's
    tokenizer both count the same, so judging a candidate with NO's limit hides nothing."""
    assert limit_for(65536, True, qwen.count_text) == limit_for(65536, False, qwen.count_text)


def test_a_reply_is_split_as_r2e_gyms_agent_records_it():
    call = "<function=search>\n<parameter=search_term> add </parameter>\n</function>"
    thought, action = agent_step(f"Intro.\n<think>\nplan\n</think>\nmiddle\n{call} tail")
    assert thought == "<think>\nplan\n</think>"  # text outside the think block is not recorded
    assert action == "<function=search>\n  <parameter=search_term>add</parameter>\n</function>"
    assert agent_step("no call, no think") == ("", NO_CALL)
    # a reply that starts inside an open think (the chat template opened it) records no thought
    assert agent_step("plan\n</think>\n" + call)[0] == ""


def test_a_diff_r2e_gyms_parser_refuses_is_shown_as_recorded():
    rename = "diff --git a/a.py b/b.py\nsimilarity index 90%\nrename from a.py\nrename to b.py\n"
    with pytest.raises(DiffFormatError, match="rename"):
        parse_sections(rename)
    odd = "diff --git a/a.py b/a.py\nsimilarity index 90%\n"
    with pytest.raises(DiffFormatError, match="unexpected line"):
        parse_sections(odd)
    assert verifier_patch(odd, []) == odd


def test_render_prints_r2e_gyms_chat_and_ours_for_comparison(qwen_dir):
    path = fixture_files()[1]  # aiohttp_216e0828: 3 thoughts condensed at 8192
    args = ["render", "--recorded", str(path), "--tokenizer", str(qwen_dir)]
    res = CliRunner().invoke(app, [*args, "--format", "r2e-gym", "--max-tokens", "8192"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout) == reference("as-recorded-8192", path.name)["messages"][:2]
    assert "r2e-gym: 3 thoughts condensed" in res.stderr
    ours = CliRunner().invoke(app, [*args, "--format", "ours"])
    assert ours.exit_code == 0, ours.output
    system, user = json.loads(ours.stdout)
    assert system["content"] == OUR_SYSTEM_PROMPT != SYSTEM_PROMPT and "# Issue" in user["content"]


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--recorded", "missing.json"], "missing.json: cannot read"),
        (["--format", "theirs"], "--format must be one of ours, r2e-gym"),
        (["--tokenizer", "no-such-dir"], "--tokenizer no-such-dir: no such folder"),
    ],
)
def test_render_refuses_bad_input_naming_it(args, named, tmp_path):
    record = tmp_path / "t.json"
    record.write_text(json.dumps({"trajectory_steps": []}))
    base = {"--recorded": str(record), "--tokenizer": str(tmp_path), "--format": "r2e-gym"}
    base.update(dict(zip(args[::2], args[1::2], strict=True)))
    res = CliRunner().invoke(app, ["render", *[x for kv in base.items() for x in kv]])
    assert res.exit_code == 2 and named in res.stderr, res.output


class Recording:
    """A Judge double that keeps the chats it was asked with; counts with a real tokenizer."""

    name = "recording"

    def __init__(self, tokens: ChatTokens) -> None:
        self.count_tokens, self.asked = tokens, []

    def judge(self, messages) -> Judgement:
        self.asked.append(messages)
        return Judgement(VerdictStatus.SCORED, 0.5)


def candidate(thought: str = "fix it") -> Candidate:
    call = "<function=finish>\n  <parameter=command>submit</parameter>\n</function>"
    step = Step(index=0, assistant=f"<think>\n{thought}\n</think>\n\n{call}", observation="ok")
    traj = Trajectory(
        instance_id="pkg-1",
        policy="test",
        messages=[],
        steps=[step],
        ending=Ending.SUBMITTED,
        patch="",
    )
    return Candidate(
        instance_id="pkg-1",
        run=0,
        problem_statement="add() subtracts",
        trajectory=traj,
        resolved=True,
    )


def test_the_judge_is_asked_in_the_format_it_was_trained_on(tmp_path, qwen):
    judge = Recording(qwen)
    verdicts = score_candidates(
        [candidate()],
        judge,
        VerdictStore(tmp_path),
        budget=65536,
        fmt="r2e-gym",
        log=lambda _: None,
    )
    (system, user), v = judge.asked[0], verdicts[0]
    assert system == {"role": "system", "content": SYSTEM_PROMPT}
    assert "[ASSISTANT]\n<think>\nfix it\n</think>\n\n<function=finish>" in user["content"]
    assert "Repository Issue:\nadd() subtracts\n" in user["content"]
    assert v.extra["format"] == "r2e-gym" and v.status is VerdictStatus.SCORED
    judge_candidate(candidate(), judge, 10**6)  # the default stays ours
    assert judge.asked[1][0]["content"] == OUR_SYSTEM_PROMPT


def test_r2e_gyms_format_sends_a_prompt_still_over_its_limit_as_r2e_gym_does(qwen):
    judge = Recording(qwen)
    v = judge_candidate(candidate("long " * 3000), judge, 1000, "r2e-gym")
    assert v.extra["render"] == "too_long" and v.status is VerdictStatus.SCORED
    assert len(judge.asked) == 1  # ours would refuse it unasked (test_ef_score)
