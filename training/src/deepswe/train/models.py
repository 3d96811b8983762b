"""The tiny Qwen3-architecture models, built locally (no Hugging Face Hub), randomly initialised.

`init_tiny_model(out_dir)`: the tiny profile's model (`deepswe-train init-model`): a few layers,
tied embeddings and Qwen's real tokenizer (deepswe.train.tokenizer), an HF folder that
AutoModelForCausalLM / AutoTokenizer load offline.

`build_test_model(out)`: the tests' double (a real model, not a mock): the same architecture with
a 1,024-token tokenizer, small enough that sampling and training run in milliseconds on two CPU
cores (the trainer's tests and the `text` rollout source).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from deepswe.train.tokenizer import EOS, PAD, build_qwen_tokenizer, build_small_tokenizer

# Model shapes per --size. Qwen3's own choices where they fit a CPU: head_dim = hidden / heads,
# GQA with 2 query heads per KV head, SwiGLU width 3 x hidden, tied embeddings (as Qwen3-0.6B).
# head_dim is at least 32: vLLM's CPU attention has no kernel for 16 (its server starts, then
# its first forward pass dies), and the tiny model must be servable like any other.
SIZES: dict[str, dict[str, int]] = {
    "tiny": {"hidden": 64, "layers": 2, "heads": 2, "kv_heads": 1},
    "small": {"hidden": 128, "layers": 4, "heads": 4, "kv_heads": 2},
}
MAX_POSITIONS = 40960  # Qwen3-32B config.json: 32,768 response + prompt headroom
ROPE_THETA = 1_000_000.0  # Qwen3 config.json


@dataclass(frozen=True)
class TinyModel:
    """What init_tiny_model wrote: the folder, its parameter count and vocabulary size."""

    path: Path
    parameters: int  # unique parameters (the tied embedding counted once)
    vocab_size: int  # = len(tokenizer) = model.config.vocab_size


def init_tiny_model(out_dir: str | Path, size: str = "tiny", seed: int = 0) -> TinyModel:
    """Write a randomly initialised Qwen3 model of `size` (SIZES) and Qwen's tokenizer to
    `out_dir` (save_pretrained; it must not exist, or be empty). Same seed, same weights; the
    global torch RNG is left as is."""
    import torch
    from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

    if size not in SIZES:
        raise ValueError(f"size {size!r}: known sizes are {', '.join(SIZES)}")
    shape, out = SIZES[size], Path(out_dir)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise FileExistsError(f"{out} exists and is not an empty folder: not overwriting it")
    tokenizer = build_qwen_tokenizer()
    eos, pad = tokenizer.convert_tokens_to_ids(EOS), tokenizer.convert_tokens_to_ids(PAD)
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=shape["hidden"],
        intermediate_size=3 * shape["hidden"],
        num_hidden_layers=shape["layers"],
        num_attention_heads=shape["heads"],
        num_key_value_heads=shape["kv_heads"],
        head_dim=shape["hidden"] // shape["heads"],
        max_position_embeddings=MAX_POSITIONS,
        rope_theta=ROPE_THETA,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=eos,
        pad_token_id=pad,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen3ForCausalLM(config)
    # Qwen3's generation_config.json stops on <|im_end|> or <|endoftext|>.
    model.generation_config = GenerationConfig(eos_token_id=[eos, pad], pad_token_id=pad)
    # Written beside `out`, then renamed: a folder at `out` is always a complete model.
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    tmp.chmod(0o755)  # mkdtemp makes it private; a model folder is not
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        if out.is_dir() and not any(out.iterdir()):
            out.rmdir()
        os.rename(tmp, out)  # fails on an existing non-empty folder (checked above too)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    n_params = sum(p.numel() for p in model.parameters())  # parameters() yields tied ones once
    return TinyModel(path=out, parameters=n_params, vocab_size=len(tokenizer))


def build_test_model(
    out: str | Path,
    *,
    hidden: int = 64,
    layers: int = 2,
    heads: int = 4,
    kv_heads: int = 2,
    vocab_size: int = 1024,
    max_positions: int = 16384,
    seed: int = 0,
) -> Path:
    """Save a randomly initialised tiny Qwen3 model and its small tokenizer (HF format) in `out`.

    Loadable with AutoModelForCausalLM / AutoTokenizer.from_pretrained(out). Same `seed`, same
    weights (torch's CPU generator).
    """
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    out = Path(out)
    tokenizer = build_small_tokenizer(vocab_size)
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=hidden * 3,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=hidden // heads,
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.convert_tokens_to_ids(EOS),
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(config)
    model.generation_config.eos_token_id = config.eos_token_id
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
