"""Inference engines: sample replies (token ids + exact log-probs) and take new weights.

One engine per sibling file, looked up lazily by name or `module:Class` path (ENGINES):
`hf` (in-process transformers), `vllm` (a vLLM server in its own virtualenv, sampled over
HTTP: engines/vllm.py). Every engine passes the shared conformance tests in
training/tests/test_train_conformance.py.

`ColocatedEngine` is what an engine living in a trainer rank's process (a hybrid worker,
deepswe.train.cluster.hybrid) adds: sleep while the trainer steps, wake, and take the new
weights one tensor at a time from the backend, in place. The hf engine implements it (the CPU
stand-in); engines/vllm_colocated.py is vLLM's offline engine doing the same on GPUs.
"""

from __future__ import annotations

from collections.abc import Iterable
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

    @classmethod
    def from_config(cls, cfg: Any) -> Any:
        """Build the plug-in from the run's TrainConfig (it reads the sections it needs):
        how deepswe.train.plugins builds every engine, backend and source. Typed Any here:
        this package also loads inside vLLM's own venv (its worker extension), which has
        neither deepswe.data nor the config's other dependencies."""
        ...

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


@runtime_checkable
class ColocatedEngine(InferenceEngine, Protocol):
    """An engine sharing its devices with the trainer (verl's hybrid engine): asleep during the
    update, awake for rollouts, weights loaded in place from the backend's stream."""

    asleep: bool  # between sleep() and the wake_up that takes the KV cache back

    def sleep(self, level: int = 1) -> None:
        """Give the device memory back: level 1 keeps the weights in host memory, level 2
        discards them (wake_up, then load_weights, before sampling again); the KV cache is
        freed either way. Sleeping twice is a no-op."""
        ...

    def wake_up(self, tags: list[str] | None = None) -> None:
        """Take the memory back: tags "weights" and/or "kv_cache", None both (vLLM's names)."""
        ...

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> int:
        """Copy (HF name, full tensor) pairs into the live weights, one at a time; every weight
        must come exactly once (strict). Returns how many tensors were loaded."""
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
