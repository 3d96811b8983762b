"""One token sequence per trajectory, and the padded batch the trainer learns from.

A trajectory is trained on as ONE sequence: the prompt, then each assistant turn as the token ids
the engine actually sampled (loss mask 1, with the engine's log-probs), then each observation turn
rendered by the policy's chat template (loss mask 0), and so on. Assistant turns are never decoded
and re-tokenised: text -> tokens is not an inverse of tokens -> text (the reference, rLLM,
re-tokenised the chat, so the trained tokens drifted from the sampled ones). The engine's policy
adapter (`engines.policy.EnginePolicy`) builds the model's context with the same function, so the
tokens trained on are exactly the tokens the model saw and produced.

Chat templates must be prefix-stable (rendering more turns only appends text), as ChatML is.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from deepswe.env.trajectory import Trajectory

_ENCODE_LOCK = threading.Lock()


@dataclass
class TokenSequence:
    """A trajectory's tokens: ids, loss mask (1 on sampled tokens) and the sampler's log-probs
    (0.0 where the mask is 0). All three have the same length."""

    ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)

    def add(self, ids: Sequence[int], sampled: bool, logprobs: Sequence[float] | None = None):
        if sampled and (logprobs is None or len(logprobs) != len(ids)):
            raise ValueError(f"{len(ids)} sampled ids need as many log-probs, got {logprobs!r:.60}")
        self.ids.extend(ids)
        self.loss_mask.extend([int(sampled)] * len(ids))
        self.logprobs.extend(logprobs if sampled else [0.0] * len(ids))  # type: ignore[arg-type]

    def spans(self) -> list[tuple[int, int]]:
        """[start, end) of each run of loss-mask 1: one per assistant turn."""
        out, start = [], None
        for i, m in enumerate([*self.loss_mask, 0]):
            if m and start is None:
                start = i
            elif not m and start is not None:
                out.append((start, i))
                start = None
        return out


class ChatRenderer:
    """Renders chats into token ids with a tokenizer's chat template, turn by turn."""

    def __init__(self, tokenizer: Any) -> None:
        self.tok = tokenizer
        self.eos_id = tokenizer.eos_token_id
        self.eos_text = tokenizer.eos_token or ""

    def text(self, messages: list[dict[str, str]], generation_prompt: bool) -> str:
        return self.tok.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=generation_prompt
        )

    def encode(self, text: str) -> list[int]:
        # A fast tokenizer resets its truncation/padding state on every call, which raises
        # "Already borrowed" when episode threads share it: encode one at a time.
        with _ENCODE_LOCK:
            return list(self.tok(text, add_special_tokens=False)["input_ids"])

    def decode(self, ids: Sequence[int]) -> str:
        """The reply text of sampled ids (a final end-of-turn token is not part of it)."""
        ids = list(ids)
        if ids and ids[-1] == self.eos_id:
            ids = ids[:-1]
        return self.tok.decode(ids, skip_special_tokens=False)

    def gap(self, messages: list[dict[str, str]], k: int, end: int, ended_eos: bool) -> str:
        """Template text between assistant message k's content and the next generation.

        That is the rest of turn k (e.g. `<|im_end|>\\n`, minus the end token when the model
        sampled it) and messages k+1..end-1 with the assistant header of the next turn.
        """
        before = self.text(messages[:k], True)
        upto = self.text(messages[: k + 1], False)
        content = messages[k]["content"]
        if not upto.startswith(before + content):
            raise ValueError(
                "chat template is not prefix-stable around an assistant turn (it rewrites "
                "earlier turns, e.g. strips <think>): one token sequence per trajectory needs "
                "a template that renders each turn as written"
            )
        closing = upto[len(before + content) :]
        if ended_eos and closing.startswith(self.eos_text):
            closing = closing[len(self.eos_text) :]
        rest = self.text(messages[:end], True)
        if not rest.startswith(upto):
            raise ValueError("chat template is not prefix-stable: later turns change earlier text")
        return closing + rest[len(upto) :]


