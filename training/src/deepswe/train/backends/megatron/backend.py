"""The `megatron` training backend: Qwen3 as a megatron-core GPTModel, trained with torch AdamW.

Same contract and same loss as the `hf` backend (deepswe.train.backends.TrainingBackend): weights
come in and go out in HF names (mapping.py), so engines and checkpoints do not know which backend
trained them. Runs on CPU over gloo (shim.py). Tensor parallelism shards the model per rank
(each rank builds the same backend; weights and gradients of replicated parameters stay equal);
pipeline parallelism and data parallelism across ranks are not wired into this loop yet.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
import torch.distributed as dist

from deepswe.train.algos import GRPOConfig, ppo_clip_loss
from deepswe.train.backends import OptimConfig, StepStats, UpdateBatch
from deepswe.train.backends.megatron import mapping, model, shim
from deepswe.train.backends.megatron.logprobs import vocab_parallel_logprobs
from deepswe.train.rollout import RolloutBatch

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
_COPIED = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "generation_config.json",
)


def _finite_below(norm: float, limit: float) -> bool:
    return norm == norm and abs(norm) != float("inf") and norm < limit


class CausalLMView(torch.nn.Module):
    """`view(input_ids=...).logits` [B, T, V] (full vocabulary) over a GPTModel, for callers that
    speak the transformers interface (e.g. a greedy check)."""

    def __init__(self, gpt: torch.nn.Module) -> None:
        super().__init__()
        self.gpt = gpt

    def forward(self, input_ids: torch.Tensor, **_: Any) -> SimpleNamespace:
        logits = model.forward_logits(self.gpt, input_ids)
        _, size, group = _tp()
        if size > 1:
            parts = [torch.empty_like(logits) for _ in range(size)]
            dist.all_gather(parts, logits.contiguous(), group=group)
            logits = torch.cat(parts, dim=-1)
        return SimpleNamespace(logits=logits)


def _tp() -> tuple[int, int, Any]:
    from megatron.core import parallel_state as ps

    return (
        ps.get_tensor_model_parallel_rank(),
        ps.get_tensor_model_parallel_world_size(),
        ps.get_tensor_model_parallel_group(),
    )


class MegatronBackend:
    """Implements `TrainingBackend` with megatron-core (local spec) + torch.optim.AdamW."""

    name = "megatron"

    def __init__(
        self,
        model_path: str | Path,
        *,
        optim: OptimConfig | None = None,
        algo: GRPOConfig | None = None,
        temperature: float = 1.0,
        dtype: str = "float32",
        parallel: model.ParallelConfig | None = None,
    ) -> None:
        from transformers import AutoConfig

        self.optim_cfg, self.algo = optim or OptimConfig(), algo or GRPOConfig()
        self.temperature, self.model_path = temperature, Path(model_path)
        self.par = parallel or model.ParallelConfig()
        if self.par.pipeline_parallel > 1:
            raise NotImplementedError(
                "pipeline_parallel > 1: this loop has no pipeline schedule yet"
            )
        self.hf_config = AutoConfig.from_pretrained(str(model_path), local_files_only=True)
        self.dims = mapping.Dims.from_hf_config(self.hf_config)
        model.validate(self.hf_config, self.par)
        shim.init_distributed(self.par.tensor_parallel, 1, self.par.context_parallel)
        if dist.get_world_size() != self.par.tensor_parallel:
            raise NotImplementedError("data parallelism across ranks is not wired in yet")
        self.gpt = model.build_model(self.hf_config, self.par, DTYPES[dtype])
        self.model = CausalLMView(self.gpt)
        self._load_hf(_read_hf_weights(self.model_path))
        o = self.optim_cfg
        if o.frozen:
            raise NotImplementedError(
                "backend.optim.frozen: only the hf backend freezes parameters so far"
            )
        self.optimizer = torch.optim.AdamW(
            self.gpt.parameters(), lr=o.lr, betas=o.betas, eps=o.adam_eps,
            weight_decay=o.weight_decay,
        )  # fmt: skip

    @classmethod
    def from_config(cls, cfg: Any) -> MegatronBackend:
        """From a TrainConfig (backend.parallel, when the config has it, else TP = PP = CP = 1)."""
        if cfg.model.device != "cpu":
            raise NotImplementedError("the megatron backend runs on CPU (gloo) only so far")
        return cls(
            cfg.model.path, optim=cfg.backend.optim, algo=cfg.algo,
            temperature=cfg.rollout.temperature, dtype=cfg.model.dtype,
            parallel=getattr(cfg.backend, "parallel", None),
        )  # fmt: skip

    # -- weights ---------------------------------------------------------------------------------
    def _load_hf(self, hf_sd: dict[str, torch.Tensor]) -> None:
        full = mapping.hf_to_megatron(hf_sd, self.dims)
        rank, size, _ = _tp()
        model.load_megatron_state(self.gpt, mapping.tp_shard(full, rank, size))

    def state_dict(self) -> dict[str, torch.Tensor]:
        """HF names (lm_head.weight included, the embedding when tied); TP shards gathered."""
        local = model.megatron_params(self.gpt)
        rank, size, group = _tp()
        if size > 1:
            shards = [{} for _ in range(size)]
            for name, t in local.items():
                parts = [torch.empty_like(t) for _ in range(size)]
                dist.all_gather(parts, t.contiguous(), group=group)
                for s, p in zip(shards, parts, strict=True):
                    s[name] = p
            local = mapping.tp_merge(shards)
        return mapping.megatron_to_hf(local, self.dims)

    # -- forward / step --------------------------------------------------------------------------
    def _micro(self, n: int) -> list[slice]:
        m = self.optim_cfg.micro_batch_size
        return [slice(s, min(s + m, n)) for s in range(0, n, m)]

    def _logprobs(self, ids: torch.Tensor, attn: torch.Tensor, entropy: bool):
        """ids, attn [b, w] -> (logprobs [b, w], entropy [b, w] or None), 0 at t = 0 and padding."""
        logits = model.forward_logits(self.gpt, ids)
        lp, ent = vocab_parallel_logprobs(logits, ids, self.temperature, entropy)
        zero = torch.zeros((ids.shape[0], 1), dtype=torch.float32)
        m = attn.to(torch.float32)
        lp = torch.cat([zero, lp], dim=1) * m
        return lp, (torch.cat([zero, ent], dim=1) * m if ent is not None else None)

    def forward_logprobs(
        self, batch: RolloutBatch, positions: torch.Tensor | None = None
    ) -> torch.Tensor:
        # The vocab-parallel head runs at every position here (its logits are sharded over
        # tensor-parallel ranks); `positions` only zeroes the rest, as the Protocol says.
        self.gpt.eval()
        out = torch.zeros(batch.input_ids.shape, dtype=torch.float32)
        with torch.no_grad():
            for rows in self._micro(len(batch)):
                w = max(int(batch.attention_mask[rows].sum(dim=1).max().item()), 1)
                lp, _ = self._logprobs(
                    batch.input_ids[rows, :w], batch.attention_mask[rows, :w], False
                )
                out[rows, :w] = lp
        return out if positions is None else torch.where(positions.bool(), out, 0.0)

    def train_step(self, batch: UpdateBatch) -> StepStats:
        self.gpt.train()
        self.optimizer.zero_grad(set_to_none=True)
        rb, a = batch.rollout, self.algo
        loss_sum, sums = 0.0, {"clipfrac": 0.0, "approx_kl": 0.0, "entropy": 0.0}
        n_tok = int(batch.loss_mask.sum().item())
        for rows in self._micro(len(rb)):
            w = max(int(rb.attention_mask[rows].sum(dim=1).max().item()), 1)
            cut = lambda x, rows=rows, w=w: x[rows, :w]  # noqa: E731
            mask = cut(batch.loss_mask)
            lp, ent = self._logprobs(cut(rb.input_ids), cut(rb.attention_mask), True)
            loss, m = ppo_clip_loss(
                lp, cut(rb.old_logprobs), cut(batch.advantages), mask, a.eps_low, a.eps_high,
                a.loss_agg, a.loss_constant, batch.denominator,
            )  # fmt: skip
            loss.backward()
            loss_sum += float(loss.detach())
            k = float(mask.sum().item())  # metrics are token means: weight by tokens
            sums["clipfrac"] += float(m.clipfrac) * k
            sums["approx_kl"] += float(m.approx_kl) * k
            sums["entropy"] += float((ent * mask).sum().item()) if ent is not None else 0.0
        norm = self._finalize_and_clip()
        skipped = not _finite_below(norm, self.optim_cfg.skip_grad_norm)
        if skipped:
            self.optimizer.zero_grad(set_to_none=True)
        else:
            self.optimizer.step()
        denom = max(n_tok, 1)
        return StepStats(
            loss=loss_sum, grad_norm=norm, skipped=skipped, clipfrac=sums["clipfrac"] / denom,
            approx_kl=sums["approx_kl"] / denom, entropy=sums["entropy"] / denom,
            trained_tokens=n_tok,
        )  # fmt: skip

    def _finalize_and_clip(self) -> float:
        """Sum TP-partial gradients, then clip by the global norm; returns the norm before clipping.

        QK-layernorm weights are replicated but each TP rank only sees its own heads, so their
        gradients are partial sums (megatron's finalize_model_grads all-reduces them too)."""
        named = [(n, p) for n, p in self.gpt.named_parameters() if p.grad is not None]
        if not named:
            return 0.0
        _, size, group = _tp()
        params = [p for _, p in named]
        if size == 1:  # the exact computation the hf backend does
            return float(torch.nn.utils.clip_grad_norm_(params, self.optim_cfg.grad_clip))
        for n, p in named:
            if "q_layernorm" in n or "k_layernorm" in n:
                dist.all_reduce(p.grad, group=group)
        # Which parameters are TP-sharded, by name (mapping.py): megatron only tags them
        # (`tensor_model_parallel`) inside its weight initialisation, which we skip.
        split = [mapping.is_tp_sharded(n) for n, _ in named]
        sharded = sum(p.grad.float().pow(2).sum() for p, s in zip(params, split, strict=True) if s)
        replicated = sum(
            p.grad.float().pow(2).sum() for p, s in zip(params, split, strict=True) if not s
        )
        sq = torch.as_tensor(sharded, dtype=torch.float32).clone()
        dist.all_reduce(sq, group=group)
        norm = float((sq + replicated).sqrt())
        coef = min(self.optim_cfg.grad_clip / (norm + 1e-6), 1.0)
        if coef < 1.0 and _finite_below(norm, float("inf")):
            for p in params:
                p.grad.mul_(coef)
        return norm

    # -- checkpoints -----------------------------------------------------------------------------
    def save(self, directory: Path) -> None:
        """model/ (HF format: config.json + model.safetensors, written by TP rank 0), then per
        rank optimizer_rank{r}.pt and rng_rank{r}.pt (torch, python and megatron's RNG streams)."""
        from megatron.core.tensor_parallel import random as mrandom
        from safetensors.torch import save_file

        directory = Path(directory)
        hf_sd = self.state_dict()  # collective under TP: every rank calls it
        rank = dist.get_rank()
        if rank == 0:
            out = directory / "model"
            out.mkdir(parents=True, exist_ok=True)
            self.hf_config.save_pretrained(out)
            if self.dims.tied:  # shared tensor: HF writes it once, under the embedding's name
                hf_sd = {k: v for k, v in hf_sd.items() if k != "lm_head.weight"}
            save_file({k: v.contiguous() for k, v in hf_sd.items()}, out / "model.safetensors",
                      metadata={"format": "pt"})  # fmt: skip
            for name in _COPIED:
                if (self.model_path / name).exists():
                    shutil.copy(self.model_path / name, out / name)
        directory.mkdir(parents=True, exist_ok=True)
        torch.save(self.optimizer.state_dict(), directory / f"optimizer_rank{rank}.pt")
        rng = {
            "torch": torch.get_rng_state(),
            "python": random.getstate(),
            "megatron": mrandom.get_cuda_rng_tracker().get_states(),
        }
        torch.save(rng, directory / f"rng_rank{rank}.pt")
        if dist.get_world_size() > 1:
            dist.barrier()

    def load(self, directory: Path) -> None:
        from megatron.core.tensor_parallel import random as mrandom

        directory, rank = Path(directory), dist.get_rank()
        self._load_hf(_read_hf_weights(directory / "model"))
        self.optimizer.load_state_dict(
            torch.load(directory / f"optimizer_rank{rank}.pt", weights_only=True)
        )
        rng = torch.load(directory / f"rng_rank{rank}.pt", weights_only=False)
        torch.set_rng_state(rng["torch"])
        random.setstate(rng["python"])
        mrandom.get_cuda_rng_tracker().set_states(rng["megatron"])


def _read_hf_weights(path: Path) -> dict[str, torch.Tensor]:
    """Every tensor of an HF checkpoint folder (*.safetensors, sharded or not), on CPU.
    A tied checkpoint has no lm_head.weight; the mapping does not need it."""
    from safetensors.torch import load_file

    files = sorted(Path(path).glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{path}: no *.safetensors weights")
    sd: dict[str, torch.Tensor] = {}
    for f in files:
        sd.update(load_file(str(f)))
    return sd
