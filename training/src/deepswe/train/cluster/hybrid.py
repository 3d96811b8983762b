"""Hybrid workers: the inference engine inside the trainer ranks' processes (verl's hybrid engine),
so the engine and the trainer take turns on the same devices and new weights never leave them.

    step:  rollout (engines awake, sampled by the rollout workers)
           -> old log-probs, update (every rank puts its engine to sleep first)
           -> sync_weights (engines wake with weights only, load the backend's stream in place,
              then take their KV cache back)

`HybridRank` is a TrainerRank (ranks.py) that also holds an engine: one per model-parallel group.
With engine.tensor_parallel 1 the group's first rank holds it and the others stream their shards
to it. With engine.tensor_parallel = TP x CP (deepswe-32b: 8) every rank of the group holds the
engine's shard of its GPU, and the group's first rank, which the rollout workers call, fans each
request out: it asks every other rank of the group to run the same generate call, runs its own,
and waits for all (vLLM's external_launcher needs every TP rank to call generate with the same
requests in the same order: the first rank's order). That rank serves in lock-step batches
(engines/batching.py): requests that arrive while a generate call runs go together into the next
one (vLLM's `sample_many`: one generate over their prompts, run to its longest reply). An engine
that serves a group of one and can batch continuously (`submit`: vLLM's offline engine, stepped
by its own thread) is given each request as it comes instead: every episode's next turn joins the
running batch at the next decoding step, as on vLLM's server and in rLLM's async engine.
Weights move from the backend to the engine one tensor at a time (`backends.hf_weights`: the
megatron backend all-gathers each TP-sharded tensor in its group as it comes): never a whole
state dict, never through Ray's object store.

On CPU (`cluster.cpu_colocate: true`) the engine is the hf engine, a full replica in the rank's
process: it exercises every seam a GPU run crosses (sleep, wake, the streamed in-place load, the
trainer seeing only an InferenceEngine and a TrainingBackend); with engine.tensor_parallel =
TP x CP each rank of a group holds a full hf replica, which makes the fan-out checkable: every
rank must run the same calls and sample the same tokens. On GPUs the engine would be vLLM's
offline engine sharing the rank's GPU (engines/vllm_colocated.py): written, not run here.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from deepswe.train.backends import hf_weights
from deepswe.train.cluster import require_ray
from deepswe.train.cluster.ranks import TrainerRank
from deepswe.train.engines import Sample
from deepswe.train.engines.batching import LockStepBatches
from deepswe.train.engines.batching import Request as BatchRequest

if TYPE_CHECKING:
    from deepswe.train.config import TrainConfig

# A sampling request as the rollout workers make it: (prompt, n, temperature, max_tokens, seed).
Request = BatchRequest


def sample_batch(engine: Any, requests: list[Request]) -> list[list[Sample]]:
    """Every request's samples from one generate call when the engine has `sample_many` (vLLM:
    a batch of prompts, each with its own sampling parameters), else one call a request."""
    many = getattr(engine, "sample_many", None)
    if many is not None:
        return many(requests)
    return [engine.sample(p, n, t, m, seed=s) for p, n, t, m, s in requests]


def group_size(cfg: TrainConfig) -> int:
    """Ranks in a model-parallel group: megatron orders ranks TP fastest, then CP, so each run of
    TP x CP consecutive ranks is one model replica, and one engine."""
    par = cfg.backend.parallel
    return par.tensor_parallel * par.context_parallel


def hosts_engine(rank: int, cfg: TrainConfig) -> bool:
    """Whether trainer rank `rank` serves its group's samples (the group's first rank)."""
    return rank % group_size(cfg) == 0


def holds_engine(rank: int, cfg: TrainConfig) -> bool:
    """Whether trainer rank `rank` holds (a shard of) its group's engine: the first rank, or
    every rank when the engine is tensor-parallel over the group."""
    return hosts_engine(rank, cfg) or cfg.engine.tensor_parallel > 1


class HybridRank(TrainerRank):
    """A trainer rank with an engine beside its backend; run as a Ray actor."""

    # Level 2: weights and KV cache discarded, as vLLM advises when the weights are replaced
    # anyway (no host copy of them); the sync wakes the weights and loads every one. On CPU this
    # is what makes the stand-in honest: a weight the stream missed would be garbage.
    sleep_level = 2

    def __init__(
        self, cfg: TrainConfig, rank: int, world: int, init_method: str | None, threads: int = 1
    ) -> None:
        self.engine: Any = None
        self.synced = 0  # tensors loaded by the last sync
        self.naps = 0  # times the engine was put to sleep (once a step: before old log-probs)
        self.batches = 0  # generate calls run (the first rank's and its followers' must match)
        self.requests = 0  # requests served in them
        self.followers: list[Any] = []  # the group's other engine-holding ranks (fan-out)
        self._batches = LockStepBatches(self._run)
        self._collective = threading.Lock()
        super().__init__(cfg, rank, world, init_method, threads)

    def join(self, init_method: str) -> None:
        super().join(init_method)
        if holds_engine(self.rank, self.cfg):
            try:
                self.engine = build_colocated_engine(self.cfg)
            except BaseException as e:
                self.failed = e
                raise

    # -- the engine's side ---------------------------------------------------------------------
    def engine_name(self) -> str | None:
        return None if self.engine is None else self.engine.name

    def set_followers(self, followers: list[Any]) -> int:
        """The group's first rank: the actors of the other ranks holding the engine's shards."""
        self.followers = list(followers)
        return len(self.followers)

    def sample(
        self,
        prompt: list[int] | list[dict[str, str]],
        n: int,
        temperature: float,
        max_tokens: int,
        seed: int | None = None,
    ) -> list[Sample]:
        """The group's first rank, called by the rollout workers at once (a threaded actor). An
        engine of a group of one that batches continuously (`submit`) takes the request as it
        comes; otherwise requests that arrive while a generate call runs wait and go together
        in the next one, which every engine-holding rank of the group runs (`follow`), in this
        rank's order."""
        if self.engine is None or not hosts_engine(self.rank, self.cfg):
            raise RuntimeError(
                f"trainer rank {self.rank} serves no samples (its group's first does)"
            )
        submit = getattr(self.engine, "submit", None)
        if submit is not None and not self.followers:
            self.requests += 1
            return submit(prompt, n, temperature, max_tokens, seed).result()
        return self._batches.sample((prompt, n, temperature, max_tokens, seed))

    def _run(self, requests: list[Request]) -> list[list[Sample]]:
        pending = [f.follow.remote(requests) for f in self.followers]
        mine = self.follow(requests)
        theirs = require_ray().get(pending) if pending else []
        for i, other in enumerate(theirs, 1):
            if [[s.token_ids for s in r] for r in other] != [
                [s.token_ids for s in r] for r in mine
            ]:
                raise RuntimeError(
                    f"trainer rank {self.rank + i} sampled other tokens than rank "
                    f"{self.rank} for the same requests: the engine's shards are out of step"
                )
        return mine

    def follow(self, requests: list[Request]) -> list[list[Sample]]:
        """One generate call over `requests` on this rank's engine (shard), as its group's
        first rank asked (or ran itself)."""
        self.batches += 1
        self.requests += len(requests)
        return sample_batch(self.engine, requests)

    def sync_weights(self) -> int:
        """Collective over the model-parallel group: every rank streams its backend's weights;
        the engine's rank loads them in place (after waking its weights) and wakes its KV cache.
        Returns the tensors loaded (0 on ranks without an engine)."""
        with self._collective:
            return self._sync_weights()

    def _sync_weights(self) -> int:
        stream = hf_weights(self.backend)
        if self.engine is None:
            for _ in stream:  # the gathers are collective: take part, keep nothing
                pass
            return 0
        self.engine.wake_up(["weights"])
        self.synced = self.engine.load_weights(stream)
        self.engine.wake_up(["kv_cache"])
        return self.synced

    def engine_state(self) -> dict[str, Any] | None:
        """None without an engine; else whether it sleeps, its naps and the last sync's count."""
        if self.engine is None:
            return None
        return {
            "asleep": bool(self.engine.asleep),
            "naps": self.naps,
            "synced": self.synced,
            "batches": self.batches,
            "requests": self.requests,
        }

    def _sleep(self) -> None:
        if self.engine is not None and not self.engine.asleep:
            self.engine.sleep(self.sleep_level)
            self.naps += 1

    # -- the trainer's side: the engine sleeps before the backend computes -----------------------
    # The serving rank is a threaded actor: its collective calls take a lock, so that one the
    # trainer gave up on (RankedBackend's timeout) still runs before the next, as on a plain rank.
    def forward_logprobs(self, batch: Any, positions: Any) -> Any:
        with self._collective:
            self._sleep()
            return super().forward_logprobs(batch, positions)

    def train_step(self, batch: Any) -> Any:
        with self._collective:
            self._sleep()
            return super().train_step(batch)

    def state_dict(self, reply: bool = True) -> Any:
        with self._collective:
            return super().state_dict(reply)

    def save(self, directory: str) -> None:
        with self._collective:
            super().save(directory)

    def load(self, directory: str) -> None:
        with self._collective:
            super().load(directory)


def build_colocated_engine(cfg: TrainConfig) -> Any:
    """The engine a hybrid rank holds: the hf engine on CPU (engine.name hf), vLLM's offline
    engine on a GPU rank (engine.name vllm); a ValueError for anything else."""
    if cfg.engine.name == "hf":  # on CPU a full replica, whatever engine.tensor_parallel says
        from deepswe.train.engines.hf import HFEngine

        return HFEngine.from_config(cfg)
    if cfg.engine.name == "vllm" and cfg.cluster.gpus:
        from deepswe.train.engines.vllm_colocated import ColocatedVLLMEngine

        return ColocatedVLLMEngine.from_config(cfg)
    raise ValueError(
        f"engine.name {cfg.engine.name!r}: a colocated engine is hf (CPU) or vllm (GPUs); the "
        "vllm engine on CPU is a server in its own virtualenv and cannot live in a trainer rank"
    )
