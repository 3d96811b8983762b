"""A megatron-core GPTModel with Qwen3's architecture, built from a transformers Qwen3Config.

Qwen3 in megatron terms: RMSNorm everywhere, QK-layernorm (RMSNorm over head_dim, `qk_layernorm`),
GQA (`num_query_groups` = kv heads), explicit `kv_channels` = head_dim (Qwen3 decouples it from
hidden / heads), SwiGLU MLP (`gated_linear_unit` + silu), no linear biases, RoPE with
`rotary_base` = rope_theta over the full head_dim, optionally tied embeddings. Local spec only
(no transformer-engine), so the same model runs on CPU.
"""

from __future__ import annotations

from typing import Any, Literal

import torch
import torch.nn.functional as F
from pydantic import BaseModel, ConfigDict, Field

from deepswe.train.backends.megatron import shim


class ParallelConfig(BaseModel):
    """How the model is split across ranks (product = model-parallel size; the rest is DP)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tensor_parallel: int = Field(1, ge=1, description="TP: heads, MLP and vocab split across ranks")
    pipeline_parallel: int = Field(1, ge=1, description="PP: layers split into stages")
    context_parallel: int = Field(1, ge=1, description="CP: the sequence split across ranks")
    seed: int = Field(0, description="seed of megatron's RNG streams (dropout)")


class MegatronOptions(BaseModel):
    """How the megatron backend trains beyond the split: optimizer sharding, recomputation."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    distributed_optimizer: bool = Field(
        False,
        description="shard fp32 main weights and AdamW moments over DP ranks (ZeRO-1, "
        "optimizer.py); the reference's verl FSDP shards them too",
    )
    sequence_parallel: bool = Field(
        False,
        description="split layer inputs and norms over TP ranks along the sequence "
        "(megatron sequence_parallel; CUDA only: its gathers allocate with torch.cuda; needs "
        "tensor_parallel > 1)",
    )
    recompute: Literal["none", "full"] = Field(
        "none",
        description="activation recomputation: full = each layer's activations are "
        "recomputed in the backward (megatron recompute_granularity=full, uniform, 1 layer)",
    )


def rope_theta(hf_config: Any) -> float:
    """rope_theta from a Qwen3Config (transformers 4.x attribute, or 5.x `rope_parameters`)."""
    params = getattr(hf_config, "rope_parameters", None) or {}
    if params.get("rope_type", "default") != "default":
        raise ValueError(f"rope_type {params['rope_type']!r} is not supported (only 'default')")
    theta = params.get("rope_theta", getattr(hf_config, "rope_theta", None))
    if theta is None:
        raise ValueError("the config has no rope_theta")
    return float(theta)


def validate(hf_config: Any, par: ParallelConfig) -> None:
    """Reject what the mapping or the parallel split cannot represent, naming the field."""
    c = hf_config
    if c.model_type != "qwen3":
        raise ValueError(f"model_type {c.model_type!r}: only 'qwen3' is mapped")
    if getattr(c, "attention_bias", False):
        raise ValueError("attention_bias=True is not supported (Qwen3 has none)")
    if getattr(c, "use_sliding_window", False):
        raise ValueError("use_sliding_window=True is not supported")
    if c.hidden_act != "silu":
        raise ValueError(f"hidden_act {c.hidden_act!r}: only 'silu' (SwiGLU) is mapped")
    tp, pp = par.tensor_parallel, par.pipeline_parallel
    checks = {
        "num_attention_heads": c.num_attention_heads,
        "num_key_value_heads": c.num_key_value_heads,
        "intermediate_size": c.intermediate_size,
        "vocab_size": c.vocab_size,
    }
    for name, value in checks.items():
        if value % tp:
            raise ValueError(f"{name}={value} is not divisible by tensor_parallel={tp}")
    if c.num_attention_heads % c.num_key_value_heads:
        raise ValueError("num_attention_heads must be a multiple of num_key_value_heads")
    if c.num_hidden_layers % pp:
        raise ValueError(
            f"num_hidden_layers={c.num_hidden_layers} is not divisible by pipeline_parallel={pp}"
        )
    if par.context_parallel > 1:
        # DotProductAttention (local spec) asserts cp == 1; CP needs transformer-engine attention.
        raise ValueError("context_parallel > 1 needs transformer-engine attention (GPU only)")


