"""The `ray` scheduler: the inference engine, the rollout workers and the trainer ranks as Ray
actors.

    trainer (driver) --update_weights--> EngineActor (one a replica, in the placement group)
         |       |                            ^ sample
         |       +--(task index, seed)--> RolloutWorker x N --> Trajectory (back, in job order)
         +--batch--> TrainerRank x world (ranks.py; CPU runs whose trainer world is above 1)

The trainer sees the engine through `RemoteEngine`, an `InferenceEngine` proxy, and the trainer
ranks through `RankedBackend` (ranks.py), a `TrainingBackend` proxy; with a trainer world of 1 it
keeps its backend in the driver process. Only a `RolloutJob` (task index, step, slot, k) travels
to a worker: each worker loads the same tasks itself and plays the job with
`sampling.run_rollout`, as the local thread pool does, so a Ray run samples exactly what it does.

With `cluster.cpu_colocate` the engines live inside the trainer ranks instead (hybrid.py:
HybridRank, one engine per model-parallel group, weights synced in place): no EngineActor, the
workers sample from the engine-holding ranks, and the trainer pushes weights through
`push_weights`. On GPUs a plan of several trainer ranks (deepswe-32b's 64) places each rank on
one GPU of its engine replica's bundle (NCCL, megatron on CUDA, vLLM inside the ranks; with
engines of TP x CP every rank of a group holds a shard and the first fans requests out:
hybrid.py); `check_gpu_ranks` names the field when the config cannot run that way. GPU placement
is tested on declared GPUs only; nothing here has run on a real GPU.
"""

from __future__ import annotations

import itertools
import math
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from deepswe.env.trajectory import Trajectory
from deepswe.train.cluster import require_ray
from deepswe.train.cluster.hybrid import HybridRank, group_size, hosts_engine
from deepswe.train.cluster.plan import CPUS_PER_GPU, Placement, placement_plan
from deepswe.train.cluster.ranks import RankedBackend, launch
from deepswe.train.engines import Sample
from deepswe.train.plugins import build_engine, build_source
from deepswe.train.sampling import RolloutJob, run_rollout

if TYPE_CHECKING:
    from deepswe.train.config import TrainConfig


class EngineActor:
    """Hosts one engine replica; run as a Ray actor (`ray.remote(EngineActor)`)."""

    def __init__(self, cfg: TrainConfig) -> None:
        self.engine = build_engine(cfg)  # as Trainer.setup builds it

    def ready(self) -> str:
        return self.engine.name

    def engine_name(self) -> str:
        return self.engine.name

    def sample(
        self,
        prompt: list[int] | list[dict[str, str]],
        n: int,
        temperature: float,
        max_tokens: int,
        seed: int | None = None,
    ) -> list[Sample]:
        return self.engine.sample(prompt, n, temperature, max_tokens, seed=seed)

    def update_weights(self, state_dict: dict[str, Any]) -> None:
        self.engine.update_weights(state_dict)

    def gpu_ids(self) -> list[Any]:
        """The GPUs Ray gave this actor (CUDA_VISIBLE_DEVICES is set to them)."""
        return require_ray().get_gpu_ids()


class RemoteEngine:
    """`InferenceEngine` over EngineActor handles (one per replica): samples go to the replicas
    in turn; new weights go to all of them, put in the object store once."""

    def __init__(self, actors: list[Any], name: str, tokenizer: Any) -> None:
        self.actors, self.name, self.tokenizer = actors, name, tokenizer
        self._turn = itertools.count()

    @classmethod
    def over(cls, actors: list[Any], cfg: TrainConfig) -> RemoteEngine:
        """The tokenizer is loaded here from model.path, as the engines load theirs."""
        from deepswe.train.engines.hf import load_tokenizer

        # engine_name: an EngineActor's engine, or the engine inside a hybrid trainer rank
        name = require_ray().get(actors[0].engine_name.remote())
        return cls(actors, name, load_tokenizer(cfg.model.path))

    def sample(
        self,
        prompt: list[int] | list[dict[str, str]],
        n: int,
        temperature: float,
        max_tokens: int,
        seed: int | None = None,
    ) -> list[Sample]:
        actor = self.actors[next(self._turn) % len(self.actors)]
        return require_ray().get(actor.sample.remote(prompt, n, temperature, max_tokens, seed))

    def update_weights(self, state_dict: dict[str, Any]) -> None:
        ray = require_ray()
        ref = ray.put(state_dict)
        ray.get([a.update_weights.remote(ref) for a in self.actors])


