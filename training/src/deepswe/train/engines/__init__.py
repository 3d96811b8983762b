"""Inference engines: sample replies (token ids + exact log-probs) and take new weights.

One engine per sibling file, looked up lazily by name or `module:Class` path (ENGINES):
`hf` (in-process transformers), `vllm` (a vLLM server in its own virtualenv, sampled over
HTTP: engines/vllm.py). Every engine passes the shared conformance tests in
training/tests/test_train_conformance.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch


@dataclass
class Sample:
    """One sampled reply: ids (a final end-of-turn id included when the model stopped), the
    log-prob of each id under the sampling distribution (logits / temperature), its text
    (without the end-of-turn token) and why it stopped: "stop" or "length"."""

    token_ids: list[int]
    logprobs: list[float]
    text: str
    finish_reason: str


@runtime_checkable
class InferenceEngine(Protocol):
    name: str
    tokenizer: Any  # a transformers tokenizer with a chat template

    def sample(
        self,
        prompt: list[int] | list[dict[str, str]],
        n: int,
        temperature: float,
        max_tokens: int,
        seed: int | None = None,
    ) -> list[Sample]:
        """n replies to `prompt` (token ids, or chat messages rendered with the chat template).
        Same seed, same weights, same prompt: same samples."""
        ...

    def update_weights(self, state_dict: dict[str, torch.Tensor]) -> None:
        """Replace the policy's weights (names as the training backend's state_dict)."""
        ...


ENGINES: dict[str, str] = {
    "hf": "deepswe.train.engines.hf:HFEngine",
    "vllm": "deepswe.train.engines.vllm:VLLMEngine",
}


def engine_class(name: str) -> type:
    # Imported here, not at the top: vLLM's worker processes import this package (for
    # vllm_worker.WeightSync) inside vLLM's own venv, where only deepswe.train's source is on
    # the path.
    from deepswe.env.registry import resolve

    return resolve(ENGINES, name, "inference engine")
