"""Run megatron-core on CPU over gloo: process groups, RNG tracker, and four narrow patches.

megatron-core is written for CUDA + NCCL. On CPU (the `tiny` profile, CI) these places break;
each patch below is the smallest one found, replaces megatron state only (never torch), and was
checked on megatron-core 0.16.1 with torch 2.13.0+cpu:

1. `parallel_state._GLOBAL_MEMORY_BUFFER`: `GlobalMemoryBuffer.get_tensor` allocates its scratch
   buffer with `device=torch.cuda.current_device()`; `DotProductAttention.forward` takes the
   baddbmm input from it. We install a subclass that allocates on CPU.
2. The RNG tracker (`tensor_parallel.random._CUDA_RNG_STATE_TRACKER`): `CudaRNGStatesTracker`
   stores and swaps `torch.cuda` generator states, and `DotProductAttention.forward` always enters
   `get_cuda_rng_tracker().fork()`. We install a tracker with the same interface over the CPU
   generator; `cpu_manual_seed` replaces `model_parallel_cuda_manual_seed` (same seed offsets).
3. `RotaryEmbedding.get_emb` moves `inv_freq` to `torch.cuda.current_device()` on first use.
   `cpu_rotary(module)` rebinds that one method on one model's rotary module (not the class).
4. Activation recomputation (`tensor_parallel.checkpoint`) saves and restores "all RNG states"
   through `_get_all_rng_states` / `_set_all_rng_states`, which read the CUDA generator. We
   install versions that keep the CPU generator and the tracker's states (the CUDA slot None).

On CUDA (`device="cuda"`) nothing is patched: NCCL groups, megatron's CudaRNGStatesTracker seeded
by `model_parallel_cuda_manual_seed`, the same model and loss code.

Not a patch: `get_default_causal_mask` builds its mask on "cuda" when no mask is given, so callers
pass an explicit CPU causal mask (model.causal_mask). Other CUDA-only paths (sequence parallel,
`_gather_along_*_dim`, cuda graphs, fused kernels) stay off through the TransformerConfig.
"""

from __future__ import annotations

import contextlib
import math
import os
import tempfile
import types
from collections.abc import Iterator

import torch
import torch.distributed as dist

MEGATRON_CORE_CHECKED = "0.16.1"


def init_distributed(
    tp: int = 1,
    pp: int = 1,
    cp: int = 1,
    *,
    rank: int = 0,
    world_size: int = 1,
    init_method: str | None = None,
    device: str = "cpu",
) -> None:
    """A process group (gloo on CPU, NCCL on CUDA; if none yet) and megatron's model-parallel
    groups, then (CPU only) the patches. On CUDA each process uses GPU LOCAL_RANK (torchrun's,
    Ray's placement sets it) or its rank modulo the GPUs it sees.

    Single process: a file:// rendezvous in a fresh temp dir (no port to collide on a shared CI
    box). Several processes pass the same `init_method` (e.g. file:///tmp/x or tcp://host:port),
    their own `rank` and the same `world_size`, or initialise torch.distributed themselves first.
    The world's remaining factor, world_size / (tp x pp x cp), is data parallelism: megatron
    forms those groups too (ranks r and r + tp x cp share a TP shard, in its tp-cp-ep-dp-pp order).
    Collective over the whole world: every rank calls it.
    """
    from megatron.core import parallel_state as ps

    if not dist.is_initialized():
        if init_method is None:
            if world_size != 1:
                raise ValueError("world_size > 1 needs an init_method shared by every rank")
            init_method = "file://" + os.path.join(tempfile.mkdtemp(prefix="mcore-"), "rdzv")
        backend = "nccl" if device == "cuda" else "gloo"
        dist.init_process_group(backend, init_method=init_method, rank=rank, world_size=world_size)
    if device == "cuda":
        local = os.environ.get("LOCAL_RANK")
        torch.cuda.set_device(int(local) if local else dist.get_rank() % torch.cuda.device_count())
    if ps.model_parallel_is_initialized():
        have = (
            ps.get_tensor_model_parallel_world_size(),
            ps.get_pipeline_model_parallel_world_size(),
            ps.get_context_parallel_world_size(),
        )
        if have != (tp, pp, cp):
            raise RuntimeError(f"megatron already initialised with (tp, pp, cp) = {have}")
    else:
        ps.initialize_model_parallel(
            tensor_model_parallel_size=tp,
            pipeline_model_parallel_size=pp,
            context_parallel_size=cp,
        )
    if device == "cpu":
        ps._GLOBAL_MEMORY_BUFFER = _cpu_memory_buffer()  # patch 1
        _install_cpu_rng_tracker()  # patch 2
        _install_cpu_rng_snapshots()  # patch 4


def destroy() -> None:
    """Tear down megatron's groups and the process group (tests, or a backend's close)."""
    from megatron.core import parallel_state as ps

    ps.destroy_model_parallel()
    if dist.is_initialized():
        dist.destroy_process_group()


