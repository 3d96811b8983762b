"""EF scores: the answer read by content from top log-probs, the in-process judge against a
float64 reference, named outcomes, and verdicts paired with their own candidates."""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import pytest

from deepswe.env.policies.fake_endpoint import FakeEndpoint, chat_completion
from deepswe.env.trajectory import Ending, Step, Trajectory
from deepswe.verify.ef.answer import Judgement, TokenLogprob, read_answer
from deepswe.verify.ef.endpoint import EndpointJudge, EndpointJudgeConfig
from deepswe.verify.ef.render import judge_steps, render_prompt
from deepswe.verify.ef.score import judge_candidate, score_candidates
from deepswe.verify.store import VerdictStore
from deepswe.verify.types import Candidate, VerdictStatus

train_models = pytest.importorskip("deepswe.train.models", reason="needs deepswe-train")


def toks(*parts: str | tuple[str, list[tuple[str, float]]]) -> list[TokenLogprob]:
    """Reply tokens; a (text, top) pair gives that token its top alternatives."""
    out = []
    for p in parts:
        text, top = (p, []) if isinstance(p, str) else p
        own = dict(top).get(text, -0.01)
        out.append(TokenLogprob(text, own, tuple(top)))
    return out


def sig(ly: float, ln: float) -> float:
    return math.exp(ly) / (math.exp(ly) + math.exp(ln))


TAIL = ("</", "judgement", ">")


@pytest.mark.parametrize(
    ("tokens", "expected"),
    [
        # one YES token, NO second in the top list
        (toks("<judgement>", ("YES", [("YES", -0.1), ("NO", -2.4)]), *TAIL), sig(-0.1, -2.4)),
        # the tag split into pieces and preceded by thinking: found by content, not position
        (
            toks(
                "<think>",
                "hmm",
                "</think>",
                "\n",
                "<",
                "jud",
                "gement",
                ">",
                ("NO", [("NO", -0.2), ("YES", -1.9), ("MAYBE", -3.0)]),
                *TAIL,
            ),
            sig(-1.9, -0.2),
        ),
        # " YES" and "YES" are both yes; "Yes" too (case ignored)
        (
            toks(
                "<judgement>",
                (" YES", [(" YES", -0.5), ("YES", -1.5), ("Yes", -3.0), (" NO", -2.0)]),
                *TAIL,
            ),
            (math.exp(-0.5) + math.exp(-1.5) + math.exp(-3.0))
            / (math.exp(-0.5) + math.exp(-1.5) + math.exp(-3.0) + math.exp(-2.0)),
        ),
        # the word split by the tokenizer: "Y" + "ES" (the small tokenizer does this)
        (toks("<judgement>", ("Y", [("Y", -0.3), ("N", -1.4)]), "ES", *TAIL), sig(-0.3, -1.4)),
        # the tag's ">" merged into the answer token (Qwen's pre-tokenizer allows ">YES")
        (
            toks("<judgement", (">YES", [(">YES", -0.4), (">NO", -1.1), ("YES", -0.9)]), *TAIL),
            sig(-0.4, -1.1),
        ),
        # a space token before the word is skipped
        (
            toks("<judgement>", " ", ("NO", [("NO", -0.01), ("YES", -4.6)]), *TAIL),
            sig(-4.6, -0.01),
        ),
        # NO absent from the top k: P(NO) is below all of them, the score is 1
        (toks("<judgement>", ("YES", [("YES", -0.01), ("MAYBE", -5.0)]), *TAIL), 1.0),
        # log-probs far below exp's range: no 0/0, the ratio is still right
        (
            toks("<judgement>", ("YES", [("YES", -1000.0), ("NO", -1001.0)]), *TAIL),
            sig(1.0, 0.0),
        ),
    ],
)
def test_the_answer_token_is_found_by_content(tokens, expected):
    j = read_answer(tokens)
    assert j.status is VerdictStatus.SCORED
    assert j.score == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    ("tokens", "why"),
    [
        (toks("I", " think", " it", " works"), "no <judgement>"),
        (toks("<judgement>", "MAYBE", *TAIL), "no YES/NO token"),
        (toks("YES", " <judgement>", "</judgement>"), "no YES/NO token"),  # YES before the tag
        (toks("<judgement>", ("YES", [("MAYBE", -0.5), ("UNSURE", -1.0)]), *TAIL), "neither"),
        (toks("<judgement", (">YES", [("YES", -0.1), ("NO", -1.0)]), *TAIL), "neither"),
    ],
)
def test_replies_without_an_answer_are_no_answer_never_a_score(tokens, why):
    j = read_answer(tokens)
    assert (j.status, j.score) == (VerdictStatus.NO_ANSWER, None)
    assert why in j.detail


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return train_models.build_test_model(tmp_path_factory.mktemp("judge"))


