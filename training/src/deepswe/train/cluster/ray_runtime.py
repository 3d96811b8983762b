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
`push_weights`. Trainer ranks run on CPU only: the megatron backend trains over gloo on CPU, so
a GPU plan whose trainer world is above 1 (deepswe-32b's 64 ranks included) stops in
`RayScheduler.start` with NotImplementedError. GPU placement (an engine actor holding
`engine.tensor_parallel` GPUs of one node) is tested on declared GPUs only.
"""

from __future__ import annotations

import itertools
import math
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from deepswe.env.trajectory import Trajectory
from deepswe.train.cluster import require_ray
from deepswe.train.cluster.hybrid import HybridRank, hosts_engine
from deepswe.train.cluster.plan import Placement, placement_plan
from deepswe.train.cluster.ranks import RankedBackend, launch
from deepswe.train.engines import Sample
from deepswe.train.plugins import build_engine, build_source
from deepswe.train.sampling import RolloutJob, run_rollout


class EngineActor:
    """Hosts one engine replica; run as a Ray actor (`ray.remote(EngineActor)`)."""

    def __init__(self, cfg: Any) -> None:
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
    def over(cls, actors: list[Any], cfg: Any) -> RemoteEngine:
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

    def __init__(self, cfg: Any, engine_actors: list[Any]) -> None:
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
    """Ray actor options placing trainer rank r in its bundle of `pg` (after the engines')."""
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    first = len(plan.replica_bundles())  # 0 when the engines live in the ranks (colocated)
    return [
        {
            "num_cpus": b["CPU"],
            "scheduling_strategy": PlacementGroupSchedulingStrategy(
                pg, placement_group_bundle_index=first + r
            ),
        }
        for r, b in enumerate(plan.trainer_bundles())
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
    def start(cls, cfg: Any, timeout_s: float = 300.0) -> RayScheduler:
        """Validate the plan, start or join Ray, reserve the placement group, place the engine
        replicas and the trainer ranks in it and the rollout workers beside it; waits until all
        are up."""
        plan = placement_plan(cfg)
        if plan.gpus and plan.trainer_world > 1:
            raise NotImplementedError(
                f"trainer world {plan.trainer_world} on GPUs: trainer-rank actors run on CPU only "
                "(the megatron backend trains over gloo on CPU; the hybrid ranks that hold the "
                f"TP-{plan.engine_tp} engines are built and run on CPU with cluster.cpu_colocate, "
                "their GPU engine and megatron on CUDA are not)"
            )
        ray = require_ray()
        owns = not ray.is_initialized()
        if owns and cfg.cluster.address is None:
            # Logical CPUs: enough for every actor even on a small box (Ray does not pin cores).
            ray.init(
                num_cpus=max(os.cpu_count() or 1, math.ceil(plan.cpus())),
                include_dashboard=False, log_to_driver=False, configure_logging=False,
            )  # fmt: skip
        elif owns:
            ray.init(address=cfg.cluster.address, log_to_driver=False)
        try:
            return cls._place(cfg, plan, owns, timeout_s)
        except BaseException:
            if owns:
                ray.shutdown()
            raise

    @classmethod
    def _place(cls, cfg: Any, plan: Placement, owns: bool, timeout_s: float) -> RayScheduler:
        ray = require_ray()
        from ray.util.placement_group import remove_placement_group

        pg = reserve(plan, timeout_s)
        actors: list[Any] = []
        workers: list[Any] = []
        ranks: list[Any] = []
        tmp = None
        try:
            if plan.trainer_bundles():  # first: the slowest to start (each builds the model)
                # tcp on a cluster (rank 0's node, asked of it); a file in a temp dir on one box
                nodes = sum(1 for n in ray.nodes() if n["Alive"])
                how = "tcp" if cfg.cluster.address is not None or nodes > 1 else "file"
                threads = max(int(plan.cpus_per_trainer_rank), 1)
                kind = HybridRank if plan.colocated else None
                ranks, tmp = launch(cfg, rank_options(plan, pg), how, threads, timeout_s, kind)
            if plan.colocated:  # the engine-holding ranks serve the samples
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
            backend = RankedBackend(ranks, names[-1], timeout_s, tmp) if ranks else None
            engine = RemoteEngine.over(engines, cfg)
            push = (lambda: backend.call("sync_weights")) if plan.colocated else None
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
