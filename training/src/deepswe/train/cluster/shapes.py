"""Model shapes for the plan on paper (budget.py): what the arithmetic needs of a decoder-only
transformer, read from a local config.json, the Hugging Face cache, or a table of known hub
models. Nothing is downloaded."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class ModelShape:
    """What the arithmetic needs of a decoder-only transformer (Qwen3 family names)."""

    name: str
    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied_embeddings: bool

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    @property
    def per_layer(self) -> int:
        """Parameters of one layer: q/k/v/o projections, the SwiGLU MLP, two RMSNorms and
        Qwen3's per-head q/k norms."""
        attn = self.hidden * (self.q_dim + 2 * self.kv_dim) + self.q_dim * self.hidden
        mlp = 3 * self.hidden * self.intermediate
        return attn + mlp + 2 * self.hidden + 2 * self.head_dim

    @property
    def embedding(self) -> int:
        return self.vocab * self.hidden

    @property
    def parameters(self) -> int:
        head = 0 if self.tied_embeddings else self.embedding
        return self.layers * self.per_layer + self.embedding + head + self.hidden

    @property
    def matmul_parameters(self) -> int:
        """Parameters that cost FLOPs per token (the embedding lookup does not; the LM head
        does, tied or not)."""
        return self.layers * self.per_layer + self.embedding

    def kv_bytes_per_token(self, tp: int) -> int:
        """bf16 K and V of every layer for one token on one GPU of a TP-`tp` engine (vLLM
        replicates KV heads when TP exceeds their count)."""
        heads_here = max(self.kv_heads // tp, 1)
        return 2 * self.layers * heads_here * self.head_dim * 2

    @classmethod
    def from_hf_config(cls, cfg: dict[str, Any], name: str) -> ModelShape:
        try:
            heads = int(cfg["num_attention_heads"])
            return cls(
                name=name,
                layers=int(cfg["num_hidden_layers"]),
                hidden=int(cfg["hidden_size"]),
                intermediate=int(cfg["intermediate_size"]),
                heads=heads,
                kv_heads=int(cfg.get("num_key_value_heads") or heads),
                head_dim=int(cfg.get("head_dim") or cfg["hidden_size"] // heads),
                vocab=int(cfg["vocab_size"]),
                tied_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{name}: config.json lacks or mangles {e}") from None


# Hub models whose shape is known without downloading them: the values of their config.json
# (Qwen/Qwen3-32B on the Hugging Face Hub; DeepSWE-Preview is a fine-tune of it, same shape).
KNOWN_SHAPES: dict[str, dict[str, Any]] = {
    "Qwen/Qwen3-32B": {
        "num_hidden_layers": 64,
        "hidden_size": 5120,
        "intermediate_size": 25600,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "vocab_size": 151936,
        "tie_word_embeddings": False,
    },
}
KNOWN_SHAPES["agentica-org/DeepSWE-Preview"] = KNOWN_SHAPES["Qwen/Qwen3-32B"]


def model_shape(path: str) -> ModelShape:
    """The shape of model.path: its local config.json, the Hugging Face cache's copy, or a
    known hub model; a ValueError naming model.path otherwise (nothing is downloaded)."""
    local = Path(path) / "config.json"
    if local.is_file():
        return ModelShape.from_hf_config(json.loads(local.read_text()), path)
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(path, "config.json")
    except Exception:  # not shaped like a hub id, or no huggingface_hub
        cached = None
    if isinstance(cached, str):
        return ModelShape.from_hf_config(json.loads(Path(cached).read_text()), path)
    if path in KNOWN_SHAPES:
        return ModelShape.from_hf_config(KNOWN_SHAPES[path], path)
    raise ValueError(
        f"model.path {path!r}: no config.json there or in the Hugging Face cache, and not one "
        f"of the known shapes ({', '.join(KNOWN_SHAPES)}); the plan needs the model's shape"
    )
