"""Qwen3 weights, HF `Qwen3ForCausalLM` names <-> megatron-core `GPTModel` names, both ways.

Pure tensor bookkeeping (no megatron import), exact: hf -> megatron -> hf is bit-identical.

Layouts (megatron-core 0.16.1, local spec, checked against `SelfAttention.get_query_key_value_tensors`
and `MLP.forward` with gated_linear_unit):
- linear_qkv.weight [(heads + 2 * kv_heads) * head_dim, hidden]: per query group g, the rows of
  the group's heads // kv_heads query heads, then k_g, then v_g. HF keeps q_proj [heads * head_dim],
  k_proj / v_proj [kv_heads * head_dim] apart.
- linear_fc1.weight [2 * intermediate, hidden] = [gate_proj; up_proj]; megatron applies
  silu(first half) * second half, as HF does silu(gate) * up.
- Tensor parallelism: column-parallel weights (qkv, fc1, embedding, output layer) split dim 0,
  row-parallel (linear_proj, fc2) split dim 1, norms are replicated. The qkv rows split by whole
  query groups (contiguous, since the layout is per group); fc1 splits gate and up separately so
  each rank holds [gate_r; up_r] (megatron's own convention for the fused GLU weight).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch

HF_LAYER = "model.layers.{}."
MG_LAYER = "decoder.layers.{}."
# per-layer tensors copied 1:1 (HF suffix, megatron suffix)
_SAME = (
    ("input_layernorm.weight", "input_layernorm.weight"),
    ("post_attention_layernorm.weight", "pre_mlp_layernorm.weight"),
    ("self_attn.q_norm.weight", "self_attention.q_layernorm.weight"),
    ("self_attn.k_norm.weight", "self_attention.k_layernorm.weight"),
    ("self_attn.o_proj.weight", "self_attention.linear_proj.weight"),
    ("mlp.down_proj.weight", "mlp.linear_fc2.weight"),
)


@dataclass(frozen=True)
class Dims:
    """The shapes the mapping needs; `from_hf_config` reads them from a Qwen3Config."""

    num_layers: int
    heads: int
    kv_heads: int
    head_dim: int
    tied: bool

    @classmethod
    def from_hf_config(cls, c) -> Dims:  # c: transformers.Qwen3Config
        head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
        return cls(
            c.num_hidden_layers,
            c.num_attention_heads,
            c.num_key_value_heads,
            head_dim,
            bool(c.tie_word_embeddings),
        )


def fuse_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, d: Dims) -> torch.Tensor:
    """q [heads*hd, h], k/v [kv*hd, h] -> megatron qkv [(heads + 2kv)*hd, h], grouped per kv head."""
    per = d.heads // d.kv_heads
    h = q.shape[-1]
    qg = q.reshape(d.kv_heads, per * d.head_dim, h)
    kg = k.reshape(d.kv_heads, d.head_dim, h)
    vg = v.reshape(d.kv_heads, d.head_dim, h)
    return torch.cat([qg, kg, vg], dim=1).reshape(-1, h)


def split_qkv(qkv: torch.Tensor, d: Dims) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Inverse of fuse_qkv."""
    per = d.heads // d.kv_heads
    h = qkv.shape[-1]
    g = qkv.reshape(d.kv_heads, (per + 2) * d.head_dim, h)
    q, k, v = torch.split(g, [per * d.head_dim, d.head_dim, d.head_dim], dim=1)
    return q.reshape(-1, h), k.reshape(-1, h), v.reshape(-1, h)


def hf_to_megatron(sd: dict[str, torch.Tensor], d: Dims) -> dict[str, torch.Tensor]:
    """A full (unsharded) HF Qwen3ForCausalLM state_dict -> a GPTModel state_dict (TP = PP = 1)."""
    out = {"embedding.word_embeddings.weight": sd["model.embed_tokens.weight"]}
    for i in range(d.num_layers):
        hf, mg = HF_LAYER.format(i), MG_LAYER.format(i)
        for a, b in _SAME:
            out[mg + b] = sd[hf + a]
        out[mg + "self_attention.linear_qkv.weight"] = fuse_qkv(
            sd[hf + "self_attn.q_proj.weight"],
            sd[hf + "self_attn.k_proj.weight"],
            sd[hf + "self_attn.v_proj.weight"],
            d,
        )
        out[mg + "mlp.linear_fc1.weight"] = torch.cat(
            [sd[hf + "mlp.gate_proj.weight"], sd[hf + "mlp.up_proj.weight"]], dim=0
        )
    out["decoder.final_layernorm.weight"] = sd["model.norm.weight"]
    if not d.tied:
        out["output_layer.weight"] = sd["lm_head.weight"]
    return out


def megatron_to_hf(sd: dict[str, torch.Tensor], d: Dims) -> dict[str, torch.Tensor]:
    """Inverse of hf_to_megatron. `lm_head.weight` is always present (the embedding when tied),
    as `Qwen3ForCausalLM.state_dict()` has it, so `load_state_dict(strict=True)` accepts it."""
    emb = sd["embedding.word_embeddings.weight"]
    out = {"model.embed_tokens.weight": emb}
    for i in range(d.num_layers):
        hf, mg = HF_LAYER.format(i), MG_LAYER.format(i)
        for a, b in _SAME:
            out[hf + a] = sd[mg + b]
        q, k, v = split_qkv(sd[mg + "self_attention.linear_qkv.weight"], d)
        out[hf + "self_attn.q_proj.weight"] = q
        out[hf + "self_attn.k_proj.weight"] = k
        out[hf + "self_attn.v_proj.weight"] = v
        gate, up = sd[mg + "mlp.linear_fc1.weight"].chunk(2, dim=0)
        out[hf + "mlp.gate_proj.weight"] = gate
        out[hf + "mlp.up_proj.weight"] = up
    out["model.norm.weight"] = sd["decoder.final_layernorm.weight"]
    out["lm_head.weight"] = emb if d.tied else sd["output_layer.weight"]
    return out


