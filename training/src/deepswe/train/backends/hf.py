"""The `hf` training backend: a transformers causal LM trained with torch AdamW on one device.

GRPO++ loss from deepswe.train.algos (ppo_clip_loss with the global-batch denominator), gradients
accumulated over micro-batches, global-norm clipping, and a skipped step when the norm is
non-finite or huge (a step from such a gradient would wreck the weights; the reference, verl,
skips non-finite norms too).
"""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

import torch

from deepswe.train.algos import GRPOConfig, ppo_clip_loss
from deepswe.train.backends import OptimConfig, StepStats, UpdateBatch
from deepswe.train.backends.logprobs import token_logprobs
from deepswe.train.engines.hf import load_model
from deepswe.train.rollout import RolloutBatch


def _trim(batch: RolloutBatch, rows: slice) -> tuple[slice, int]:
    """Rows `rows` and the width of their longest sequence (padding columns dropped)."""
    width = int(batch.attention_mask[rows].sum(dim=1).max().item()) if len(batch) else 1
    return rows, max(width, 1)


class HFBackend:
    """Implements `TrainingBackend` with transformers + torch.optim.AdamW."""

    name = "hf"

    def __init__(
        self,
        model_path: str | Path,
        *,
        optim: OptimConfig | None = None,
        algo: GRPOConfig | None = None,
        temperature: float = 1.0,
        device: str = "cpu",
        dtype: str = "float32",
        logprob_chunk: int = 1024,
    ) -> None:
        self.optim_cfg = optim or OptimConfig()
        self.algo = algo or GRPOConfig()
        self.temperature, self.chunk = temperature, logprob_chunk
        self.device = torch.device(device)
        self.model = load_model(model_path, device, dtype)
        o = self.optim_cfg
        named = dict(self.model.named_parameters())  # a tied weight is listed once
        unknown = [f for f in o.frozen if not any(n.startswith(f) for n in named)]
        if unknown:
            raise ValueError(f"backend.optim.frozen: no parameter starts with {unknown}")
        for n, p in named.items():
            if any(n.startswith(f) for f in o.frozen):
                p.requires_grad_(False)
        self.optimizer = torch.optim.AdamW(
            [p for p in named.values() if p.requires_grad],
            lr=o.lr,
            betas=o.betas,
            eps=o.adam_eps,
            weight_decay=o.weight_decay,
        )

    @classmethod
    def from_config(cls, cfg: Any) -> HFBackend:
        """From a TrainConfig."""
        return cls(
            cfg.model.path,
            optim=cfg.backend.optim,
            algo=cfg.algo,
            temperature=cfg.rollout.temperature,
            device=cfg.model.device,
            dtype=cfg.model.dtype,
            logprob_chunk=cfg.backend.logprob_chunk,
        )

    def _micro(self, n: int) -> list[slice]:
        m = self.optim_cfg.micro_batch_size
        return [slice(s, min(s + m, n)) for s in range(0, n, m)]

    def forward_logprobs(
        self, batch: RolloutBatch, positions: torch.Tensor | None = None
    ) -> torch.Tensor:
        self.model.eval()
        out = torch.zeros(batch.input_ids.shape, dtype=torch.float32)
        with torch.no_grad():
            for sl in self._micro(len(batch)):
                rows, w = _trim(batch, sl)
                ids = batch.input_ids[rows, :w].to(self.device)
                attn = batch.attention_mask[rows, :w].to(self.device)
                pos = positions[rows, :w].to(self.device) if positions is not None else None
                lp, _ = token_logprobs(
                    self.model, ids, attn, self.temperature, self.chunk, positions=pos
                )
                out[rows, :w] = lp.float().cpu()
        return out

    def train_step(self, batch: UpdateBatch) -> StepStats:
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        totals = torch.zeros(4, dtype=torch.float64)  # loss, clipfrac*k, approx_kl*k, entropy
        for sl in self._micro(len(batch.rollout)):
            totals += self._micro_step(batch, *_trim(batch.rollout, sl))
        norm, skipped = self._clip_and_step()
        n_tok = int(batch.loss_mask.sum().item())
        loss, clip, kl, ent = (float(x) for x in totals)
        denom = max(n_tok, 1)  # the metrics are token means over the loss mask
        return StepStats(
            loss=loss,
            grad_norm=norm,
            skipped=skipped,
            clipfrac=clip / denom,
            approx_kl=kl / denom,
            entropy=ent / denom,
            trained_tokens=n_tok,
        )

    def _micro_step(self, batch: UpdateBatch, rows: slice, width: int) -> torch.Tensor:
        """Forward + backward of rows `rows` (columns :width); returns their metric sums."""
        rb, a = batch.rollout, self.algo

        def dev(x: torch.Tensor) -> torch.Tensor:
            return x[rows, :width].to(self.device)

        mask = dev(batch.loss_mask)
        lp, ent = token_logprobs(
            self.model,
            dev(rb.input_ids),
            dev(rb.attention_mask),
            self.temperature,
            self.chunk,
            with_entropy=True,
            positions=mask,
        )
        loss, m = ppo_clip_loss(
            lp,
            dev(rb.old_logprobs),
            dev(batch.advantages),
            mask,
            a.eps_low,
            a.eps_high,
            a.loss_agg,
            a.loss_constant,
            batch.denominator,
        )
        loss.backward()
        k = float(mask.sum().item())
        assert ent is not None
        return torch.tensor(
            [
                float(loss.detach()),
                float(m.clipfrac) * k,
                float(m.approx_kl) * k,
                float((ent * mask).sum()),
            ],
            dtype=torch.float64,
        )

    def _clip_and_step(self) -> tuple[float, bool]:
        """(grad norm before clipping, whether the step was skipped)."""
        params = [p for p in self.model.parameters() if p.grad is not None]
        if not params:
            return 0.0, False
        norm = float(torch.nn.utils.clip_grad_norm_(params, self.optim_cfg.grad_clip))
        skipped = not math.isfinite(norm) or norm >= self.optim_cfg.skip_grad_norm
        if skipped:
            self.optimizer.zero_grad(set_to_none=True)
        else:
            self.optimizer.step()
        return norm, skipped

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {k: v.detach() for k, v in self.model.state_dict().items()}

    def save(self, directory: Path) -> None:
        directory = Path(directory)
        self.model.save_pretrained(directory / "model")
        torch.save(self.optimizer.state_dict(), directory / "optimizer.pt")
        rng = {"torch": torch.get_rng_state(), "python": random.getstate()}
        if torch.cuda.is_available():
            rng["cuda"] = torch.cuda.get_rng_state_all()
        torch.save(rng, directory / "rng.pt")

    def load(self, directory: Path) -> None:
        directory = Path(directory)
        saved = load_model(directory / "model", "cpu", "float32")
        own = self.model.state_dict()
        self.model.load_state_dict(
            {k: v.to(own[k].dtype) for k, v in saved.state_dict().items()}, strict=True
        )
        self.optimizer.load_state_dict(
            torch.load(directory / "optimizer.pt", map_location=self.device, weights_only=True)
        )
        rng = torch.load(directory / "rng.pt", weights_only=False)
        torch.set_rng_state(rng["torch"])
        random.setstate(rng["python"])
        if "cuda" in rng and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(rng["cuda"])