def build_sequence(
    renderer: ChatRenderer,
    messages: list[dict[str, str]],
    samples: Sequence[tuple[Sequence[int], Sequence[float]]],
    generation_prompt: bool,
) -> TokenSequence:
    """The token sequence of `messages`, whose i-th assistant message is `samples[i]`
    (sampled ids, their log-probs). With `generation_prompt`, ends ready for the next reply."""
    turns = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    if len(turns) != len(samples):
        raise ValueError(f"{len(turns)} assistant messages but {len(samples)} sampled replies")
    seq = TokenSequence()
    first = turns[0] if turns else len(messages)
    seq.add(
        renderer.encode(renderer.text(messages[:first], bool(turns) or generation_prompt)), False
    )
    for j, k in enumerate(turns):
        ids, lps = samples[j]
        seq.add(list(ids), True, list(lps))
        end = turns[j + 1] if j + 1 < len(turns) else len(messages)
        if end == k + 1 and not (j + 1 == len(turns) and generation_prompt):
            continue  # nothing follows this turn (the episode ended on it)
        ended_eos = bool(ids) and ids[-1] == renderer.eos_id
        seq.add(renderer.encode(renderer.gap(messages, k, end, ended_eos)), False)
    return seq


def trajectory_sequence(traj: Trajectory, renderer: ChatRenderer) -> TokenSequence:
    """The training sequence of a finished trajectory (needs each step's token ids/log-probs)."""
    samples = []
    for step in traj.steps:
        if step.token_ids is None or step.logprobs is None:
            raise ValueError(
                f"{traj.instance_id}: step {step.index} has no sampled token ids/log-probs; "
                "train only on trajectories from an engine that reports them"
            )
        samples.append((step.token_ids, step.logprobs))
    if not traj.messages:  # infra_error before the first prompt: an empty row (dropped later)
        return TokenSequence()
    return build_sequence(renderer, traj.messages, samples, generation_prompt=False)


@dataclass
class RolloutBatch:
    """B trajectories, right-padded to T tokens.

    input_ids [B, T] int64; attention_mask [B, T] (1 on real tokens); loss_mask [B, T] (1 on
    sampled assistant tokens); old_logprobs [B, T] float32 (log pi_old of input_ids[:, t] given
    the tokens before it; 0 where loss_mask is 0); rewards [B]; group_ids [B] int64 (rows of one
    task share an id); endings: B Ending values (str).
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    loss_mask: torch.Tensor
    old_logprobs: torch.Tensor
    rewards: torch.Tensor
    group_ids: torch.Tensor
    endings: list[str]

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    def select(self, rows: torch.Tensor | slice) -> RolloutBatch:
        """The sub-batch of `rows` (a bool mask [B] or a slice)."""
        idx = rows if isinstance(rows, slice) else rows.nonzero().flatten().tolist()
        ends = self.endings[idx] if isinstance(idx, slice) else [self.endings[i] for i in idx]
        pick = (lambda t: t[idx]) if isinstance(idx, slice) else (lambda t: t[torch.tensor(idx)])
        return RolloutBatch(
            pick(self.input_ids),
            pick(self.attention_mask),
            pick(self.loss_mask),
            pick(self.old_logprobs),
            pick(self.rewards),
            pick(self.group_ids),
            ends,
        )


def collate(
    seqs: Sequence[TokenSequence],
    rewards: Sequence[float],
    group_ids: Sequence[int],
    endings: Sequence[str],
    pad_id: int,
) -> RolloutBatch:
    """Right-pad `seqs` into a RolloutBatch (T = longest sequence, at least 1)."""
    b = len(seqs)
    t = max([len(s.ids) for s in seqs] + [1])
    ids = torch.full((b, t), pad_id, dtype=torch.long)
    attn = torch.zeros((b, t), dtype=torch.long)
    mask = torch.zeros((b, t), dtype=torch.long)
    old = torch.zeros((b, t), dtype=torch.float32)
    for i, s in enumerate(seqs):
        n = len(s.ids)
        ids[i, :n] = torch.tensor(s.ids, dtype=torch.long)
        attn[i, :n] = 1
        mask[i, :n] = torch.tensor(s.loss_mask, dtype=torch.long)
        old[i, :n] = torch.tensor(s.logprobs, dtype=torch.float32)
    return RolloutBatch(
        ids,
        attn,
        mask,
        old,
        torch.tensor(list(rewards), dtype=torch.float32),
        torch.tensor(list(group_ids), dtype=torch.long),
        list(endings),
    )