def megatron_tensor_to_hf(name: str, t: torch.Tensor, d: Dims) -> list[tuple[str, torch.Tensor]]:
    """One full (TP-merged) megatron tensor -> its HF tensor(s), for streaming the weights one
    at a time (the fused qkv and fc1 become three and two). The same names and values as
    megatron_to_hf, which builds the whole dict; the tied lm_head is the embedding's name only."""
    if name == "embedding.word_embeddings.weight":
        out = [("model.embed_tokens.weight", t)]
        return [*out, ("lm_head.weight", t)] if d.tied else out
    if name == "output_layer.weight":
        return [("lm_head.weight", t)]
    if name == "decoder.final_layernorm.weight":
        return [("model.norm.weight", t)]
    m = _LAYER_RE.match(name)
    if m is None:
        raise KeyError(f"{name}: not a Qwen3 GPTModel parameter")
    hf, rest = HF_LAYER.format(m.group(1)), name[m.end() :]
    if rest == "self_attention.linear_qkv.weight":
        q, k, v = split_qkv(t, d)
        return [
            (hf + "self_attn.q_proj.weight", q),
            (hf + "self_attn.k_proj.weight", k),
            (hf + "self_attn.v_proj.weight", v),
        ]
    if rest == "mlp.linear_fc1.weight":
        gate, up = t.chunk(2, dim=0)
        return [(hf + "mlp.gate_proj.weight", gate), (hf + "mlp.up_proj.weight", up)]
    for a, b in _SAME:
        if rest == b:
            return [(hf + a, t)]
    raise KeyError(f"{name}: not a Qwen3 GPTModel parameter")


# -- tensor / pipeline parallel sharding of megatron state dicts --------------------------------
_COLUMN = ("linear_qkv.weight", "embedding.word_embeddings.weight", "output_layer.weight")
_ROW = ("linear_proj.weight", "linear_fc2.weight")


def tp_split_dim(name: str) -> int | None:
    """The dimension megatron parameter `name` is split along across TP ranks, None if
    replicated (the fused GLU weight: 0, each half separately)."""
    if name.endswith(_COLUMN) or name.endswith("linear_fc1.weight"):
        return 0
    if name.endswith(_ROW):
        return 1
    return None  # norms: replicated on every TP rank


def is_tp_sharded(name: str) -> bool:
    """Whether megatron parameter `name` is split across TP ranks (else replicated)."""
    return tp_split_dim(name) is not None


def tp_shard(sd: dict[str, torch.Tensor], rank: int, size: int) -> dict[str, torch.Tensor]:
    """Rank `rank`'s slice of a full megatron state dict under tensor parallelism `size`."""
    out = {}
    for name, t in sd.items():
        dim = tp_split_dim(name)
        if dim is None:
            out[name] = t
        elif name.endswith("linear_fc1.weight"):
            gate, up = t.chunk(2, dim=0)
            out[name] = torch.cat([gate.chunk(size)[rank], up.chunk(size)[rank]], dim=0)
        else:
            out[name] = t.chunk(size, dim=dim)[rank]
    return out


def tp_merge(shards: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Inverse of tp_shard: the full state dict from every rank's slice, in rank order."""
    return {name: tp_merge_one(name, [s[name] for s in shards]) for name in shards[0]}


def tp_merge_one(name: str, parts: list[torch.Tensor]) -> torch.Tensor:
    """The full tensor `name` from every TP rank's slice of it, in rank order."""
    dim = tp_split_dim(name)
    if dim is None:
        return parts[0]
    if name.endswith("linear_fc1.weight"):
        halves = [p.chunk(2, dim=0) for p in parts]
        return torch.cat([h[0] for h in halves] + [h[1] for h in halves], dim=0)
    return torch.cat(parts, dim=dim)


_LAYER_RE = re.compile(r"^decoder\.layers\.(\d+)\.")


def pp_stage(
    sd: dict[str, torch.Tensor], rank: int, size: int, num_layers: int
) -> dict[str, torch.Tensor]:
    """Pipeline stage `rank`'s part of a full megatron state dict, layers renumbered from 0
    (megatron numbers layers locally per stage). Layers split evenly; the embedding goes to the
    first stage, final norm and output layer to the last (a tied output layer also keeps a copy
    of the embedding on the last stage, as megatron does)."""
    per = num_layers // size
    lo, hi = rank * per, (rank + 1) * per
    out = {}
    for name, t in sd.items():
        m = _LAYER_RE.match(name)
        if m:
            i = int(m.group(1))
            if lo <= i < hi:
                out[f"decoder.layers.{i - lo}." + name[m.end() :]] = t
        elif name.startswith("embedding."):
            if rank == 0:
                out[name] = t
        elif rank == size - 1:
            out[name] = t
    return out
