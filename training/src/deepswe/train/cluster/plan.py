"""The placement plan: which GPUs and CPUs each part of a run gets, computed from the config.

Pure (no Ray, no hardware look-up), so a profile's layout is checked on any machine. On GPUs the
plan is colocated, as verl/rLLM's hybrid engine: the inference engines and the trainer's ranks
use the same GPUs in turn (rollout, then update), so every GPU serves both.

    deepswe-32b: 64 GPUs = 8 nodes x 8; 8 vLLM replicas of TP 8 (one a node);
                 trainer world 64 = TP 8 x PP 1 x CP 1 x DP 8

A CPU run has no GPUs to derive data parallelism from: `cluster.cpu_data_parallel` stands in for
it, and each trainer rank gets a bundle of `cluster.cpus_per_trainer_rank` CPUs of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from deepswe.train.config import TrainConfig

# (ours) CPUs reserved beside each GPU for the process driving it (engine server, trainer rank).
CPUS_PER_GPU = 1.0


@dataclass(frozen=True)
class Placement:
    """A run's layout. `gpus` 0 is a CPU run: one engine replica, no GPUs."""

    gpus: int  # in all; 0: CPU run
    nodes: int
    gpus_per_node: int  # GPUs used on each node (cluster.gpus when that is below a full node)
    engine_replicas: int
    engine_tp: int  # GPUs per engine replica, all on one node
    trainer_world: int  # trainer ranks
    trainer_tp: int
    trainer_pp: int
    trainer_cp: int
    trainer_dp: int
    colocated: bool  # engines and trainer ranks share the same GPUs
    rollout_workers: int
    cpus_per_rollout_worker: float
    cpus_per_trainer_rank: float = 1.0  # CPU runs: each rank actor's own bundle

    def bundles(self) -> list[dict[str, float]]:
        """One Ray bundle per GPU, node by node (GPU g on node g // gpus_per_node); a CPU run
        has one bundle, for the engine, or none when the engines live in the trainer ranks."""
        if self.gpus == 0:
            return [] if self.colocated else [{"CPU": 1.0}]
        return [{"GPU": 1.0, "CPU": CPUS_PER_GPU} for _ in range(self.gpus)]

    def engine_bundles(self, i: int) -> list[int]:
        """Indices into bundles() of engine replica i's GPUs (one node: a vLLM tensor-parallel
        group talks every layer, over NVLink)."""
        if not 0 <= i < self.engine_replicas:
            raise IndexError(f"engine replica {i}: the plan has {self.engine_replicas}")
        if self.gpus == 0:
            return [0]
        return list(range(i * self.engine_tp, (i + 1) * self.engine_tp))

    def engine_node(self, i: int) -> int:
        """The node engine replica i lives on."""
        return self.engine_bundles(i)[0] // self.gpus_per_node if self.gpus else 0

    def replica_bundles(self) -> list[dict[str, float]]:
        """What Ray reserves: bundles() merged per engine replica. Ray places an actor inside one
        bundle and never splits a bundle across nodes, so a merged bundle is both what lets one
        engine actor hold TP GPUs and what keeps them on one node."""
        if self.gpus == 0 and self.colocated:
            return []  # inside the trainer ranks' bundles
        out = []
        for i in range(self.engine_replicas):
            merged: dict[str, float] = {}
            for b in self.engine_bundles(i):
                for k, v in self.bundles()[b].items():
                    merged[k] = merged.get(k, 0.0) + v
            out.append(merged)
        return out

    @property
    def ranked(self) -> bool:
        """Whether the trainer runs as rank actors (else in the driver): a world above 1, or
        a CPU run whose engines live in the ranks."""
        return self.trainer_world > 1 or (self.colocated and self.gpus == 0)

    def trainer_bundles(self) -> list[dict[str, float]]:
        """One bundle per trainer-rank actor, reserved after replica_bundles(): CPU runs only.
        On GPUs the ranks take one GPU each inside the engines' bundles (rank_bundle)."""
        if self.gpus or not self.ranked:
            return []
        return [{"CPU": self.cpus_per_trainer_rank} for _ in range(self.trainer_world)]

    def rank_bundle(self, r: int) -> int:
        """The bundle trainer rank r is placed in: its own on CPU (after the engines'), on GPUs
        the engine replica's bundle holding GPU r (ranks and GPUs are numbered alike, node by
        node, so a TP group of the trainer shares its node and its engine's bundle)."""
        if not 0 <= r < self.trainer_world:
            raise IndexError(f"trainer rank {r}: the world is {self.trainer_world}")
        return r // self.engine_tp if self.gpus else len(self.replica_bundles()) + r

    def cpus(self) -> float:
        """Every CPU the plan asks Ray for: engine and trainer bundles, rollout workers."""
        reserved = self.replica_bundles() + self.trainer_bundles()
        return sum(b.get("CPU", 0.0) for b in reserved) + (
            self.rollout_workers * self.cpus_per_rollout_worker
        )

    def describe(self) -> str:
        """A few lines for people."""
        where = (
            f"{self.gpus} GPUs on {self.nodes} node(s) x {self.gpus_per_node}"
            + (", engines and trainer colocated" if self.colocated else "")
            if self.gpus
            else "CPU run (no GPUs)"
        )
        return "\n".join(
            [
                where,
                f"engine: {self.engine_replicas} replica(s) x TP {self.engine_tp}"
                + (", inside the trainer ranks" if self.colocated and not self.gpus else ""),
                f"trainer: world {self.trainer_world} = TP {self.trainer_tp} x PP {self.trainer_pp}"
                f" x CP {self.trainer_cp} x DP {self.trainer_dp}"
                + (
                    f", {self.cpus_per_trainer_rank:g} CPU a rank" if self.trainer_bundles() else ""
                ),
                f"rollout workers: {self.rollout_workers} x {self.cpus_per_rollout_worker:g} CPU",
            ]
        )