def candidate(run: int, thought: str = "read the code", patch: str = "diff") -> Candidate:
    steps = [Step(index=0, assistant=f"{thought}\n<function=finish>\n</function>")]
    traj = Trajectory(
        instance_id="pkg-1", policy="t", messages=[], steps=steps, ending=Ending.SUBMITTED
    )
    return Candidate(
        instance_id="pkg-1",
        run=run,
        patch=patch,
        problem_statement="add() is wrong",
        trajectory=traj,
    )


def test_in_process_score_equals_a_float64_reference_from_the_same_logits(model_dir):
    import torch

    from deepswe.verify.ef.local import LocalJudge, answer_ids

    judge = LocalJudge(model_dir)
    c = candidate(0)
    prompt = render_prompt(
        c.problem_statement, judge_steps(c.trajectory), c.patch, judge.count_tokens, 10**6
    )
    prefix, yes_id, no_id = answer_ids(judge.count_tokens, prompt.messages)
    tok = judge.count_tokens.tokenizer
    assert (tok.decode([yes_id]), tok.decode([no_id])) == ("Y", "N")  # the small tokenizer splits
    logits = judge.logits(prefix)  # [V]
    z = logits.numpy().astype(np.float64)
    p = np.exp(z - z.max()) / np.exp(z - z.max()).sum()
    reference = p[yes_id] / (p[yes_id] + p[no_id])
    got = judge.judge(prompt.messages)
    assert got.status is VerdictStatus.SCORED
    assert abs(got.score - reference) < 1e-12 and 0.0 < got.score < 1.0
    assert got.extra["p_yes"] == pytest.approx(p[yes_id], rel=1e-12)
    with torch.inference_mode():  # the last-position shortcut equals a full forward pass
        full = judge.model(input_ids=torch.tensor([prefix])).logits[0, -1]
    assert torch.allclose(full, logits, atol=1e-5)


class Scripted:
    """A Judge double: the score is written in the candidate's patch ("score=0.25"), and the
    earlier a candidate's run, the longer its answer takes (they complete in reverse)."""

    name = "scripted"

    def __init__(self, outcome: VerdictStatus = VerdictStatus.SCORED) -> None:
        self.outcome, self.calls = outcome, 0

    def count_tokens(self, messages) -> int:
        return sum(len(m["content"]) for m in messages) // 4

    def judge(self, messages) -> Judgement:
        self.calls += 1
        text = messages[1]["content"]
        value = float(text.split("score=")[1].split("\n")[0])
        time.sleep(0.02 * (10 - round(value * 10)))
        if self.outcome is not VerdictStatus.SCORED:
            return Judgement(self.outcome, detail="scripted")
        return Judgement(VerdictStatus.SCORED, value)


def test_each_score_lands_on_its_own_candidate_under_concurrency(tmp_path):
    """Regression: the reference zipped scores back in completion order (issue 11)."""
    pool = [candidate(k, patch=f"score={k / 10}") for k in range(8)]
    store, lines = VerdictStore(tmp_path), []
    verdicts = score_candidates(pool, Scripted(), store, budget=10**6, workers=8, log=lines.append)
    assert [v.run for v in verdicts] == list(range(8))
    assert all(v.score == pytest.approx(v.run / 10) for v in verdicts)
    stored = store.load("ef")
    assert {k: v.score for k, v in stored.items()} == {("pkg-1", k): k / 10 for k in range(8)}
    assert len(lines) == 9 and "0 already done" in lines[0]
    again = Scripted()
    assert score_candidates(pool, again, store, workers=4, log=lines.append) == []
    assert again.calls == 0  # resumed: nothing asked twice


