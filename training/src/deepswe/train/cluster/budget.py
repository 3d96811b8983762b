"""The plan on paper: memory per GPU in each phase of a colocated GRPO++ step, and the time a step
takes, from the config, the model's shape and named assumptions. Pure arithmetic (no GPU, no
Ray), so `deepswe-train plan` checks a 64-GPU profile on a laptop before anyone books a cluster.

A step on colocated GPUs has three phases, and each GPU must hold the largest of them:

    rollout  the engine is awake (weights + KV cache of its concurrent episodes) while the
             trainer's state stays resident (no offload): params, fp32 grads, optimizer shard
    sync     the engine wakes with weights only and takes the trainer's new weights in place
             (one full tensor of the largest kind gathered at a time)
    update   the engine sleeps (vLLM sleep level 2: weights and KV cache discarded);
             the trainer runs forward + backward on one micro-batch of the longest trajectory

Sources of the fixed numbers are named where they are defined; everything else is labelled
"(ours)" and can be changed on the command line (`deepswe-train plan --help`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from deepswe.train.cluster.plan import Placement, placement_plan
from deepswe.train.cluster.shapes import KNOWN_SHAPES, ModelShape, model_shape

if TYPE_CHECKING:
    from deepswe.train.config import TrainConfig

__all__ = ["KNOWN_SHAPES", "Assumptions", "Budget", "ModelShape", "estimate", "model_shape"]

GB = 1e9  # decimal gigabytes, as GPU datasheets count memory


@dataclass(frozen=True)
class Assumptions:
    """Everything the plan does not read from the config. Hardware numbers: NVIDIA H100 SXM5
    datasheet (80 GB HBM3, 3.35 TB/s, 989 dense BF16 TFLOPS, NVLink 900 GB/s both ways)."""

    gpu: str = "H100 SXM 80GB"
    gpu_memory_gb: float = 80.0
    bf16_tflops: float = 989.0
    hbm_tb_s: float = 3.35
    nvlink_gb_s: float = 450.0  # one direction
    # (ours) CUDA context, NCCL buffers and allocator fragmentation on every GPU.
    reserved_gb: float = 6.0
    # (ours) the engine's own activations, CUDA graphs and sampler beside weights and KV.
    engine_overhead_gb: float = 2.0
    # (ours) model FLOPs utilisation of the update: one long sequence per micro-batch and TP 8
    # collectives every layer keep it under dense pretraining's.
    train_mfu: float = 0.35
    # (ours) share of HBM bandwidth a decode step reaches (weights + KV read once a token).
    decode_bandwidth_efficiency: float = 0.5
    # (ours) a trajectory fills this share of rollout.max_prompt_tokens + max_response_tokens
    # on average (the longest one fills all of it: memory is planned for that one).
    mean_fill: float = 0.5
    # (ours) seconds of one tool call in a warm sandbox (episode.action_timeout_s bounds it).
    tool_seconds: float = 5.0
    # (ours) seconds of the hidden-test run that grades an episode (reward_timeout_s bounds it).
    reward_seconds: float = 60.0
    # (ours) shared storage a node writes checkpoints to, GB/s.
    storage_gb_s: float = 1.0
    # (ours) the engine's load-weights path per tensor (name mapping, fused QKV / gate-up
    # layout, a copy into the engine's buffer), beside the bytes moved over NVLink.
    sync_seconds_per_tensor: float = 0.005

    def described(self) -> list[str]:
        return [
            f"GPU {self.gpu}: {self.gpu_memory_gb:g} GB, {self.bf16_tflops:g} BF16 TFLOPS, "
            f"HBM {self.hbm_tb_s:g} TB/s, NVLink {self.nvlink_gb_s:g} GB/s a direction "
            "(NVIDIA datasheet)",
            f"reserved {self.reserved_gb:g} GB a GPU (CUDA context, NCCL, fragmentation); "
            f"engine overhead {self.engine_overhead_gb:g} GB (ours)",
            f"update at {self.train_mfu:.0%} MFU; decode at {self.decode_bandwidth_efficiency:.0%}"
            " of HBM bandwidth (ours)",
            f"mean trajectory fills {self.mean_fill:.0%} of its token budget; tool call "
            f"{self.tool_seconds:g} s; grading {self.reward_seconds:g} s; checkpoint writes "
            f"{self.storage_gb_s:g} GB/s a node; weight sync {self.sync_seconds_per_tensor * 1e3:g} "
            "ms a tensor (ours)",
        ]


# DeepSWE-Preview's run, for comparison: ~200 GRPO++ steps in about six days on 64 H100s
# (Agentica x Together AI blog, 2025-07-02).
REFERENCE = {"gpus": 64, "steps": 200, "days": 6.0}


@dataclass(frozen=True)
class Phase:
    name: str
    parts: dict[str, float]  # bytes a GPU

    @property
    def total(self) -> float:
        return sum(self.parts.values())


@dataclass(frozen=True)
class Budget:
    placement: Placement
    shape: ModelShape
    assumptions: Assumptions
    phases: list[Phase]
    times: dict[str, float]  # seconds a step, by part
    step_bounds: tuple[float, float]  # (estimate, trajectory-timeout bound) seconds
    steps: int
    notes: list[str] = field(default_factory=list)
    # One step behind (rollout.max_staleness 1), priced on the same GPUs split in two: seconds
    # of the next batch's generation, this batch's training, the weight sync, and the step.
    behind: dict[str, float] = field(default_factory=dict)

    @property
    def peak(self) -> Phase:
        return max(self.phases, key=lambda p: p.total)

    @property
    def fits(self) -> bool:
        return self.peak.total <= self.assumptions.gpu_memory_gb * GB

    def lines(self) -> list[str]:
        a, s = self.assumptions, self.shape
        out = [
            f"model {s.name}: {s.parameters / 1e9:.2f} B parameters, {s.layers} layers, hidden "
            f"{s.hidden}, {s.heads} heads / {s.kv_heads} KV heads x {s.head_dim}, vocabulary "
            f"{s.vocab:,}",
            *self.placement.describe().splitlines(),
            "",
            f"memory a GPU (GB, of {a.gpu_memory_gb:g} on {a.gpu}):",
        ]
        for p in self.phases:
            parts = ", ".join(f"{k} {v / GB:.1f}" for k, v in p.parts.items())
            out.append(f"  {p.name:<8} {p.total / GB:6.1f}  = {parts}")
        peak = self.peak
        verdict = "fits" if self.fits else "DOES NOT FIT"
        headroom = (a.gpu_memory_gb * GB - peak.total) / GB
        out.append(
            f"  peak: {peak.name} {peak.total / GB:.1f} GB -> {verdict} (headroom {headroom:+.1f} GB)"
        )
        est, bound = self.step_bounds
        out += ["", "time a step (s):"]
        out += [f"  {k:<22} {v:8.1f}" for k, v in self.times.items()]
        ref_step = REFERENCE["days"] * 86400 / REFERENCE["steps"]
        out += [
            f"  step estimate {est / 60:.1f} min; bounded by the trajectory timeout at "
            f"{bound / 60:.1f} min",
            f"  {self.steps} steps: {est * self.steps / 86400:.1f} to "
            f"{bound * self.steps / 86400:.1f} days; DeepSWE-Preview: ~{REFERENCE['steps']} steps "
            f"in ~{REFERENCE['days']:g} days on {REFERENCE['gpus']} H100 = "
            f"{ref_step / 60:.0f} min a step",
            *self._behind_lines(est),
            "",
            "assumptions:",
            *(f"  {line}" for line in a.described()),
            *(f"  {n}" for n in self.notes),
        ]
        return out

    def _behind_lines(self, est: float) -> list[str]:
        b = self.behind
        if not b:
            return []
        return [
            "",
            "one step behind (rollout.max_staleness 1; engines apart from the trainer, which the "
            "placement does not build yet):",
            f"  half the GPUs generate the next batch ({b['generation'] / 60:.1f} min) while the "
            f"other half train this one ({b['training'] / 60:.1f} min); then the weight sync "
            f"({b['weight sync']:.1f} s)",
            f"  step {b['step'] / 60:.1f} min against {est / 60:.1f} min synchronous: "
            f"{est / b['step']:.2f}x (memory of that split not planned here); at best, training "
            f"hidden at no cost to generation, {est / b['best']:.2f}x",
        ]

    def problem(self) -> str | None:
        """One line saying why the plan does not fit, naming what to change; None if it fits."""
        if self.fits:
            return None
        p, a = self.peak, self.assumptions
        biggest = max(p.parts, key=lambda k: p.parts[k])
        advice = {
            "kv cache": "lower rollout.concurrency or raise engine.tensor_parallel",
            "engine weights": "raise engine.tensor_parallel",
            "activations": "set backend.megatron.recompute full and sequence_parallel true, "
            "lower backend.optim.micro_batch_size or the token budget "
            "(rollout.max_response_tokens), or raise backend.parallel.context_parallel",
            "optimizer": "set backend.megatron.distributed_optimizer true",
            "logits": "raise backend.parallel.tensor_parallel (the vocabulary is split over TP)",
        }.get(biggest, "raise backend.parallel.tensor_parallel or pipeline_parallel")
        return (
            f"the {p.name} phase needs {p.total / GB:.1f} GB a GPU, the {a.gpu} has "
            f"{a.gpu_memory_gb:g} GB (largest part: {biggest} {p.parts[biggest] / GB:.1f} GB): "
            f"{advice}"
        )


def _forward_flops(shape: ModelShape, tokens: float) -> float:
    """One forward over a sequence of `tokens`: 2 FLOPs a matmul parameter a token, plus causal
    attention (QK^T and AV over half the context on average)."""
    return 2 * shape.matmul_parameters * tokens + 2 * shape.layers * shape.q_dim * tokens**2


def estimate(
    cfg: TrainConfig, shape: ModelShape | None = None, assumptions: Assumptions | None = None
) -> Budget:
    """The budget of TrainConfig `cfg` (a GPU run). ValueError when it has no GPUs to plan."""
    placement = placement_plan(cfg)
    if placement.gpus == 0:
        raise ValueError("cluster.gpus is 0: a CPU run has no GPU memory to plan")
    shape = shape or model_shape(cfg.model.path)
    a = assumptions or Assumptions()
    ro, pl = cfg.rollout, placement
    tp, pp, cp, dp = pl.trainer_tp, pl.trainer_pp, pl.trainer_cp, pl.trainer_dp
    seq = ro.max_prompt_tokens + ro.max_response_tokens  # the longest trajectory
    mean_seq = a.mean_fill * seq
    micro = cfg.backend.optim.micro_batch_size
    P = shape.parameters
    shard = P / (tp * pp)  # parameters on one trainer GPU

    # Trainer state (the backend's optimizer.py: bf16 params, fp32 main grads, fp32 main weights
    # and AdamW moments: 2 + 4 + 12 bytes a parameter, the 12 split over DP by
    # backend.megatron.distributed_optimizer, as megatron-core's distributed optimizer does).
    mo = cfg.backend.megatron
    resident = {
        "params": 2 * shard,
        "grads": 4 * shard,
        "optimizer": 12 * shard / (dp * cp if mo.distributed_optimizer else 1),
    }
    # Each layer keeps its bf16 input, split over TP by sequence parallelism (else whole on
    # every TP rank) and over CP; stage 0 of a 1F1B pipeline holds PP micro-batches, so every
    # layer's input is held once in all. With full recomputation one layer's activations live
    # during its backward, without it every layer's (ours: a layer's saved tensors and their
    # gradients, counted for SwiGLU and GQA).
    tokens = micro * seq / cp
    layer_bytes_per_token = (
        4 * shape.hidden
        + 2 * (shape.q_dim + 2 * shape.kv_dim)
        + 2 * shape.q_dim
        + 8 * shape.intermediate
    )
    sp = tp if mo.sequence_parallel else 1
    kept = shape.layers * tokens * shape.hidden * 2 / sp
    live = (2 if mo.recompute == "full" else shape.layers) * tokens * layer_bytes_per_token / tp
    acts = kept + live
    # The megatron backend materialises the vocabulary slice's logits for the whole sequence:
    # bf16 out of the head, an fp32 copy for the log-softmax and its fp32 gradient.
    logits = tokens * (shape.vocab / tp) * (2 + 4 + 4)
    engine_w = 2 * P / pl.engine_tp
    per_replica = math.ceil(ro.concurrency / pl.engine_replicas)
    kv = per_replica * seq * shape.kv_bytes_per_token(pl.engine_tp)
    largest = max(shape.embedding, shape.hidden * shape.intermediate * 2) * 2  # bf16, gathered
    reserved = {"reserved": a.reserved_gb * GB}
    phases = [
        Phase(
            "rollout",
            {
                **resident,
                "engine weights": engine_w,
                "kv cache": kv,
                "engine overhead": a.engine_overhead_gb * GB,
                **reserved,
            },
        ),
        Phase(
            "sync", {**resident, "engine weights": engine_w, "gather buffer": largest, **reserved}
        ),
        Phase("update", {**resident, "activations": acts, "logits": logits, **reserved}),
    ]

    # Time. The step waits for its slowest episode: the whole response budget over
    # episode.max_steps turns. A decode step reads the engine's weights and its sequences'
    # KV cache once from HBM.
    ep = cfg.episode
    kv_read = per_replica * mean_seq * shape.kv_bytes_per_token(pl.engine_tp)
    decode_s = (engine_w + kv_read) / (a.hbm_tb_s * 1e12 * a.decode_bandwidth_efficiency)
    prefill_s = _forward_flops(shape, seq) / (pl.engine_tp * a.bf16_tflops * 1e12 * a.train_mfu)
    rollout = (
        ro.max_response_tokens * decode_s
        + prefill_s
        + ep.max_steps * min(a.tool_seconds, ep.action_timeout_s)
        + min(a.reward_seconds, ep.reward_timeout_s or a.reward_seconds)
    )
    trajectories = ro.tasks_per_step * ro.group_size
    cluster_flops = pl.gpus * a.bf16_tflops * 1e12 * a.train_mfu
    fwd = trajectories * _forward_flops(shape, mean_seq)
    old_lp = fwd / cluster_flops if ro.old_logprobs == "recompute" else 0.0
    update = 4 * fwd / cluster_flops  # forward, backward (2x), recomputation
    tensors = shape.layers * 11 + 3  # q k v o gate up down, 2 norms, q/k norms; embed, head, norm
    sync = engine_w / (a.nvlink_gb_s * GB) + tensors * a.sync_seconds_per_tensor
    ckpt_bytes_node = (2 + 12) * P / pl.nodes  # bf16 model + fp32 optimizer state
    ckpt = ckpt_bytes_node / (a.storage_gb_s * GB) / cfg.run.save_every
    times = {
        "rollout (slowest)": rollout,
        "old log-probs": old_lp,
        "update": update,
        "weight sync": sync,
        "checkpoint (amortised)": ckpt,
    }
    est = sum(times.values())
    bound = ep.wall_timeout_s + (ep.reward_timeout_s or 0.0) + est - rollout
    notes = [
        f"decode {1 / decode_s:.0f} tokens/s a sequence at {per_replica} sequences a replica; "
        f"{trajectories} trajectories a step, mean {mean_seq:,.0f} tokens, longest {seq:,}",
        "memory is planned for the longest trajectory; time for the mean one (update) and the "
        "slowest episode (rollout)",
    ]
    if pp > 1 or cp > 1:
        notes.append(
            "backend.parallel: the megatron backend does not build pipeline or context "
            "parallelism yet; this plan shows what they would need"
        )
    notes.append(_serving_note(cfg, shape, a, engine_w, pl.engine_tp))
    behind: dict[str, float] = {}
    if pl.engine_replicas >= 2:
        # Half the replicas serve every episode (twice the sequences a replica: each decode
        # step reads twice the KV cache); half the GPUs train (twice the time).
        half = math.ceil(ro.concurrency / (pl.engine_replicas // 2))
        kv_half = half * mean_seq * shape.kv_bytes_per_token(pl.engine_tp)
        decode_half = (engine_w + kv_half) / (a.hbm_tb_s * 1e12 * a.decode_bandwidth_efficiency)
        generation = rollout + ro.max_response_tokens * (decode_half - decode_s)
        training = 2 * (old_lp + update) + ckpt
        behind = {
            "generation": generation,
            "training": training,
            "weight sync": sync,
            "step": max(generation, training) + sync,
            "best": est - (old_lp + update + ckpt),
        }
    return Budget(pl, shape, a, phases, times, (est, bound), cfg.run.steps, notes, behind)


def _serving_note(
    cfg: TrainConfig, shape: ModelShape, a: Assumptions, weights: float, tp: int
) -> str:
    """The evaluation server (eval: section) on one engine replica's GPUs: can every in-flight
    episode keep its whole context in the KV cache, or will vLLM queue and preempt?"""
    ev = cfg.eval
    context = ev.episode.max_context_tokens or (
        cfg.rollout.max_prompt_tokens + cfg.rollout.max_response_tokens
    )
    kv_full = ev.workers * context * shape.kv_bytes_per_token(tp)
    room = a.gpu_memory_gb * GB - weights - (a.engine_overhead_gb + a.reserved_gb) * GB
    resident = int(room // (context * shape.kv_bytes_per_token(tp)))
    return (
        f"evaluation server (TP {tp}, eval.workers {ev.workers} at {context:,} tokens): KV "
        f"{kv_full / GB:.1f} GB a GPU at full context beside {weights / GB:.1f} GB of weights; "
        + (
            "every episode fits"
            if resident >= ev.workers
            else f"{resident} full-context episodes fit at once, vLLM preempts beyond that"
        )
    )


def with_overrides(a: Assumptions, **values: float | None) -> Assumptions:
    """`a` with the given (non-None) fields replaced."""
    return replace(a, **{k: v for k, v in values.items() if v is not None})


def launch_commands(cfg_path: str, placement: Placement, overrides: list[str]) -> list[str]:
    """What to run on each node to start the profile on a Ray cluster (cluster.address auto)."""
    extra = " ".join([*overrides, "cluster.address=auto"])
    cmds = [
        f"node 0 (head): ray start --head --port 6379 --num-gpus {placement.gpus_per_node}",
    ]
    cmds += [
        f"node {i}: ray start --address HEAD:6379 --num-gpus {placement.gpus_per_node}"
        for i in range(1, placement.nodes)
    ]
    cmds.append(
        f"node 0 (head), once all have joined: deepswe-train train --config {cfg_path} {extra}"
    )
    return cmds