class RolloutWorker:
    """Runs episodes; a Ray actor with `cluster.cpus_per_rollout_worker` CPUs. Holds the rollout
    source (its sandboxes are made from here) and a RemoteEngine over its engine replica."""

    def __init__(self, cfg: TrainConfig, engine_actors: list[Any]) -> None:
        self.cfg = cfg
        self.source = build_source(cfg)
        self.engine = RemoteEngine.over(engine_actors, cfg)

    def ready(self) -> int:
        return len(self.source.tasks())

    def run(self, job: RolloutJob) -> Trajectory:
        """One rollout, played as the trainer's own thread pool plays it."""
        return run_rollout(self.source, self.engine, self.cfg, job)


def reserve(plan: Placement, timeout_s: float) -> Any:
    """A ready placement group of plan.replica_bundles() then plan.trainer_bundles() (reserved
    together: every rank of the gloo group is placed, or none), or RuntimeError saying what the
    cluster has against what the plan needs."""
    ray = require_ray()
    from ray.util.placement_group import placement_group, remove_placement_group

    bundles = plan.replica_bundles() + plan.trainer_bundles()
    pg = placement_group(bundles, strategy="PACK")
    try:
        ray.get(pg.ready(), timeout=timeout_s)
    except ray.exceptions.GetTimeoutError:
        remove_placement_group(pg)
        need: dict[str, float] = {}
        for b in bundles:
            for k, v in b.items():
                need[k] = need.get(k, 0.0) + v
        have = {k: v for k, v in ray.cluster_resources().items() if k in ("CPU", "GPU")}
        shapes = ", ".join(f"{bundles.count(b)} of {b}" for b in _unique(bundles))
        raise RuntimeError(
            f"the cluster could not place the plan within {timeout_s:g} s: it needs "
            f"{_fmt(need)} in {len(bundles)} bundle(s) ({shapes}; each on one node); the "
            f"cluster has {_fmt(have)}\n{plan.describe()}"
        ) from None
    return pg


def _unique(bundles: list[dict[str, float]]) -> list[dict[str, float]]:
    return [b for i, b in enumerate(bundles) if b not in bundles[:i]]


def _fmt(res: dict[str, float]) -> str:
    return ", ".join(f"{v:g} {k}" for k, v in sorted(res.items())) or "nothing"


def check_gpu_ranks(cfg: TrainConfig, plan: Placement) -> None:
    """What a GPU plan of several trainer ranks needs, each missing piece named by its field:
    the megatron backend on CUDA, vLLM in the ranks, engines of TP 1 or of the group's TP x CP."""
    if not plan.gpus or plan.trainer_world == 1:
        return
    g = group_size(cfg)
    wants = {
        "backend.name": (cfg.backend.name, "megatron"),
        "model.device": (cfg.model.device, "cuda"),
        "engine.name": (cfg.engine.name, "vllm"),
    }
    for field_name, (have, want) in wants.items():
        if have != want:
            raise ValueError(
                f"{field_name} {have!r}: {plan.trainer_world} trainer ranks on GPUs run the "
                f"megatron backend on CUDA with vLLM inside the ranks; set {field_name} {want}"
            )
    if cfg.engine.tensor_parallel not in (1, g):
        raise ValueError(
            f"engine.tensor_parallel {cfg.engine.tensor_parallel}: an engine inside the trainer "
            f"ranks spans one model-parallel group (TP x CP = {g}) or one GPU (1)"
        )