def test_unreachable_is_asked_again_on_resume_no_answer_is_not(tmp_path):
    store, pool = VerdictStore(tmp_path), [candidate(0, patch="score=0.5")]
    score_candidates(pool, Scripted(VerdictStatus.UNREACHABLE), store, log=lambda _: None)
    assert store.load("ef")[("pkg-1", 0)].status is VerdictStatus.UNREACHABLE
    score_candidates(pool, Scripted(VerdictStatus.NO_ANSWER), store, log=lambda _: None)
    assert store.load("ef")[("pkg-1", 0)].status is VerdictStatus.NO_ANSWER
    judge = Scripted()
    assert score_candidates(pool, judge, store, log=lambda _: None) == [] and judge.calls == 0


def test_a_prompt_that_cannot_fit_is_a_named_error_without_asking_the_judge():
    judge = Scripted()
    v = judge_candidate(candidate(0, patch="score=0.5\n" + "x" * 4000), judge, budget=100)
    assert (v.status, v.score, judge.calls) == (VerdictStatus.ERROR, None, 0)
    assert v.detail.startswith("too_long") and v.extra["render"] == "too_long"


class FakeServer:
    """The endpoint's script: the i-th request gets replies[i] (the last one after that)."""

    replies: list[tuple[int, dict]] = []
    seen: list[dict] = []

    @staticmethod
    def answer(body: dict) -> tuple[int, dict]:
        FakeServer.seen.append(body)
        return FakeServer.replies[min(len(FakeServer.seen), len(FakeServer.replies)) - 1]


def completion(tokens: list[tuple[str, float, list[tuple[str, float]]]]) -> dict:
    content = [
        {
            "token": t,
            "logprob": lp,
            "bytes": None,
            "top_logprobs": [{"token": a, "logprob": b, "bytes": None} for a, b in top],
        }
        for t, lp, top in tokens
    ]
    return chat_completion("".join(t for t, _, _ in tokens), model="judge", logprobs=content)


@pytest.fixture
def server(model_dir):
    FakeServer.seen.clear()
    with FakeEndpoint(FakeServer.answer) as srv:
        yield srv.base_url


def test_the_endpoint_judge_asks_greedy_top_logprobs_and_reads_the_reply(server, model_dir):
    yes, no = math.log(0.8), math.log(0.15)
    FakeServer.replies = [
        (
            200,
            completion(
                [
                    ("<judgement>", -0.01, []),
                    ("YES", yes, [("YES", yes), ("NO", no)]),
                    ("</judgement>", -0.01, []),
                ]
            ),
        )
    ]
    cfg = EndpointJudgeConfig(base_url=server, model="judge", tokenizer=str(model_dir))
    v = judge_candidate(candidate(3), EndpointJudge(cfg), budget=10**6)
    assert (v.status, v.run) == (VerdictStatus.SCORED, 3)
    assert v.score == pytest.approx(0.8 / 0.95, rel=1e-12)
    sent = FakeServer.seen[-1]
    assert (sent["temperature"], sent["logprobs"], sent["top_logprobs"]) == (0.0, True, 20)


def test_an_endpoint_that_keeps_failing_is_unreachable_after_bounded_retries(server, model_dir):
    FakeServer.replies = [(503, {"error": {"message": "overloaded"}})]
    cfg = EndpointJudgeConfig(base_url=server, model="judge", tokenizer=str(model_dir), retries=2)
    t0 = time.monotonic()
    v = judge_candidate(candidate(0), EndpointJudge(cfg), budget=10**6)
    assert (v.status, v.score) == (VerdictStatus.UNREACHABLE, None)
    assert len(FakeServer.seen) == 3 and time.monotonic() - t0 < 30  # 1 try + 2 retries
    assert "after 2 retries" in v.detail
    closed = cfg.model_copy(update={"base_url": "http://127.0.0.1:9/v1", "retries": 0})
    v = judge_candidate(candidate(0), EndpointJudge(closed), budget=10**6)
    assert v.status is VerdictStatus.UNREACHABLE


def test_the_one_judge_factory_takes_a_folder_or_an_endpoint_never_both(model_dir):
    from deepswe.verify.ef.endpoint import EndpointJudge, EndpointJudgeConfig
    from deepswe.verify.ef.local import LocalJudge
    from deepswe.verify.ef.score import make_judge

    config = EndpointJudgeConfig(
        base_url="http://127.0.0.1:9/v1", model="m", tokenizer=str(model_dir)
    )
    assert isinstance(make_judge(endpoint=config), EndpointJudge)
    assert isinstance(make_judge(path=model_dir), LocalJudge)
    for bad in ({}, {"path": "x", "endpoint": config}):
        with pytest.raises(ValueError, match="give one"):
            make_judge(**bad)
