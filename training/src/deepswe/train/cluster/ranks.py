"""Trainer ranks as Ray actors: a TrainingBackend whose every call runs on all of them.

    trainer (driver) --batch (object store, put once)--> TrainerRank x world (one gloo group)
                     <--rank 0's result-----------------

Each `TrainerRank` joins one gloo process group and builds the configured backend, as
`Trainer.setup` would in-process; the backend splits the work between the ranks (megatron:
TP x CP shards, DP shares of the rows) and every rank returns the same result. `RankedBackend`
is the `TrainingBackend` the trainer sees: it makes each call on every rank (their collectives
need all of them, in the same order), waits for all, and returns rank 0's.

Rendezvous: `file` (a path in a fresh temp dir: one machine or a shared filesystem) or `tcp`
(rank 0's node IP and a free port, asked of the rank-0 actor itself before the group forms, so
it works across nodes). A checkpoint directory must be one that every rank can write (one
machine or a shared filesystem): rank 0 writes the model, every rank its RNG state.
"""

from __future__ import annotations

import shutil
import socket
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from deepswe.train.backends import StepStats, UpdateBatch
from deepswe.train.cluster import require_ray
from deepswe.train.plugins import build_backend
from deepswe.train.rollout import RolloutBatch

if TYPE_CHECKING:
    from deepswe.train.config import TrainConfig

RENDEZVOUS = ("file", "tcp")


class TrainerRank:
    """Rank `rank` of `world`; run as a Ray actor (`ray.remote(TrainerRank)`). Joins the gloo
    group at `init_method` and builds the backend; with `init_method` None it waits for `join`
    (the tcp rendezvous: rank 0 is asked its `address()` first)."""

    def __init__(
        self, cfg: TrainConfig, rank: int, world: int, init_method: str | None, threads: int = 1
    ) -> None:
        torch.set_num_threads(threads)  # Ray does not pin cores: as many threads as CPUs reserved
        self.cfg, self.rank, self.world = cfg, rank, world
        self.backend: Any = None
        self.failed: BaseException | None = None  # join's error, raised again by ready()
        if init_method is not None:
            self.join(init_method)

    def address(self) -> str:
        """tcp://<this node's IP>:<a port free now>, for rank 0 to serve the rendezvous on. The
        port is closed again until `join` binds it: should another process take it in between,
        join fails and `ready()` says so."""
        with socket.socket() as s:
            s.bind(("", 0))
            port = s.getsockname()[1]
        return f"tcp://{require_ray().util.get_node_ip_address()}:{port}"

    def join(self, init_method: str) -> None:
        """Form the group (blocks until every rank has joined), then build the backend."""
        import torch.distributed as dist

        try:
            nccl = str(self.cfg.model.device).startswith("cuda")  # one GPU a rank (Ray's)
            dist.init_process_group(
                "nccl" if nccl else "gloo",
                init_method=init_method,
                rank=self.rank,
                world_size=self.world,
            )
            self.backend = build_backend(self.cfg)
        except BaseException as e:  # a join called without waiting for it (rank 0, tcp)
            self.failed = e
            raise

    def ready(self) -> str:
        """The backend's name once built; join's error if it failed."""
        if self.failed is not None:
            raise self.failed
        return self.backend.name

    def forward_logprobs(self, batch: RolloutBatch, positions: torch.Tensor | None) -> Any:
        return self.backend.forward_logprobs(batch, positions=positions)

    def train_step(self, batch: UpdateBatch) -> StepStats:
        return self.backend.train_step(batch)

    def state_dict(self, reply: bool = True) -> dict[str, torch.Tensor] | None:
        """Collective under TP; with `reply` False the rank keeps its copy (the driver takes
        rank 0's: a 32B state dict from every rank would be world x 64 GB of traffic)."""
        sd = self.backend.state_dict()
        return sd if reply else None

    def save(self, directory: str) -> None:
        self.backend.save(Path(directory))

    def load(self, directory: str) -> None:
        self.backend.load(Path(directory))


