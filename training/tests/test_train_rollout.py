"""One token sequence per trajectory: sampled ids kept as sampled, masks on assistant tokens only."""

from __future__ import annotations

import pytest
import torch

from deepswe.env.trajectory import Ending, Step, Trajectory
from deepswe.train.engines.hf import HFEngine
from deepswe.train.engines.policy import EnginePolicy
from deepswe.train.models import build_test_model
from deepswe.train.rollout import ChatRenderer, build_sequence, collate, trajectory_sequence

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def engine(tmp_path_factory) -> HFEngine:
    return HFEngine(build_test_model(tmp_path_factory.mktemp("tiny")))


def run_chat(engine: HFEngine, turns: int, seed: int = 3) -> tuple[list[dict], EnginePolicy]:
    """A multi-turn chat driven by the real engine, observations in between, like the loop."""
    policy = EnginePolicy(engine, max_tokens=12, seed=seed)
    msgs = [{"role": "system", "content": "You fix bugs."}, {"role": "user", "content": "Fix x."}]
    for i in range(turns):
        reply = policy.reply(msgs, timeout=10)
        msgs.append({"role": "assistant", "content": reply.text})
        if i + 1 < turns:
            msgs.append({"role": "user", "content": f"observation {i}: exit code 0"})
    return msgs, policy


def test_assistant_spans_are_exactly_the_sampled_tokens(engine):
    msgs, policy = run_chat(engine, turns=3)
    seq = build_sequence(policy.renderer, msgs, policy.samples, generation_prompt=False)
    spans = seq.spans()
    assert len(spans) == 3
    for (a, b), (ids, lps) in zip(spans, policy.samples, strict=True):
        assert seq.ids[a:b] == ids and seq.logprobs[a:b] == lps
    # The mask is 1 on exactly the sampled tokens: their count, nothing else.
    assert sum(seq.loss_mask) == sum(len(ids) for ids, _ in policy.samples)
    assert all(lp == 0.0 for lp, m in zip(seq.logprobs, seq.loss_mask, strict=True) if not m)
    # Outside the spans the sequence is the chat template's text of the other turns.
    text = engine.tokenizer.decode(
        [t for t, m in zip(seq.ids, seq.loss_mask, strict=True) if not m]
    )
    assert text.startswith("<|im_start|>system\nYou fix bugs.<|im_end|>\n<|im_start|>user\nFix x.")
    assert "observation 1: exit code 0<|im_end|>\n<|im_start|>assistant\n" in text


def test_the_model_saw_the_sequence_it_is_trained_on(engine):
    """Each turn's context (what EnginePolicy sent to the engine) is a prefix of the final
    training sequence, up to that turn's sampled tokens."""
    policy = EnginePolicy(engine, max_tokens=10, seed=11)
    msgs = [{"role": "user", "content": "Fix x."}]
    contexts = []
    for i in range(3):
        contexts.append(policy.context(msgs))
        reply = policy.reply(msgs, timeout=10)
        msgs += [{"role": "assistant", "content": reply.text}, {"role": "user", "content": f"o{i}"}]
    seq = build_sequence(policy.renderer, msgs[:-1], policy.samples, generation_prompt=False)
    for ctx, (a, _) in zip(contexts, seq.spans(), strict=True):
        assert seq.ids[:a] == ctx


def test_sampled_ids_are_not_retokenized(engine):
    """Regression (the reference's drift): rLLM decoded each reply and re-tokenised the chat,
    so a reply sampled as tokens that BPE would merge differently was trained on other ids."""
    tok = engine.tokenizer
    merged = tok("the", add_special_tokens=False)["input_ids"]
    split = [tok.convert_tokens_to_ids(c) for c in "the"]
    assert merged != split  # BPE merges "the"; the engine may still sample it letter by letter
    sampled = [*split, tok.eos_token_id]
    traj = Trajectory(
        instance_id="t",
        policy="p",
        ending=Ending.SUBMITTED,
        messages=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "the"}],
        steps=[Step(index=0, assistant="the", token_ids=sampled, logprobs=[-1.0] * 4)],
    )
    seq = trajectory_sequence(traj, ChatRenderer(tok))
    ((a, b),) = seq.spans()
    assert seq.ids[a:b] == sampled
    assert seq.ids[b:] == []  # the episode ended on this turn: nothing after it


def test_end_of_turn_token_appears_once_whether_sampled_or_cut(engine):
    r = ChatRenderer(engine.tokenizer)
    eos = engine.tokenizer.eos_token_id
    hi = r.encode("hi")
    msgs = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "hi"},
        {"role": "user", "content": "obs"},
    ]
    stopped = build_sequence(r, msgs, [([*hi, eos], [-0.5] * (len(hi) + 1))], True)
    cut = build_sequence(r, msgs, [(hi, [-0.5] * len(hi))], True)  # hit max_tokens
    full = r.encode(r.text(msgs, True))
    assert stopped.ids == full and cut.ids == full
    assert cut.loss_mask.count(1) == len(hi) and stopped.loss_mask.count(1) == len(hi) + 1


def test_a_template_that_rewrites_history_is_refused(engine):
    class StripsThinking(ChatRenderer):  # like Qwen3's own template: drops earlier <think>
        def text(self, messages, generation_prompt):
            msgs = [
                {**m, "content": m["content"].split("</think>")[-1]}
                if m["role"] == "assistant"
                else m
                for m in messages
            ]
            return super().text(msgs, generation_prompt)

    r = StripsThinking(engine.tokenizer)
    ids = r.encode("<think>x</think>ok")
    msgs = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "<think>x</think>ok"},
        {"role": "user", "content": "obs"},
    ]
    with pytest.raises(ValueError, match="prefix-stable"):
        build_sequence(r, msgs, [(ids, [0.0] * len(ids))], True)


def test_collate_pads_right_and_keeps_masks(engine):
    msgs, policy = run_chat(engine, turns=2)
    long = build_sequence(policy.renderer, msgs, policy.samples, False)
    short = build_sequence(policy.renderer, msgs[:3], policy.samples[:1], False)
    batch = collate([short, long], [1.0, 0.0], [7, 7], ["submitted", "max_steps"], pad_id=0)
    b, t = batch.input_ids.shape
    assert (b, t) == (2, len(long.ids))
    assert batch.attention_mask.sum(1).tolist() == [len(short.ids), len(long.ids)]
    assert batch.loss_mask[0].tolist() == short.loss_mask + [0] * (t - len(short.ids))
    assert torch.equal(batch.old_logprobs[1], torch.tensor(long.logprobs))
    sub = batch.select(torch.tensor([False, True]))
    assert sub.endings == ["max_steps"] and torch.equal(sub.input_ids[0], batch.input_ids[1])


def test_a_step_without_sampled_ids_is_refused(engine):
    traj = Trajectory(
        instance_id="t",
        policy="openai",
        ending=Ending.SUBMITTED,
        messages=[{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}],
        steps=[Step(index=0, assistant="a")],
    )
    with pytest.raises(ValueError, match="no sampled token ids"):
        trajectory_sequence(traj, ChatRenderer(engine.tokenizer))
