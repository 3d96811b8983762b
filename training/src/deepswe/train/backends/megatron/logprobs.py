"""Per-token log-probs and entropies from vocab-sharded logits, without gathering the vocabulary.

Under tensor parallelism each rank holds logits [B, T, V / tp] for its slice of the vocabulary.
log p(y) = z_y - logsumexp(z): the max and the sum of exponentials are all-reduced across the TP
group, and z_y comes from the one rank that holds y. With tp = 1 the reductions are no-ops and the
result equals log_softmax(z).gather(y) (what the hf backend computes) up to float rounding.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from deepswe.train.backends.megatron.groups import tp_info


def _sum_across_tp(x: torch.Tensor) -> torch.Tensor:
    """All-reduce sum in forward, identity in backward: every TP rank holds the same loss, so
    each rank's share of the gradient is its own local term (megatron's convention)."""
    from megatron.core.tensor_parallel import reduce_from_tensor_model_parallel_region

    return reduce_from_tensor_model_parallel_region(x)


def vocab_parallel_logprobs(
    logits: torch.Tensor, input_ids: torch.Tensor, temperature: float, with_entropy: bool = False
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """logits [B, T, V/tp] (this rank's vocab slice), input_ids [B, T] ->
    (logprobs [B, T-1], entropy [B, T-1] or None): position t scores input_ids[:, t + 1].

    Entropy (nats, of the tempered distribution) has no gradient; it is for logging."""
    rank, size, group = tp_info()
    z = logits[:, :-1].float()
    if temperature > 0:
        z = z / temperature
    targets = input_ids[:, 1:]
    with torch.no_grad():
        zmax = z.max(dim=-1).values
        if size > 1:
            dist.all_reduce(zmax, op=dist.ReduceOp.MAX, group=group)
    shifted = z - zmax[..., None]
    sumexp = _sum_across_tp(shifted.exp().sum(dim=-1))
    lse = sumexp.log()  # logsumexp(z) - zmax
    v_local = z.shape[-1]
    start = rank * v_local
    local = targets - start
    inside = (local >= 0) & (local < v_local)
    picked = shifted.gather(-1, local.clamp(0, v_local - 1)[..., None]).squeeze(-1)
    target = _sum_across_tp(picked * inside)
    lp = target - lse
    ent = None
    if with_entropy:
        with torch.no_grad():
            p = (shifted - lse[..., None]).exp()
            pz = (p * shifted).sum(dim=-1)
            if size > 1:
                dist.all_reduce(pz, group=group)
            ent = lse - pz  # H = logsumexp - E_p[z], both relative to zmax
    return lp, ent