def placement_plan(cfg: TrainConfig) -> Placement:
    """The layout of TrainConfig `cfg`, or a ValueError naming the config field that breaks it."""
    cl, etp, par = cfg.cluster, cfg.engine.tensor_parallel, cfg.backend.parallel
    tp, pp, cp = par.tensor_parallel, par.pipeline_parallel, par.context_parallel
    workers = cl.rollout_workers or cfg.rollout.concurrency
    if cl.gpus == 0:
        # cpu_colocate may mirror a GPU plan's engines of TP x CP (each rank a full hf replica)
        if etp != 1 and not (cl.cpu_colocate and etp == tp * cp):
            raise ValueError(
                f"engine.tensor_parallel {etp} needs GPUs; cluster.gpus is 0 (with "
                f"cluster.cpu_colocate it may be TP x CP = {tp * cp}: the fan-out's stand-in)"
            )
        dp = cl.cpu_data_parallel
        if cl.cpu_colocate and cfg.backend.name != "megatron":
            raise ValueError(
                f"cluster.cpu_colocate: the engines live in trainer-rank actors, which run the "
                f"megatron backend; backend.name is {cfg.backend.name!r}"
            )
        return Placement(
            gpus=0,
            nodes=1,
            gpus_per_node=0,
            engine_replicas=dp if cl.cpu_colocate else 1,
            engine_tp=etp,
            trainer_world=tp * pp * cp * dp,
            trainer_tp=tp,
            trainer_pp=pp,
            trainer_cp=cp,
            trainer_dp=dp,
            colocated=cl.cpu_colocate,
            rollout_workers=workers,
            cpus_per_rollout_worker=cl.cpus_per_rollout_worker,
            cpus_per_trainer_rank=cl.cpus_per_trainer_rank,
        )
    if cl.cpu_colocate:
        raise ValueError("cluster.cpu_colocate is for CPU runs; a GPU plan always colocates")
    if cl.cpu_data_parallel != 1:
        raise ValueError(
            f"cluster.cpu_data_parallel {cl.cpu_data_parallel} is for CPU runs; with cluster.gpus "
            f"{cl.gpus} data parallelism is cluster.gpus / (TP x PP x CP)"
        )
    if cl.gpus > cl.gpus_per_node and cl.gpus % cl.gpus_per_node:
        raise ValueError(
            f"cluster.gpus {cl.gpus} is not a multiple of cluster.gpus_per_node {cl.gpus_per_node}"
        )
    per_node = min(cl.gpus, cl.gpus_per_node)  # a run smaller than a node uses part of one
    where = (
        f"cluster.gpus_per_node {cl.gpus_per_node}"
        if per_node == cl.gpus_per_node
        else f"cluster.gpus {cl.gpus} (one node)"
    )
    if per_node % etp:
        raise ValueError(
            f"engine.tensor_parallel {etp} must divide {where} "
            "(a vLLM tensor-parallel group lives on one node)"
        )
    if cl.gpus % (tp * pp * cp):
        raise ValueError(
            f"backend.parallel: TP*PP*CP = {tp * pp * cp} must divide cluster.gpus {cl.gpus}"
        )
    if per_node % tp:
        raise ValueError(
            f"backend.parallel.tensor_parallel {tp} must divide {where} "
            "(tensor-parallel ranks talk every layer: keep them on one node)"
        )
    return Placement(
        gpus=cl.gpus,
        nodes=cl.gpus // per_node,
        gpus_per_node=per_node,
        engine_replicas=cl.gpus // etp,
        engine_tp=etp,
        trainer_world=cl.gpus,
        trainer_tp=tp,
        trainer_pp=pp,
        trainer_cp=cp,
        trainer_dp=cl.gpus // (tp * pp * cp),
        colocated=True,
        rollout_workers=workers,
        cpus_per_rollout_worker=cl.cpus_per_rollout_worker,
        cpus_per_trainer_rank=cl.cpus_per_trainer_rank,
    )
