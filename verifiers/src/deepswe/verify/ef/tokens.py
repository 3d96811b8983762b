"""The judge's own tokenizer, as the token counter that condensation needs.

Loaded with transformers (imported here only: evaluation users without it never come here) from
a local folder or a model already in the Hugging Face cache; models are never downloaded.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from deepswe.verify.ef.render import Messages


def load_tokenizer(path: str | Path) -> Any:  # -> transformers.PreTrainedTokenizerBase
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    if tok.chat_template is None:
        raise ValueError(f"{path}: the judge's tokenizer has no chat template")
    return tok


class ChatTokens:
    """Counts and encodes chats as the judge is prompted: its chat template with the assistant
    header appended; also raw text, as R2E-Gym's format counts it. Thread-safe (a fast tokenizer
    shared by threads raises "Already borrowed")."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self._lock = threading.Lock()

    def prompt_text(self, messages: Messages) -> str:
        return self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True
        )

    def encode(self, text: str) -> list[int]:
        with self._lock:
            return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def __call__(self, messages: Messages) -> int:
        return len(self.encode(self.prompt_text(messages)))

    def count_text(self, text: str, add_special_tokens: bool = True) -> int:
        """Tokens of raw text by `tokenizer.encode`, as R2E-Gym's verifier input counts them
        (deepswe.verify.ef.r2e_input)."""
        with self._lock:
            return len(self.tokenizer.encode(text, add_special_tokens=add_special_tokens))
