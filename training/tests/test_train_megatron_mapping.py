"""HF Qwen3 <-> megatron GPTModel weight mapping: exact round trips, layouts, TP/PP slicing.

Pure tensor code: no process group, no megatron model needed.
"""

from __future__ import annotations

import pytest
import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

from deepswe.train.backends.megatron import mapping
from deepswe.train.backends.megatron.model import ParallelConfig, rope_theta, validate

torch.set_num_threads(1)


def tiny_config(tied: bool = False, **kw) -> Qwen3Config:
    base = dict(
        vocab_size=512,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=256,
        tie_word_embeddings=tied,
    )
    return Qwen3Config(**{**base, **kw})


@pytest.mark.parametrize("tied", [False, True])
def test_hf_to_megatron_to_hf_is_bit_identical(tied):
    torch.manual_seed(0)
    hf = Qwen3ForCausalLM(tiny_config(tied)).state_dict()
    d = mapping.Dims.from_hf_config(tiny_config(tied))
    mg = mapping.hf_to_megatron(hf, d)
    assert ("output_layer.weight" in mg) is not tied
    back = mapping.megatron_to_hf(mg, d)
    assert sorted(back) == sorted(hf)  # lm_head.weight comes back even when tied
    for name, t in hf.items():
        assert torch.equal(back[name], t), name
    # and megatron -> hf -> megatron too
    again = mapping.hf_to_megatron(back, d)
    assert sorted(again) == sorted(mg) and all(torch.equal(again[k], mg[k]) for k in mg)


def test_fused_qkv_is_grouped_per_kv_head():
    """Rows of linear_qkv: [q heads of group 0, k0, v0, q heads of group 1, k1, v1] (megatron's
    get_query_key_value_tensors splits each group's rows as [per*hd, hd, hd])."""
    d = mapping.Dims(num_layers=1, heads=4, kv_heads=2, head_dim=3, tied=False)
    h = 5
    # tag every row with (kind, head): q rows 0..11, k rows 100.., v rows 200..
    q = torch.arange(12.0)[:, None].expand(12, h)
    k = (100 + torch.arange(6.0))[:, None].expand(6, h)
    v = (200 + torch.arange(6.0))[:, None].expand(6, h)
    fused = mapping.fuse_qkv(q, k, v, d)[:, 0].tolist()
    expected = (
        list(range(0, 6))
        + [100, 101, 102]
        + [200, 201, 202]  # group 0: q heads 0-1, k0, v0
        + list(range(6, 12))
        + [103, 104, 105]
        + [203, 204, 205]  # group 1: q heads 2-3, k1, v1
    )
    assert fused == expected
    q2, k2, v2 = mapping.split_qkv(mapping.fuse_qkv(q, k, v, d), d)
    assert torch.equal(q2, q) and torch.equal(k2, k) and torch.equal(v2, v)


def test_fc1_is_gate_then_up():
    torch.manual_seed(1)
    hf = Qwen3ForCausalLM(tiny_config()).state_dict()
    mg = mapping.hf_to_megatron(hf, mapping.Dims.from_hf_config(tiny_config()))
    fc1 = mg["decoder.layers.1.mlp.linear_fc1.weight"]
    assert torch.equal(fc1[:128], hf["model.layers.1.mlp.gate_proj.weight"])
    assert torch.equal(fc1[128:], hf["model.layers.1.mlp.up_proj.weight"])


@pytest.mark.parametrize("tied", [False, True])
def test_one_tensor_at_a_time_gives_the_whole_dict_mapping(tied):
    """megatron_tensor_to_hf (the hybrid workers' streamed sync) yields, over all megatron
    tensors, exactly megatron_to_hf's dict: every HF name once, the tied head included."""
    torch.manual_seed(1)
    d = mapping.Dims.from_hf_config(tiny_config(tied))
    mg = mapping.hf_to_megatron(Qwen3ForCausalLM(tiny_config(tied)).state_dict(), d)
    streamed = [
        pair for name, t in mg.items() for pair in mapping.megatron_tensor_to_hf(name, t, d)
    ]
    whole = mapping.megatron_to_hf(mg, d)
    assert sorted(n for n, _ in streamed) == sorted(whole)
    assert all(torch.equal(t, whole[n]) for n, t in streamed)
    with pytest.raises(KeyError, match="not a Qwen3 GPTModel parameter"):
        mapping.megatron_tensor_to_hf("decoder.layers.0.mystery.weight", torch.zeros(1), d)


def test_tp_shards_merge_back_and_keep_gate_up_pairs():
    torch.manual_seed(2)
    d = mapping.Dims.from_hf_config(tiny_config())
    full = mapping.hf_to_megatron(Qwen3ForCausalLM(tiny_config()).state_dict(), d)
    shards = [mapping.tp_shard(full, r, 2) for r in range(2)]
    merged = mapping.tp_merge(shards)
    assert all(torch.equal(merged[k], full[k]) for k in full)
    s1 = shards[1]
    assert s1["decoder.layers.0.self_attention.linear_qkv.weight"].shape == (64, 64)  # 1 group
    assert s1["decoder.layers.0.self_attention.linear_proj.weight"].shape == (64, 32)
    assert s1["embedding.word_embeddings.weight"].shape == (256, 64)
    fc1 = s1["decoder.layers.0.mlp.linear_fc1.weight"]  # [gate rows 64:128; up rows 64:128]
    gate = full["decoder.layers.0.mlp.linear_fc1.weight"][:128]
    up = full["decoder.layers.0.mlp.linear_fc1.weight"][128:]
    assert torch.equal(fc1, torch.cat([gate[64:], up[64:]]))
    assert torch.equal(s1["decoder.final_layernorm.weight"], full["decoder.final_layernorm.weight"])


def test_pp_stages_renumber_layers_and_split_ends():
    cfg = tiny_config(num_hidden_layers=4)
    d = mapping.Dims.from_hf_config(cfg)
    full = mapping.hf_to_megatron(Qwen3ForCausalLM(cfg).state_dict(), d)
    first, last = (mapping.pp_stage(full, r, 2, 4) for r in range(2))
    assert "embedding.word_embeddings.weight" in first and "output_layer.weight" not in first
    assert "output_layer.weight" in last and "decoder.final_layernorm.weight" in last
    key = "decoder.layers.0.mlp.linear_fc2.weight"
    assert torch.equal(last[key], full["decoder.layers.2.mlp.linear_fc2.weight"])
    assert not any(k.startswith("decoder.layers.2.") for k in last)


def test_config_validation_names_the_field():
    validate(tiny_config(), ParallelConfig(tensor_parallel=2))
    with pytest.raises(
        ValueError, match="num_key_value_heads=2 is not divisible by tensor_parallel=4"
    ):
        validate(tiny_config(), ParallelConfig(tensor_parallel=4))
    with pytest.raises(
        ValueError, match="num_hidden_layers=2 is not divisible by pipeline_parallel=3"
    ):
        validate(tiny_config(), ParallelConfig(pipeline_parallel=3))
    with pytest.raises(ValueError, match="attention_bias"):
        validate(tiny_config(attention_bias=True), ParallelConfig())
    with pytest.raises(ValueError, match="context_parallel"):
        validate(tiny_config(), ParallelConfig(context_parallel=2))
    with pytest.raises(ValueError, match="tensor_paralel"):
        ParallelConfig(tensor_paralel=2)  # unknown keys are rejected, named
    assert (
        rope_theta(tiny_config(rope_parameters={"rope_type": "default", "rope_theta": 123.0}))
        == 123.0
    )