def engine_options(plan: Placement, pg: Any, i: int) -> dict[str, Any]:
    """Ray actor options placing engine replica i in bundle i of `pg` (all of it: TP GPUs)."""
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    bundle = plan.replica_bundles()[i]
    return {
        "num_cpus": bundle.get("CPU", 0.0),
        "num_gpus": bundle.get("GPU", 0.0),
        # Rollout workers call in at once; an engine serving HTTP (vllm) overlaps them, the hf
        # engine serialises them under its own lock.
        "max_concurrency": plan.rollout_workers + 1,
        "scheduling_strategy": PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=i),
    }


def rank_options(plan: Placement, pg: Any) -> list[dict[str, Any]]:
    """Ray actor options placing trainer rank r in its bundle of `pg` (plan.rank_bundle): its
    own CPUs on a CPU run; on GPUs one GPU (and CPUS_PER_GPU) of its engine replica's bundle.
    Ray then sets CUDA_VISIBLE_DEVICES to that GPU alone for the rank's process."""
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    if not plan.ranked:
        return []
    own = {"num_gpus": 1.0, "num_cpus": CPUS_PER_GPU} if plan.gpus else None
    cpu = plan.trainer_bundles()
    group = plan.trainer_tp * plan.trainer_cp
    # One call at a time (Ray's default): the collectives, and the fan-out's order, need it. The
    # rank serving a group's samples is threaded, to gather the rollout workers' requests into
    # one generate call (hybrid.py); the trainer makes one call at a time on it all the same.
    return [
        {
            **(own or {"num_cpus": cpu[r]["CPU"]}),
            **(
                {"max_concurrency": plan.rollout_workers + 1}
                if plan.colocated and r % group == 0
                else {}
            ),
            "scheduling_strategy": PlacementGroupSchedulingStrategy(
                pg, placement_group_bundle_index=plan.rank_bundle(r)
            ),
        }
        for r in range(plan.trainer_world)
    ]


