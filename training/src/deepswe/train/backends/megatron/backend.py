"""The `megatron` training backend: Qwen3 as a megatron-core GPTModel, trained with AdamW.

Same contract and same loss as the `hf` backend (deepswe.train.backends.TrainingBackend): weights
come in and go out in HF names (mapping.py), so engines and checkpoints do not know which backend
trained them. Runs on CPU over gloo (shim.py) and, the same code, on CUDA over NCCL
(model.device cuda). AdamW steps fp32 main weights, sharded over DP with the distributed
optimizer (optimizer.py); checkpoints are sharded, one writer per rank (checkpoint.py).

Every rank of a world of TP x DP processes builds the same backend and makes the same calls with
the same batch. Tensor parallelism shards the model within a TP group (weights and gradients of
replicated parameters stay equal); data parallelism gives each DP rank a contiguous share of the
batch's rows (`dp_share`) and sums gradients and metric sums over the DP group before the clip,
so every rank steps with, and reports, the full batch's numbers. Pipeline parallelism is not
wired into this loop yet; context parallelism needs transformer-engine attention (model.py).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
import torch.distributed as dist

from deepswe.train.algos import GRPOConfig, ppo_clip_loss
from deepswe.train.backends import OptimConfig, StepStats, UpdateBatch
from deepswe.train.backends.megatron import checkpoint, mapping, model, shim
from deepswe.train.backends.megatron.groups import dp_info, dp_share, sum_grads_over, tp_info
from deepswe.train.backends.megatron.logprobs import vocab_parallel_logprobs
from deepswe.train.backends.megatron.optimizer import MainWeightsAdamW
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
        device = next(self.gpt.parameters()).device
        logits = model.forward_logits(self.gpt, input_ids.to(device))
        _, size, group = tp_info()
        if size > 1:
            parts = [torch.empty_like(logits) for _ in range(size)]
            dist.all_gather(parts, logits.contiguous(), group=group)
            logits = torch.cat(parts, dim=-1)
        return SimpleNamespace(logits=logits)


def _width(batch: RolloutBatch, rows: slice) -> int:
    """The longest sequence among `rows` (at least 1): their padding columns are dropped."""
    return max(int(batch.attention_mask[rows].sum(dim=1).max().item()), 1)


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
        options: model.MegatronOptions | None = None,
        device: str = "cpu",
    ) -> None:
        from transformers import AutoConfig

        self.optim_cfg, self.algo = optim or OptimConfig(), algo or GRPOConfig()
        self.temperature, self.model_path = temperature, Path(model_path)
        self.par = par = parallel or model.ParallelConfig()
        self.opts = options or model.MegatronOptions()
        if device not in ("cpu", "cuda"):
            raise ValueError(f"model.device {device!r}: the megatron backend runs on cpu or cuda")
        if device == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("model.device cuda: torch sees no CUDA device here")
        if self.opts.sequence_parallel and (device != "cuda" or par.tensor_parallel < 2):
            raise ValueError(
                "backend.megatron.sequence_parallel needs model.device cuda and "
                f"backend.parallel.tensor_parallel > 1 (have {device}, {par.tensor_parallel})"
            )
        self.device = torch.device(device)
        if par.pipeline_parallel > 1:
            raise NotImplementedError(
                f"backend.parallel.pipeline_parallel={par.pipeline_parallel}: this loop has no "
                "pipeline schedule yet (only 1 is supported)"
            )
        self.hf_config = AutoConfig.from_pretrained(str(model_path), local_files_only=True)
        self.dims = mapping.Dims.from_hf_config(self.hf_config)
        model.validate(self.hf_config, par)
        # The world (dist's, or 1 process when dist is not initialised) is TP x CP x DP.
        world = dist.get_world_size() if dist.is_initialized() else 1
        mp_size = par.tensor_parallel * par.context_parallel
        if world % mp_size:
            raise ValueError(
                f"world size {world} is not a multiple of backend.parallel.tensor_parallel="
                f"{par.tensor_parallel} x context_parallel={par.context_parallel}"
            )
        shim.init_distributed(par.tensor_parallel, 1, par.context_parallel, device=device)
        self.gpt = model.build_model(self.hf_config, par, DTYPES[dtype], device, self.opts)
        self.model = CausalLMView(self.gpt)
        self.optimizer: MainWeightsAdamW | None = None  # built on the loaded weights, below
        self.load_hf_state(read_hf_weights(self.model_path))
        o = self.optim_cfg
        if o.frozen:
            raise NotImplementedError(
                "backend.optim.frozen: only the hf backend freezes parameters so far"
            )
        self.optimizer = MainWeightsAdamW(
            list(self.gpt.named_parameters()),
            o,
            shard=self.opts.distributed_optimizer,
            dp=dp_info(),
        )

    @classmethod
    def from_config(cls, cfg: Any) -> MegatronBackend:
        """From a TrainConfig (backend.parallel, when the config has it, else TP = PP = CP = 1;
        DP is what remains of the world: its size / (TP x CP))."""
        return cls(
            cfg.model.path,
            optim=cfg.backend.optim,
            algo=cfg.algo,
            temperature=cfg.rollout.temperature,
            dtype=cfg.model.dtype,
            parallel=getattr(cfg.backend, "parallel", None),
            options=getattr(cfg.backend, "megatron", None),
            device=cfg.model.device,
        )

    # -- weights ---------------------------------------------------------------------------------
    def load_hf_state(self, hf_sd: dict[str, torch.Tensor]) -> None:
        """HF-named weights into this rank's shard (and its main weights); the optimizer's
        moments are left as they are."""
        full = mapping.hf_to_megatron(hf_sd, self.dims)
        rank, size, _ = tp_info()
        model.load_megatron_state(self.gpt, mapping.tp_shard(full, rank, size))
        if self.optimizer is not None:  # mixed precision: the main weights follow
            self.optimizer.refresh_main()

    def state_dict(self) -> dict[str, torch.Tensor]:
        """HF names (lm_head.weight included, the embedding when tied); TP shards gathered, so
        collective within the TP group. The same on every DP rank (they step identically)."""
        local = model.megatron_params(self.gpt)
        rank, size, group = tp_info()
        if size > 1:
            shards = [{} for _ in range(size)]
            for name, t in local.items():
                parts = [torch.empty_like(t) for _ in range(size)]
                dist.all_gather(parts, t.contiguous(), group=group)
                for s, p in zip(shards, parts, strict=True):
                    s[name] = p
            local = mapping.tp_merge(shards)
        return mapping.megatron_to_hf(local, self.dims)

    def iter_hf_weights(self) -> Iterator[tuple[str, torch.Tensor]]:
        """(HF name, full tensor) one parameter at a time, for an engine's load-weights path:
        each TP-sharded parameter is all-gathered in its TP group as it comes, so at most one
        full tensor (and its HF split) is alive beside the model. Collective under TP: every
        rank of the group must iterate it to the end, in step."""
        rank, size, group = tp_info()
        for name, t in model.megatron_params(self.gpt).items():
            if size > 1 and mapping.is_tp_sharded(name):
                parts = [torch.empty_like(t) for _ in range(size)]
                dist.all_gather(parts, t.contiguous(), group=group)
                t = mapping.tp_merge_one(name, parts)
            yield from mapping.megatron_tensor_to_hf(name, t, self.dims)

    # -- forward / step --------------------------------------------------------------------------
    def _micro(self, share: slice) -> list[slice]:
        """The rows of `share` in micro-batches of micro_batch_size."""
        m = self.optim_cfg.micro_batch_size
        return [slice(s, min(s + m, share.stop)) for s in range(share.start, share.stop, m)]

    def _logprobs(self, ids: torch.Tensor, attn: torch.Tensor, entropy: bool):
        """ids, attn [b, w] -> (logprobs [b, w], entropy [b, w] or None), 0 at t = 0 and padding."""
        ids, attn, w = ids.to(self.device), attn.to(self.device), ids.shape[1]
        pad = -w % self.par.tensor_parallel if self.opts.sequence_parallel else 0
        if pad:  # sequence parallelism splits the sequence over TP ranks: right-pad (causal)
            ids = torch.nn.functional.pad(ids, (0, pad))
        logits = model.forward_logits(self.gpt, ids)
        lp, ent = vocab_parallel_logprobs(logits, ids, self.temperature, entropy)
        zero = torch.zeros((ids.shape[0], 1), dtype=torch.float32, device=self.device)
        m = attn.to(torch.float32)
        lp = torch.cat([zero, lp], dim=1)[:, :w] * m
        return lp, (torch.cat([zero, ent], dim=1)[:, :w] * m if ent is not None else None)

    def forward_logprobs(
        self, batch: RolloutBatch, positions: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Collective: each DP rank computes its share of rows, summed over DP so that every
        rank returns the full [B, T]."""
        # The vocab-parallel head runs at every position here (its logits are sharded over
        # tensor-parallel ranks); `positions` only zeroes the rest, as the Protocol says.
        self.gpt.eval()
        dp_rank, dp_size, dp_group = dp_info()
        out = torch.zeros(batch.input_ids.shape, dtype=torch.float32, device=self.device)
        with torch.no_grad():
            for rows in self._micro(dp_share(len(batch), dp_rank, dp_size)):
                w = _width(batch, rows)
                lp, _ = self._logprobs(
                    batch.input_ids[rows, :w], batch.attention_mask[rows, :w], False
                )
                out[rows, :w] = lp
        if dp_size > 1:  # other ranks' rows are 0 here, so the sum is exact
            dist.all_reduce(out, group=dp_group)
        out = out.cpu()
        return out if positions is None else torch.where(positions.bool(), out, 0.0)

    def train_step(self, batch: UpdateBatch) -> StepStats:
        """Collective. This DP rank's rows, micro-batch by micro-batch; the loss divides by the
        whole batch's denominator, so summing gradients and metric sums over DP gives the
        full batch's. Then clip by the global norm and step, identically on every rank."""
        self.gpt.train()
        self.optimizer.zero_grad()
        dp_rank, dp_size, dp_group = dp_info()
        # loss, clipfrac * k, approx_kl * k, entropy
        sums = torch.zeros(4, dtype=torch.float64, device=self.device)
        for rows in self._micro(dp_share(len(batch.rollout), dp_rank, dp_size)):
            sums += self._micro_step(batch, rows)
        grads = self.optimizer.grads()  # fp32
        if dp_size > 1:
            grads = sum_grads_over(grads, self.optimizer.params, dp_group)
            dist.all_reduce(sums, group=dp_group)
        norm = self._finalize_and_clip(grads)
        skipped = not _finite_below(norm, self.optim_cfg.skip_grad_norm)
        if not skipped:
            self.optimizer.step(grads)
        self.optimizer.zero_grad()
        n_tok = int(batch.loss_mask.sum().item())
        loss, clip, kl, ent = (float(x) for x in sums)
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

    def _micro_step(self, batch: UpdateBatch, rows: slice) -> torch.Tensor:
        """Forward + backward of `rows`; returns their metric sums [4] float64."""
        rb, a, w = batch.rollout, self.algo, _width(batch.rollout, rows)
        cut = lambda x: x[rows, :w].to(self.device)  # noqa: E731
        mask = cut(batch.loss_mask)
        lp, ent = self._logprobs(cut(rb.input_ids), cut(rb.attention_mask), True)
        loss, m = ppo_clip_loss(
            lp,
            cut(rb.old_logprobs),
            cut(batch.advantages),
            mask,
            a.eps_low,
            a.eps_high,
            a.loss_agg,
            a.loss_constant,
            batch.denominator,
        )
        loss.backward()
        k = float(mask.sum().item())  # metrics are token means: weight by tokens
        assert ent is not None
        return torch.tensor(
            [
                float(loss.detach()),
                float(m.clipfrac) * k,
                float(m.approx_kl) * k,
                float((ent * mask).sum()),
            ],
            dtype=torch.float64,
            device=self.device,
        )

    def _finalize_and_clip(self, grads: list[torch.Tensor | None]) -> float:
        """Sum TP-partial gradients, then clip `grads` (fp32, in parameter order) in place by the
        global norm; returns the norm before clipping.

        QK-layernorm weights are replicated but each TP rank only sees its own heads, so their
        gradients are partial sums (megatron's finalize_model_grads all-reduces them too). Runs
        after the DP sum: every DP rank then holds the same gradients, so the squared norm of the
        sharded ones is summed over the TP group only and the norm is the single-process one."""
        named = [(n, g) for n, g in zip(self.optimizer.names, grads, strict=True) if g is not None]
        if not named:
            return 0.0
        _, size, group = tp_info()
        gs = [g for _, g in named]
        if size == 1:  # the computation torch's clip_grad_norm_ (and so the hf backend) does
            total = torch.nn.utils.get_total_norm(gs)
            coef = torch.clamp(self.optim_cfg.grad_clip / (total + 1e-6), max=1.0)
            torch._foreach_mul_(gs, coef)
            return float(total)
        for n, g in named:
            if "q_layernorm" in n or "k_layernorm" in n:
                dist.all_reduce(g, group=group)
        # Which parameters are TP-sharded, by name (mapping.py): megatron only tags them
        # (`tensor_model_parallel`) inside its weight initialisation, which we skip.
        split = [mapping.is_tp_sharded(n) for n, _ in named]
        zero = torch.zeros((), device=self.device)
        sharded = sum((g.pow(2).sum() for g, s in zip(gs, split, strict=True) if s), zero)
        replicated = sum((g.pow(2).sum() for g, s in zip(gs, split, strict=True) if not s), zero)
        sq = sharded.clone()
        dist.all_reduce(sq, group=group)
        norm = float((sq + replicated).sqrt())
        coef = min(self.optim_cfg.grad_clip / (norm + 1e-6), 1.0)
        if coef < 1.0 and _finite_below(norm, float("inf")):
            for g in gs:
                g.mul_(coef)
        return norm

    # -- checkpoints -----------------------------------------------------------------------------
    def save(self, directory: Path) -> None:
        """Collective. dist/ + rng_rank{r}.pt: the sharded training state, each rank writing its
        own shards (checkpoint.py); model/: the HF export (config.json + model.safetensors,
        gathered over TP, written by global rank 0) that engines and publishing read. Every rank
        passes the same `directory` (a filesystem they share); returns when all have written."""
        from safetensors.torch import save_file

        directory = Path(directory)
        hf_sd = self.state_dict()  # collective under TP: every rank calls it
        if dist.get_rank() == 0:
            out = directory / "model"
            out.mkdir(parents=True, exist_ok=True)
            self.hf_config.save_pretrained(out)
            if self.dims.tied:  # shared tensor: HF writes it once, under the embedding's name
                hf_sd = {k: v for k, v in hf_sd.items() if k != "lm_head.weight"}
            save_file(
                {k: v.contiguous().cpu() for k, v in hf_sd.items()},
                out / "model.safetensors",
                metadata={"format": "pt"},
            )
            for name in _COPIED:
                if (self.model_path / name).exists():
                    shutil.copy(self.model_path / name, out / name)
        del hf_sd
        directory.mkdir(parents=True, exist_ok=True)
        checkpoint.save(self, directory)

    def load(self, directory: Path) -> None:
        """Collective: what `save` wrote (dist/, the sharded state), on a world of any TP x DP
        layout; exact (RNG streams included) on the layout that saved it."""
        checkpoint.load(self, Path(directory))


def read_hf_weights(path: Path) -> dict[str, torch.Tensor]:
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
