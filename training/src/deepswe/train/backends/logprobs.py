"""Per-token log-probs (and entropies) of a causal LM without materialising [B, T, V] at once.

The decoder runs once; the output projection, log-softmax and gather run over chunks of positions,
each under activation checkpointing, so peak memory holds one chunk's logits (a 32k-token
trajectory with Qwen's 152k vocabulary is ~20 GB of float32 logits otherwise).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.checkpoint import checkpoint

from deepswe.train.algos import entropy_from_logits


def _chunk_logprobs(
    head: Any, hidden: torch.Tensor, targets: torch.Tensor, temperature: float
) -> torch.Tensor:
    logits = head(hidden).float()
    if temperature > 0:
        logits = logits / temperature
    return torch.log_softmax(logits, dim=-1).gather(-1, targets[..., None]).squeeze(-1)


def token_logprobs(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    temperature: float = 1.0,
    chunk: int = 1024,
    with_entropy: bool = False,
    positions: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(logprobs [B, T], entropy [B, T] or None) of input_ids [B, T] (right-padded).

    logprobs[:, t] = log softmax(logits[:, t - 1] / temperature)[input_ids[:, t]]; column 0 and
    padded positions are 0. Entropy (nats, of the same tempered distribution) is computed
    without gradient, for logging only.

    positions: bool [B, T] or None (all). Only these positions get the output projection and
    the softmax; the others are 0. The trainer passes the loss mask: an agent trajectory is
    mostly prompt and tool output, and the vocabulary-wide softmax at each of those positions
    is most of the cost of a small model's forward/backward (bench/train_step.py).
    """
    hidden = model.base_model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    head = model.get_output_embeddings()
    b, t = input_ids.shape
    real = attention_mask.bool()
    want = real if positions is None else real & positions.bool()
    want = torch.cat([torch.zeros_like(want[:, :1]), want[:, 1:]], dim=1)  # never column 0
    sel = want[:, 1:]
    h, targets = hidden[:, :-1][sel], input_ids[:, 1:][sel]  # [N, H], [N]
    parts, ents = [], []
    for s in range(0, h.shape[0], chunk):
        hs, ts = h[s : s + chunk], targets[s : s + chunk]
        if torch.is_grad_enabled():
            lp = checkpoint(_chunk_logprobs, head, hs, ts, temperature, use_reentrant=False)
        else:
            lp = _chunk_logprobs(head, hs, ts, temperature)
        parts.append(lp)
        if with_entropy:
            with torch.no_grad():
                z = head(hs).float()
                z = z / temperature if temperature > 0 else z
                ents.append(entropy_from_logits(z[None])[0])  # it takes [B, T, V]
    empty = hidden.new_zeros((0,), dtype=torch.float32)
    flat = torch.cat(parts) if parts else empty
    # Scattered into zeros, never multiplied by a mask: on a row that is all padding (an
    # infra_error rollout) some attention kernels return nan, and nan * 0 is nan.
    lp = torch.zeros((b, t), dtype=torch.float32, device=input_ids.device).masked_scatter(
        want, flat.float()
    )
    ent = None
    if with_entropy:
        e = torch.cat(ents) if ents else empty
        ent = torch.zeros((b, t), dtype=torch.float32, device=input_ids.device)
        ent = ent.masked_scatter(want, e.float())
    return lp, ent
