"""A tiny Qwen3-architecture policy with a small byte-level BPE tokenizer, built in seconds.

This is the trainer's test double (a real model, not a mock): tests and the `text` rollout
source need a policy whose vocabulary is small enough that sampling and training run in
milliseconds on two CPU cores. The tokenizer is trained with `tokenizers` on the spine's own
prompt texts (deepswe.env.agent.prompts: system prompt and both user prompts), so DeepSWE's
prompts take hundreds of tokens rather than thousands; any byte string still encodes (byte-level).
The chat template renders Qwen's ChatML turns, `<|im_start|>{role}\\n{content}<|im_end|>\\n`.
"""

from __future__ import annotations

from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

IM_START, IM_END, PAD = "<|im_start|>", "<|im_end|>", "<|endoftext|>"

# Our own ChatML template: every turn as written (thinking kept, as the reference trained),
# then the assistant header when a generation prompt is asked for.
CHAT_TEMPLATE = (
    "{%- for m in messages -%}"
    "{{- '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)


def _corpus() -> list[str]:
    """Text the tokenizer is trained on: the spine's prompts and a few tool-call shapes."""
    from deepswe.env.agent import prompts

    texts = [prompts.system_prompt("train"), prompts.system_prompt("eval")]
    texts += [prompts.user_prompt("{problem}", v) for v in ("train", "eval")]
    texts.append(prompts.CONTINUE_MSG + prompts.CONTINUE_MSG_TRAIN)
    texts.append(
        "<function=execute_bash>\n<parameter=cmd>python -m pytest -q</parameter>\n</function>"
    )
    return texts


def build_tokenizer(vocab_size: int = 1024):  # -> transformers.PreTrainedTokenizerFast
    """A byte-level BPE tokenizer with ChatML special tokens and CHAT_TEMPLATE."""
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[PAD, IM_START, IM_END],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token=IM_END, pad_token=PAD, bos_token=None
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build_tiny_policy(
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
    """Save a randomly initialised tiny Qwen3 model and its tokenizer (HF format) in `out`.

    Loadable with AutoModelForCausalLM / AutoTokenizer.from_pretrained(out). Same `seed`, same
    weights (torch's CPU generator).
    """
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    out = Path(out)
    tokenizer = build_tokenizer(vocab_size)
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
        eos_token_id=tokenizer.convert_tokens_to_ids(IM_END),
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(config)
    model.generation_config.eos_token_id = config.eos_token_id
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
