"""Sharded checkpoints of the megatron backend: each rank writes its own shards, in parallel.

    <dir>/dist/          torch.distributed.checkpoint (DCP): *.distcp + .metadata
    <dir>/dist/layout.json   dtype, TP, DP, distributed optimizer, AdamW steps, format version
    <dir>/rng_rank{r}.pt torch / python / megatron RNG streams of global rank r

What is saved: every parameter as its TP shard (a DTensor over the TP group: column-parallel
weights Shard(0), row-parallel Shard(1), norms Replicate; the fused GLU weight as two tensors,
`.gate` and `.up`, since a rank holds [gate_r; up_r]), and the AdamW moments (and fp32 main
weights in mixed precision) of the parameters this rank owns, sharded the same way. DP replicas
write the same chunks; DCP keeps one. Nothing is gathered to one rank, so a 32B checkpoint costs
each GPU its own shard's bytes, and the files can be read back by a world of another TP or DP
size (DCP reshards: tested from TP 2 to TP 1 x DP 2 with the distributed optimizer).

megatron-core's own dist_checkpointing writes DCP too (its `torch_dist` format), but its writer
and shard metadata are CUDA-only (`torch.cuda.synchronize`, placements "cuda"), so the sharding
is described here with torch's DTensor and runs on gloo as on NCCL.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from deepswe.train.backends.megatron import mapping

FORMAT = 1


def _mesh(group: Any):  # -> DeviceMesh over the TP group
    from torch.distributed.device_mesh import DeviceMesh

    device = "cuda" if torch.cuda.is_available() and dist.get_backend(group) == "nccl" else "cpu"
    return DeviceMesh.from_group(group, device)


def _pieces(name: str, local: torch.Tensor) -> list[tuple[str, torch.Tensor, int | None]]:
    """(key, tensor, TP split dim or None) of one parameter's local shard; views, not copies."""
    if name.endswith("linear_fc1.weight"):  # [gate_r; up_r]: two TP-sharded tensors
        gate, up = local.chunk(2, dim=0)
        return [(name + ".gate", gate, 0), (name + ".up", up, 0)]
    return [(name, local, mapping.tp_split_dim(name))]


def _dtensors(prefix: str, tensors: dict[str, torch.Tensor], mesh: Any) -> dict[str, Any]:
    from torch.distributed.tensor import DTensor, Replicate, Shard

    out = {}
    for name, t in tensors.items():
        for key, piece, dim in _pieces(name, t):
            placement = Replicate() if dim is None else Shard(dim)
            out[prefix + key] = DTensor.from_local(piece, mesh, [placement], run_check=False)
    return out


def _state(backend: Any, mesh: Any, owned: dict[str, dict[str, torch.Tensor]]) -> dict[str, Any]:
    """The DCP state dict: DTensors over this rank's parameters and over `owned` (optimizer state
    by parameter name), sharing their storage, so a load fills them in place."""
    params = dict(zip(backend.optimizer.names, backend.optimizer.params, strict=True))
    sd = _dtensors("model.", {n: p.data for n, p in params.items()}, mesh)
    for name, st in owned.items():
        sd.update(_dtensors("optim.", {f"{k}.{name}": t for k, t in st.items()}, mesh))
    return sd


def layout(backend: Any) -> dict[str, Any]:
    from deepswe.train.backends.megatron.groups import dp_info, tp_info

    return {
        "format": FORMAT,
        "dtype": str(backend.gpt.config.params_dtype).removeprefix("torch."),
        "tensor_parallel": tp_info()[1],
        "data_parallel": dp_info()[1],
        "distributed_optimizer": backend.optimizer.owner is not None,
        "adam_steps": backend.optimizer.step_count(),
    }


def save(backend: Any, directory: Path) -> None:
    """Collective over the world: every rank passes the same `directory` on a shared filesystem."""
    import torch.distributed.checkpoint as dcp
    from megatron.core.tensor_parallel import random as mrandom

    from deepswe.train.backends.megatron.groups import tp_info

    directory = Path(directory)
    sd = _state(backend, _mesh(tp_info()[2]), backend.optimizer.owned_state())
    dcp.save(sd, checkpoint_id=directory / "dist")
    if dist.get_rank() == 0:
        (directory / "dist" / "layout.json").write_text(json.dumps(layout(backend), indent=1))
    rng = {
        "torch": torch.get_rng_state(),
        "python": random.getstate(),
        "megatron": mrandom.get_cuda_rng_tracker().get_states(),
    }
    torch.save(rng, directory / f"rng_rank{dist.get_rank()}.pt")
    dist.barrier()


def load(backend: Any, directory: Path) -> dict[str, Any]:
    """Collective: what `save` wrote, into this world's layout (resharded when TP or DP differ).

    The RNG streams are restored only on the layout that saved them (same TP and DP): on another
    the run continues exactly in weights and optimizer state, not in sampling. Returns the saved
    layout. A checkpoint of another dtype is refused, naming both."""
    import torch.distributed.checkpoint as dcp
    from megatron.core.tensor_parallel import random as mrandom

    from deepswe.train.backends.megatron.groups import tp_info

    directory = Path(directory)
    saved = json.loads((directory / "dist" / "layout.json").read_text())
    here = layout(backend)
    if saved["dtype"] != here["dtype"]:
        raise ValueError(
            f"{directory}: saved with model.dtype {saved['dtype']}, this run has {here['dtype']}"
        )
    opt = backend.optimizer
    # Targets for the owned state: the moments (and main weights) this rank will own.
    targets = {
        opt.names[i]: {
            **{k: torch.zeros_like(opt.main[i]) for k in ("exp_avg", "exp_avg_sq")},
            **({"main": opt.main[i]} if i in opt.copies else {}),
        }
        for i in opt.mine
    }
    stored = set(dcp.FileSystemReader(directory / "dist").read_metadata().state_dict_metadata)
    mesh_sd = _state(backend, _mesh(tp_info()[2]), targets)  # loaded in place
    missing = [k for k in mesh_sd if k.startswith("model.") and k not in stored]
    if missing:
        raise ValueError(
            f"{directory}: {len(missing)} of this model's weights are not in the "
            f"checkpoint (first: {missing[0][6:]!r}): another model's?"
        )
    mesh_sd = {k: v for k, v in mesh_sd.items() if k in stored}
    dcp.load(mesh_sd, checkpoint_id=directory / "dist")
    has = lambda key: key in stored or key + ".gate" in stored  # noqa: E731
    with torch.no_grad():
        for i in opt.copies:  # a main weight never stepped is its parameter's value
            if not has(f"optim.main.{opt.names[i]}"):
                opt.main[i].copy_(opt.params[i].detach())
        stepped = {n: st for n, st in targets.items() if has(f"optim.exp_avg.{n}")}
        opt.load_owned_state(stepped, saved["adam_steps"])
    same = all(saved[k] == here[k] for k in ("tensor_parallel", "data_parallel"))
    rng_file = directory / f"rng_rank{dist.get_rank()}.pt"
    if same and rng_file.exists():
        rng = torch.load(rng_file, weights_only=False)
        torch.set_rng_state(rng["torch"])
        random.setstate(rng["python"])
        mrandom.get_cuda_rng_tracker().set_states(rng["megatron"])
    return saved