def launch(
    cfg: TrainConfig,
    options: list[dict[str, Any]],
    rendezvous: str,
    threads: int = 1,
    timeout_s: float = 600.0,
    actor_class: type | None = None,
) -> tuple[list[Any], Path | None]:
    """Start one TrainerRank actor (or `actor_class`, a subclass: hybrid.HybridRank) per entry
    of `options` (Ray actor options: CPUs, placement); returns the actors (they join the group
    and build the backend in the background) and the temp dir a file rendezvous made (None for
    tcp). Wait on their `ready()`."""
    ray = require_ray()
    if rendezvous not in RENDEZVOUS:
        raise ValueError(f"rendezvous {rendezvous!r}: want one of {RENDEZVOUS}")
    world, actor = len(options), ray.remote(actor_class or TrainerRank)

    def rank(r: int, init: str | None) -> Any:
        return actor.options(**options[r]).remote(cfg, r, world, init, threads)

    if rendezvous == "file":
        tmp = Path(tempfile.mkdtemp(prefix="deepswe-rdzv-"))
        return [rank(r, f"file://{tmp / 'rdzv'}") for r in range(world)], tmp
    first = rank(0, None)
    try:
        init = ray.get(first.address.remote(), timeout=timeout_s)
    except ray.exceptions.GetTimeoutError:
        ray.kill(first)
        raise RuntimeError(f"trainer rank 0 did not start within {timeout_s:g} s") from None
    first.join.remote(init)  # runs before any later call to rank 0 (an actor's calls are ordered)
    return [first, *(rank(r, init) for r in range(1, world))], None


class RankedBackend:
    """`TrainingBackend` over TrainerRank actors (rank r at index r): every call goes to all
    ranks, the batch put in the object store once; rank 0's result comes back. A call that has
    not finished on every rank within `timeout_s` raises RuntimeError naming the ranks."""

    def __init__(
        self, actors: list[Any], name: str, timeout_s: float = 600.0, tmp: Path | None = None
    ) -> None:
        self.actors, self.name, self.timeout_s, self._tmp = actors, name, timeout_s, tmp

    @classmethod
    def start(
        cls,
        cfg: TrainConfig,
        options: list[dict[str, Any]],
        rendezvous: str = "file",
        threads: int = 1,
        timeout_s: float = 600.0,
    ) -> RankedBackend:
        """Launch the ranks and wait until every one has built its backend."""
        actors, tmp = launch(cfg, options, rendezvous, threads, timeout_s)
        ranked = cls(actors, "", timeout_s, tmp)
        try:
            ranked.name = ranked.call("ready")
        except BaseException:
            ranked.close()
            raise
        return ranked

    def call(self, method: str, *args: Any, rank0_args: tuple[Any, ...] | None = None) -> Any:
        """`method(*args)` on every rank (rank 0 gets `rank0_args` when given); rank 0's result.
        A rank that failed raises RuntimeError naming it, as soon as it has failed. After any
        error the group is broken (the other ranks may wait in a collective): close()."""
        ray = require_ray()
        refs = [
            getattr(a, method).remote(*(rank0_args if r == 0 and rank0_args else args))
            for r, a in enumerate(self.actors)
        ]
        rank_of = {ref: r for r, ref in enumerate(refs)}
        pending, deadline, first = list(refs), time.monotonic() + self.timeout_s, None
        while pending:
            done, pending = ray.wait(pending, timeout=max(deadline - time.monotonic(), 0.0))
            if not done:
                late = sorted(rank_of[ref] for ref in pending)
                raise RuntimeError(
                    f"{method}: rank(s) {late} of {len(refs)} did not answer within "
                    f"{self.timeout_s:g} s (a rank stuck in a collective waits for the others)"
                )
            for ref in done:
                try:
                    out = ray.get(ref)
                except ray.exceptions.RayError as e:
                    raise RuntimeError(f"{method} failed on rank {rank_of[ref]}: {e}") from e
                if rank_of[ref] == 0:
                    first = out
        return first

    # -- TrainingBackend -------------------------------------------------------------------------
    def forward_logprobs(
        self, batch: RolloutBatch, positions: torch.Tensor | None = None
    ) -> torch.Tensor:
        ray = require_ray()
        return self.call("forward_logprobs", ray.put(batch), ray.put(positions))

    def train_step(self, batch: UpdateBatch) -> StepStats:
        return self.call("train_step", require_ray().put(batch))

    def state_dict(self) -> dict[str, torch.Tensor]:
        return self.call("state_dict", False, rank0_args=(True,))

    def save(self, directory: Path) -> None:
        """Every rank into `directory` (absolute: a remote worker's cwd is not the driver's)."""
        self.call("save", str(Path(directory).resolve()))

    def load(self, directory: Path) -> None:
        self.call("load", str(Path(directory).resolve()))

    def close(self) -> None:
        """Kill the rank actors (idempotent); remove a file rendezvous's temp dir."""
        ray = require_ray()
        for a in self.actors:
            ray.kill(a)
        self.actors = []
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