@dataclass
class RayScheduler:
    """Started by `start(cfg)`; the trainer uses `.engine`, `.backend` (None: a trainer world of
    1, the backend stays in the driver) and `collect`, then `shutdown()`."""

    plan: Placement
    engine: RemoteEngine
    workers: list[Any]
    pg: Any
    engine_actors: list[Any]
    owns_ray: bool
    backend: RankedBackend | None = None
    closed: bool = field(default=False)
    # Hybrid ranks (engines inside the trainer ranks): the trainer's way to push new weights,
    # each engine loading its group's stream in place. None: the engines' update_weights.
    push_weights: Callable[[], None] | None = None

    @classmethod
    def start(cls, cfg: TrainConfig, timeout_s: float = 300.0) -> RayScheduler:
        """Validate the plan, start or join Ray, reserve the placement group, place the engine
        replicas and the trainer ranks in it and the rollout workers beside it; waits until all
        are up."""
        plan = placement_plan(cfg)
        check_gpu_ranks(cfg, plan)
        ray = require_ray()
        owns = not ray.is_initialized()
        if owns and cfg.cluster.address is None:
            # Logical CPUs: enough for every actor even on a small box (Ray does not pin cores).
            ray.init(
                num_cpus=max(os.cpu_count() or 1, math.ceil(plan.cpus())),
                include_dashboard=False,
                log_to_driver=False,
                configure_logging=False,
            )
        elif owns:
            ray.init(address=cfg.cluster.address, log_to_driver=False)
        try:
            return cls._place(cfg, plan, owns, timeout_s)
        except BaseException:
            if owns:
                ray.shutdown()
            raise

    @classmethod
    def _place(
        cls, cfg: TrainConfig, plan: Placement, owns: bool, timeout_s: float
    ) -> RayScheduler:
        ray = require_ray()
        from ray.util.placement_group import remove_placement_group

        pg = reserve(plan, timeout_s)
        actors: list[Any] = []
        workers: list[Any] = []
        ranks: list[Any] = []
        tmp = None
        try:
            if plan.ranked:  # first: the slowest to start (each builds the model)
                # tcp on a cluster (rank 0's node, asked of it); a file in a temp dir on one box
                nodes = sum(1 for n in ray.nodes() if n["Alive"])
                how = "tcp" if cfg.cluster.address is not None or nodes > 1 else "file"
                threads = max(int(plan.cpus_per_trainer_rank), 1)
                kind = HybridRank if plan.colocated else None
                ranks, tmp = launch(cfg, rank_options(plan, pg), how, threads, timeout_s, kind)
            if ranks and plan.colocated:  # the first rank of each group serves the samples
                engines = [r for i, r in enumerate(ranks) if hosts_engine(i, cfg)]
            else:
                host = ray.remote(EngineActor)
                actors += [
                    host.options(**engine_options(plan, pg, i)).remote(cfg)
                    for i in range(plan.engine_replicas)
                ]
                engines = actors
            # Against the cluster's total, not what is free now: actors killed a moment ago (a
            # run resumed right after another closed) give their CPUs back only after a while.
            total = ray.cluster_resources().get("CPU", 0.0)
            if total < plan.cpus():
                want = plan.rollout_workers * plan.cpus_per_rollout_worker
                raise RuntimeError(
                    f"cluster.rollout_workers {plan.rollout_workers} x "
                    f"cluster.cpus_per_rollout_worker {plan.cpus_per_rollout_worker:g} = "
                    f"{want:g} CPUs beside the placement group: the plan needs {plan.cpus():g} "
                    f"CPUs in all, the cluster has {total:g}"
                )
            worker = ray.remote(RolloutWorker).options(num_cpus=plan.cpus_per_rollout_worker)
            # Worker w samples from replica w mod replicas: the load spreads over the replicas.
            workers += [
                worker.remote(cfg, [engines[w % len(engines)]]) for w in range(plan.rollout_workers)
            ]
            pending = [a.ready.remote() for a in actors + workers + ranks]
            try:
                names = ray.get(pending, timeout=timeout_s)
            except ray.exceptions.GetTimeoutError:
                raise RuntimeError(
                    f"the engine, {len(workers)} rollout workers and {len(ranks)} trainer ranks "
                    f"did not start within {timeout_s:g} s"
                ) from None
            if ranks and plan.colocated and cfg.engine.tensor_parallel > 1:  # the fan-out
                g = group_size(cfg)
                ray.get(
                    [
                        ranks[i].set_followers.remote(ranks[i + 1 : i + g])
                        for i in range(0, len(ranks), g)
                    ]
                )
            backend = RankedBackend(ranks, names[-1], timeout_s, tmp) if ranks else None
            engine = RemoteEngine.over(engines, cfg)
            push = (lambda: backend.call("sync_weights")) if ranks and plan.colocated else None
            return cls(plan, engine, workers, pg, actors, owns, backend, push_weights=push)
        except BaseException:
            for a in workers + actors + ranks:
                ray.kill(a)
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
            remove_placement_group(pg)
            raise

    def collect(self, jobs: list[RolloutJob]) -> list[Trajectory]:
        """Run the jobs on the workers; results in job order."""
        from ray.util.actor_pool import ActorPool

        pool = ActorPool(self.workers)
        return list(pool.map(lambda w, job: w.run.remote(job), jobs))

    def shutdown(self) -> None:
        """Kill the actors and free the placement group; stop Ray if this scheduler started it."""
        if self.closed:
            return
        ray = require_ray()
        from ray.util.placement_group import remove_placement_group

        for a in self.workers + self.engine_actors:
            ray.kill(a)
        if self.backend is not None:
            self.backend.close()
        remove_placement_group(self.pg)
        if self.owns_ray:
            ray.shutdown()
        self.closed = True
