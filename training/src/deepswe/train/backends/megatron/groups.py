"""Megatron's process groups as the backend uses them: TP and DP ranks, the row split of a batch
over DP ranks, and the gradient sum over a group (flat fp32 buckets)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
import torch.distributed as dist


def tp_info() -> tuple[int, int, Any]:
    """(rank, size, group) of tensor parallelism."""
    from megatron.core import parallel_state as ps

    return (
        ps.get_tensor_model_parallel_rank(),
        ps.get_tensor_model_parallel_world_size(),
        ps.get_tensor_model_parallel_group(),
    )


def dp_info() -> tuple[int, int, Any]:
    """(rank, size, group) of data parallelism: the ranks that hold the same TP shard. CP is 1
    (model.validate); with CP > 1 gradients would be summed over DP x CP instead."""
    from megatron.core import parallel_state as ps

    return (
        ps.get_data_parallel_rank(),
        ps.get_data_parallel_world_size(),
        ps.get_data_parallel_group(),
    )


def dp_share(n: int, rank: int, size: int) -> slice:
    """The rows of an n-row batch that DP rank `rank` of `size` trains on: contiguous chunks
    whose lengths differ by at most one, in rank order; empty when n < size for some ranks."""
    return slice(n * rank // size, n * (rank + 1) // size)


# Gradients are summed in flat float32 buckets of at most this many elements: one collective per
# bucket rather than per parameter, in float32 so that bf16 gradients lose no bits to the sum.
_BUCKET_NUMEL = 1 << 26


def sum_grads_over(
    grads: list[torch.Tensor | None], params: list[torch.nn.Parameter], group: Any
) -> list[torch.Tensor | None]:
    """All-reduce (SUM) every gradient over `group`, in place; returns the list with zeros where
    this rank had none but another rank had one.

    A rank whose share of rows was empty ran no backward and has no gradients: it joins with
    zeros (float32, shaped as the parameter). A parameter with no gradient on any rank keeps
    none, as in a single process."""
    device = params[0].device if params else torch.device("cpu")  # NCCL: CUDA tensors only
    has = torch.tensor([g is not None for g in grads], dtype=torch.float32, device=device)
    dist.all_reduce(has, op=dist.ReduceOp.MAX, group=group)
    out = [
        g if g is not None or not h else torch.zeros_like(p, dtype=torch.float32)
        for g, p, h in zip(grads, params, has.tolist(), strict=True)
    ]
    for bucket in _buckets([g for g in out if g is not None]):
        flat = torch.cat([g.reshape(-1).float() for g in bucket])
        dist.all_reduce(flat, group=group)
        for g, s in zip(bucket, flat.split([g.numel() for g in bucket]), strict=True):
            g.copy_(s.view_as(g))
    return out


def _buckets(tensors: list[torch.Tensor]) -> Iterator[list[torch.Tensor]]:
    """Consecutive runs of `tensors` of at most _BUCKET_NUMEL elements (a larger one alone)."""
    bucket: list[torch.Tensor] = []
    for p in tensors:
        if bucket and sum(q.numel() for q in bucket) + p.numel() > _BUCKET_NUMEL:
            yield bucket
            bucket = []
        bucket.append(p)
    if bucket:
        yield bucket