def _cpu_memory_buffer():  # -> a megatron.core.utils.GlobalMemoryBuffer
    """Patch 1: a GlobalMemoryBuffer whose scratch tensors live on the CPU."""
    from megatron.core.utils import GlobalMemoryBuffer

    class CPUMemoryBuffer(GlobalMemoryBuffer):
        def get_tensor(self, tensor_shape, dtype, name, mem_alloc_context=None):  # noqa: ANN001
            n = math.prod(tensor_shape)
            buf = self.buffer.get((name, dtype))
            if buf is None or buf.numel() < n:
                buf = self.buffer[(name, dtype)] = torch.empty(n, dtype=dtype)
            return buf[:n].view(*tensor_shape)

    return CPUMemoryBuffer()


class CPURNGStatesTracker:
    """Patch 2: megatron's CudaRNGStatesTracker interface over the CPU default generator.

    `fork(name)` swaps the named state in, runs the block, saves the advanced state back and
    restores the caller's state: dropout inside TP regions draws from a per-TP-rank stream.
    """

    def __init__(self) -> None:
        self.states_: dict[str, torch.Tensor] = {}
        self.seeds_: set[int] = set()

    def is_initialized(self) -> bool:
        return bool(self.states_)

    def reset(self) -> None:
        self.states_, self.seeds_ = {}, set()

    def get_states(self) -> dict[str, torch.Tensor]:
        return {k: v.clone() for k, v in self.states_.items()}

    def set_states(self, states: dict[str, torch.Tensor]) -> None:
        self.states_ = dict(states)

    def add(self, name: str, seed: int) -> None:
        if seed in self.seeds_ or name in self.states_:
            raise ValueError(f"rng state {name!r} / seed {seed} already added")
        self.seeds_.add(seed)
        g = torch.Generator().manual_seed(seed)
        self.states_[name] = g.get_state()

    @contextlib.contextmanager
    def fork(self, name: str = "model-parallel-rng") -> Iterator[None]:
        if name not in self.states_:
            raise KeyError(f"rng state {name!r} is not added")
        orig = torch.get_rng_state()
        torch.set_rng_state(self.states_[name])
        try:
            yield
        finally:
            self.states_[name] = torch.get_rng_state()
            torch.set_rng_state(orig)


def _install_cpu_rng_tracker() -> None:
    from megatron.core.tensor_parallel import random as mrandom

    if not isinstance(mrandom._CUDA_RNG_STATE_TRACKER, CPURNGStatesTracker):
        mrandom._CUDA_RNG_STATE_TRACKER = CPURNGStatesTracker()
        mrandom._CUDA_RNG_STATE_TRACKER_INITIALIZED = True


def _install_cpu_rng_snapshots() -> None:
    """Patch 4: recomputation's RNG snapshot without the CUDA generator."""
    from megatron.core.tensor_parallel import random as mrandom

    def get_all():  # noqa: ANN202
        return torch.get_rng_state(), None, mrandom.get_cuda_rng_tracker().get_states()

    def set_all(cpu_state, _cuda_state, tracker_states) -> None:  # noqa: ANN001
        torch.set_rng_state(cpu_state)
        mrandom.get_cuda_rng_tracker().set_states(tracker_states)

    mrandom._get_all_rng_states, mrandom._set_all_rng_states = get_all, set_all


def cpu_manual_seed(seed: int) -> None:
    """model_parallel_cuda_manual_seed on CPU: same stream names and seed offsets (0.16.1).

    Megatron's version also reseeds the default CUDA generator; the CPU default generator is
    torch's global one, which a backend constructor should not reset, so it is left alone."""
    from megatron.core import parallel_state as ps
    from megatron.core.tensor_parallel import random as mrandom

    _install_cpu_rng_tracker()
    tracker = mrandom._CUDA_RNG_STATE_TRACKER
    tracker.reset()
    tp_rank = ps.get_tensor_model_parallel_rank()
    tracker.add(mrandom._DATA_PARALLEL_RNG_TRACKER_NAME, seed)
    tracker.add(mrandom._MODEL_PARALLEL_RNG_TRACKER_NAME, seed + 2718 + tp_rank)
    ep = ps.get_expert_model_parallel_rank()
    etp = ps.get_expert_tensor_parallel_rank()
    tracker.add(mrandom._EXPERT_PARALLEL_RNG_TRACKER_NAME, seed + 1024 + 100 * ep + etp)


def _cpu_get_emb(self, max_seq_len: int, offset: int = 0) -> torch.Tensor:
    """RotaryEmbedding.get_emb (0.16.1) without the move of inv_freq to CUDA: [s, 1, 1, dim]."""
    freqs = self.get_freqs_non_repeated(max_seq_len, offset)
    if self.rotary_interleaved:
        emb = torch.stack((freqs.view(-1, 1), freqs.view(-1, 1)), dim=-1).view(freqs.shape[0], -1)
    else:
        emb = torch.cat((freqs, freqs), dim=-1)
    return emb[:, None, None, :]


def cpu_rotary(rotary_module: torch.nn.Module) -> None:
    """Patch 3, on one module instance: its get_emb stays on the CPU."""
    rotary_module.get_emb = types.MethodType(_cpu_get_emb, rotary_module)
