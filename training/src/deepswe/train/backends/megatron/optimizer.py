"""AdamW over fp32 main weights, optionally sharded over the data-parallel ranks.

Mixed precision (model.dtype bfloat16 or float16): the parameters keep their dtype for forward and
backward; each has an fp32 main copy that AdamW updates and copies back, and its gradient is
accumulated in fp32 across micro-batches (`main_grad`, as megatron-core's DDP does), so updates
smaller than a bf16 step are not lost. A float32 parameter (all of them in a float32 model;
megatron keeps its norm weights in float32 in a bf16 model too) is its own main weight.

Distributed optimizer (`backend.megatron.distributed_optimizer`, ZeRO stage 1): each parameter is
owned by one DP rank (whole parameters, balanced by size); only its owner keeps the main weight and
the AdamW moments (12 bytes a parameter / DP instead of 12) and steps it, then broadcasts the new
value to the other DP ranks. megatron-core's DistributedOptimizer does the same over flat buffers
that it allocates with torch.cuda; this one runs on gloo as on NCCL, so CPU tests cover it.
Elementwise AdamW on an owner gives the bits the unsharded optimizer gives (tested).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from deepswe.train.backends import OptimConfig

MOMENTS = ("exp_avg", "exp_avg_sq")


def owners(numels: list[int], ranks: int) -> list[int]:
    """The DP rank owning each parameter: largest first, each to the least-loaded rank (lowest
    rank on ties). Deterministic, so every rank computes the same map."""
    load = [0] * ranks
    out = [0] * len(numels)
    for i in sorted(range(len(numels)), key=lambda i: (-numels[i], i)):
        r = min(range(ranks), key=lambda r: (load[r], r))
        out[i], load[r] = r, load[r] + numels[i]
    return out


class MainWeightsAdamW:
    """torch AdamW on fp32 main weights of `named` parameters (this rank's share when sharded).

    The backend's step: zero_grad(); micro-batch backwards; grads() -> fp32 gradients (None
    where a parameter got none); the DP sum and clipping on those tensors; step(grads)."""

    def __init__(
        self,
        named: list[tuple[str, torch.nn.Parameter]],
        optim: OptimConfig,
        *,
        shard: bool = False,
        dp: tuple[int, int, Any] = (0, 1, None),
    ) -> None:
        self.names = [n for n, _ in named]
        self.params = [p for _, p in named]
        self.mixed = any(p.dtype != torch.float32 for p in self.params)
        self.dp_rank, dp_size, self.dp_group = dp
        sharded = shard and dp_size > 1
        self.owner = owners([p.numel() for p in self.params], dp_size) if sharded else None
        self.mine = [i for i in range(len(self.params)) if self._owns(i)]
        # owned parameters whose main weight is a separate fp32 copy
        self.copies = {i for i in self.mine if self.params[i].dtype != torch.float32}
        self.main: dict[int, torch.Tensor] = {}
        self.refresh_main()
        self.adam = torch.optim.AdamW(
            [self.main[i] for i in self.mine] or [torch.zeros(1)],
            lr=optim.lr,
            betas=optim.betas,
            eps=optim.adam_eps,
            weight_decay=optim.weight_decay,
        )
        self._main_grad: dict[int, torch.Tensor] = {}
        if self.mixed:
            index = {id(p): i for i, p in enumerate(self.params)}
            for p in self.params:
                p.register_post_accumulate_grad_hook(
                    lambda q, i=index[id(p)]: self._accumulate(i, q)
                )

    def _owns(self, i: int) -> bool:
        return self.owner is None or self.owner[i] == self.dp_rank

    def refresh_main(self) -> None:
        """Main weights from the parameters (after loading new weights into the model)."""
        for i in self.mine:
            p = self.params[i]
            if i not in self.copies:
                self.main[i] = p
            elif i in self.main:
                self.main[i].copy_(p.detach())
            else:
                self.main[i] = p.detach().float().clone()

    def _accumulate(self, i: int, p: torch.nn.Parameter) -> None:
        """Mixed precision: move each micro-batch's gradient into the fp32 main_grad."""
        g = p.grad.float()
        if i in self._main_grad:
            self._main_grad[i] += g
        else:
            self._main_grad[i] = g
        p.grad = None

    def zero_grad(self) -> None:
        self._main_grad = {}
        for p in self.params:
            p.grad = None

    def grads(self) -> list[torch.Tensor | None]:
        """This rank's fp32 gradients, in parameter order (the same tensors as .grad in fp32)."""
        if self.mixed:
            return [self._main_grad.get(i) for i in range(len(self.params))]
        return [p.grad for p in self.params]

    @torch.no_grad()
    def step(self, grads: list[torch.Tensor | None]) -> None:
        """One AdamW step on the owned main weights with `grads` (summed over DP, clipped; the
        same list on every DP rank), then the new values into the parameters on every rank."""
        for i in self.mine:
            self.main[i].grad = grads[i]
        self.adam.step()
        for i in self.mine:
            self.main[i].grad = None
            if i in self.copies and grads[i] is not None:
                self.params[i].copy_(self.main[i])
        if self.owner is not None:
            for i, p in enumerate(self.params):
                if grads[i] is not None:
                    src = dist.get_global_rank(self.dp_group, self.owner[i])
                    dist.broadcast(p.data, src=src, group=self.dp_group)

    # -- checkpoints -----------------------------------------------------------------------------
    def owned_state(self) -> dict[str, dict[str, torch.Tensor]]:
        """{parameter name: {"main"?, "exp_avg", "exp_avg_sq"}} for the parameters this rank
        owns and has stepped (fp32; "main" where it is a copy of a bf16 / fp16 parameter)."""
        out: dict[str, dict[str, torch.Tensor]] = {}
        for i in self.mine:
            st = self.adam.state.get(self.main[i])
            if not st:
                continue
            out[self.names[i]] = {k: st[k] for k in MOMENTS}
            if i in self.copies:
                out[self.names[i]]["main"] = self.main[i]
        return out

    def step_count(self) -> int:
        """AdamW steps taken (the same for every stepped parameter); 0 before the first."""
        steps = [float(st["step"]) for st in self.adam.state.values() if "step" in st]
        return int(max(steps, default=0))

    def load_owned_state(self, state: dict[str, dict[str, torch.Tensor]], steps: int) -> None:
        """What owned_state returned (same names; tensors of the same shapes) after `steps`."""
        by_name = {self.names[i]: i for i in self.mine}
        for name, st in state.items():
            main = self.main[by_name[name]]
            if "main" in st:
                main.copy_(st["main"])
            self.adam.state[main] = {
                "step": torch.tensor(float(steps)),
                **{k: st[k].to(torch.float32).clone() for k in MOMENTS},
            }

    def state_bytes(self) -> int:
        """Bytes of main weights (mixed) and moments this rank holds: the sharding's saving."""
        main = sum(self.main[i].numel() * 4 for i in self.copies)
        moments = sum(
            t.numel() * t.element_size()
            for st in self.adam.state.values()
            for k, t in st.items()
            if k in MOMENTS
        )
        return main + moments