def transformer_config(
    hf_config: Any,
    par: ParallelConfig,
    dtype: torch.dtype,
    device: str = "cpu",
    opts: MegatronOptions | None = None,
):  # -> TransformerConfig
    from megatron.core.transformer import TransformerConfig

    c, opts = hf_config, opts or MegatronOptions()
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    recompute = (
        {"recompute_granularity": "full", "recompute_method": "uniform", "recompute_num_layers": 1}
        if opts.recompute == "full"
        else {}
    )
    return TransformerConfig(
        num_layers=c.num_hidden_layers,
        hidden_size=c.hidden_size,
        ffn_hidden_size=c.intermediate_size,
        num_attention_heads=c.num_attention_heads,
        num_query_groups=c.num_key_value_heads,
        kv_channels=head_dim,
        normalization="RMSNorm",
        layernorm_epsilon=c.rms_norm_eps,
        qk_layernorm=True,
        gated_linear_unit=True,
        activation_func=F.silu,
        add_bias_linear=False,
        add_qkv_bias=False,
        hidden_dropout=0.0,
        attention_dropout=float(getattr(c, "attention_dropout", 0.0)),
        tensor_model_parallel_size=par.tensor_parallel,
        pipeline_model_parallel_size=par.pipeline_parallel,
        context_parallel_size=par.context_parallel,
        params_dtype=dtype,
        bf16=dtype == torch.bfloat16,
        fp16=dtype == torch.float16,
        # No fused kernels on either device (they need apex / megatron's compiled extensions):
        # the CUDA path is the CPU path's code on another device.
        use_cpu_initialization=device == "cpu",
        perform_initialization=False,  # weights come from the HF checkpoint
        bias_dropout_fusion=False,
        apply_rope_fusion=False,
        masked_softmax_fusion=False,
        persist_layer_norm=False,
        gradient_accumulation_fusion=False,
        sequence_parallel=opts.sequence_parallel,
        **recompute,
    )


def build_model(
    hf_config: Any,
    par: ParallelConfig,
    dtype: torch.dtype = torch.float32,
    device: str = "cpu",
    opts: MegatronOptions | None = None,
):
    """The GPTModel of this rank (its pipeline stage, its TP shard) on `device` ("cpu" or
    "cuda": the current CUDA device). Needs init_distributed with the same device."""
    from megatron.core import parallel_state as ps
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.tensor_parallel import random as mrandom

    validate(hf_config, par)
    if device == "cpu":
        shim.cpu_manual_seed(par.seed)
    else:  # megatron's own CUDA RNG tracker: same stream names and offsets as the CPU one
        mrandom.model_parallel_cuda_manual_seed(par.seed)
    spec = get_gpt_layer_local_spec(qk_layernorm=True, normalization="RMSNorm")
    model = GPTModel(
        config=transformer_config(hf_config, par, dtype, device, opts),
        transformer_layer_spec=spec,
        vocab_size=hf_config.vocab_size,
        max_sequence_length=hf_config.max_position_embeddings,
        pre_process=ps.is_pipeline_first_stage(),
        post_process=ps.is_pipeline_last_stage(),
        parallel_output=True,  # logits stay vocab-sharded; logprobs reduce across TP (losses.py)
        share_embeddings_and_output_weights=bool(hf_config.tie_word_embeddings),
        position_embedding_type="rope",
        rotary_base=rope_theta(hf_config),
    )
    if device == "cpu":
        shim.cpu_rotary(model.rotary_pos_emb)
    return model


def causal_mask(seq_len: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """[1, 1, T, T] bool, True = masked (megatron's convention): position t sees 0..t.

    Right padding needs no more than this: padded positions come after every real token."""
    ones = torch.ones(seq_len, seq_len, dtype=torch.bool, device=device)
    return torch.triu(ones, diagonal=1)[None, None]


def forward_logits(model: torch.nn.Module, input_ids: torch.Tensor) -> torch.Tensor:
    """input_ids [B, T] -> this TP rank's logits [B, T, V / tp] (single pipeline stage)."""
    t = input_ids.shape[1]
    pos = torch.arange(t, device=input_ids.device)[None].expand_as(input_ids)
    return model(input_ids, pos, causal_mask(t, input_ids.device))


def load_megatron_state(model: torch.nn.Module, sd: dict[str, torch.Tensor]) -> None:
    """Copy a (this rank's) megatron state dict in; every parameter must be given.

    Only `_extra_state` entries (transformer-engine FP8 metadata, None here) may be absent."""
    missing, unexpected = model.load_state_dict(sd, strict=False)
    missing = [k for k in missing if not k.endswith("._extra_state")]
    if missing or unexpected:
        raise KeyError(f"megatron state dict mismatch: missing {missing}, unexpected {unexpected}")


def megatron_params(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """This rank's parameters by state-dict name (no `_extra_state`), detached."""
    return {k: v.detach() for k, v in model.state_dict().items() if isinstance(v, torch.Tensor)}
