"""Training backends: log-probs of a batch, one optimizer step, weights, checkpoints.

One backend per sibling file, looked up lazily (BACKENDS): `hf` (transformers + torch AdamW,
built), `megatron` (megatron-core; CPU over gloo or GPUs). Every backend passes training/tests/test_train_conformance.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import torch
from pydantic import BaseModel, ConfigDict, Field

from deepswe.env.registry import resolve
from deepswe.train.rollout import RolloutBatch


class OptimConfig(BaseModel):
    """Optimizer and step settings. Defaults: the DeepSWE recipe (rLLM / verl actor.optim)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    lr: float = Field(1e-6, gt=0, description="learning rate, constant (rLLM actor.optim.lr=1e-6)")
    betas: tuple[float, float] = Field((0.9, 0.999), description="AdamW betas (verl default)")
    weight_decay: float = Field(0.01, ge=0, description="AdamW weight decay (verl default 0.01)")
    adam_eps: float = Field(1e-8, gt=0, description="AdamW epsilon (torch default)")
    grad_clip: float = Field(1.0, gt=0, description="max global grad norm (verl grad_clip=1.0)")
    skip_grad_norm: float = Field(
        1e5, gt=0, description="skip the step when the grad norm is non-finite or >= this"
    )
    micro_batch_size: int = Field(1, ge=1, description="trajectories per forward/backward")
    frozen: tuple[str, ...] = Field(
        (),
        description="parameter-name prefixes (HF names) kept fixed; the reference trains all "
        "(empty). The tiny profile freezes its tied 152k-row token embedding: see tiny.yaml",
    )


@dataclass
class UpdateBatch:
    """What one optimizer step trains on: the kept rows of a RolloutBatch plus advantages.

    advantages: [B, T] per-token (zero off the loss mask); loss_mask: [B, T] after compact
    filtering; denominator: the loss normaliser of the whole batch (algos.loss_denominator),
    passed to every micro-batch so their gradients sum to the full-batch gradient.
    """

    rollout: RolloutBatch
    advantages: torch.Tensor
    loss_mask: torch.Tensor
    denominator: float


@dataclass
class StepStats:
    """One optimizer step's numbers (token means over the loss mask)."""

    loss: float
    grad_norm: float
    skipped: bool
    clipfrac: float
    approx_kl: float
    entropy: float
    trained_tokens: int
    extra: dict[str, float] = field(default_factory=dict)


@runtime_checkable
class TrainingBackend(Protocol):
    name: str

    @classmethod
    def from_config(cls, cfg: Any) -> Any:
        """Build the plug-in from the run's TrainConfig (it reads the sections it needs):
        how deepswe.train.plugins builds every engine, backend and source. Typed Any here:
        TrainConfig holds this package's OptimConfig, so importing it back is a cycle."""
        ...

    def forward_logprobs(
        self, batch: RolloutBatch, positions: torch.Tensor | None = None
    ) -> torch.Tensor:
        """[B, T] float32: log pi(input_ids[:, t] | input_ids[:, :t]) at the sampling
        temperature; 0 at t = 0 and on padding. No gradient. With `positions` (bool [B, T]),
        0 outside them too, and a backend may skip computing them (the trainer passes the
        loss mask: pi_old is needed on sampled tokens only)."""
        ...

    def train_step(self, batch: UpdateBatch) -> StepStats:
        """Forward/backward over micro-batches (gradients accumulated), clip to grad_clip,
        optimizer step unless the norm is non-finite or >= skip_grad_norm."""
        ...

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The policy weights, named as the inference engine expects them."""
        ...

    def save(self, directory: Path) -> None:
        """Model (HF format), optimizer state and RNG states into `directory`."""
        ...

    def load(self, directory: Path) -> None:
        """Restore what `save` wrote, so training continues exactly."""
        ...


BACKENDS: dict[str, str] = {
    "hf": "deepswe.train.backends.hf:HFBackend",
    "megatron": "deepswe.train.backends.megatron:MegatronBackend",  # megatron-core (extra: megatron)
}


def backend_class(name: str) -> type:
    return resolve(BACKENDS, name, "training backend")


def hf_weights(backend: TrainingBackend) -> Iterator[tuple[str, torch.Tensor]]:
    """The backend's weights as (HF name, full tensor), one at a time when it can stream them
    (`iter_hf_weights`: the megatron backend gathers one TP-sharded tensor at a time), else from
    its whole state_dict. Collective when the backend's is: every TP rank iterates to the end."""
    stream = getattr(backend, "iter_hf_weights", None)
    if stream is not None:
        yield from stream()
    else:
        yield from backend.state_dict().items()
