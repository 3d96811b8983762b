"""A training run's configuration: one YAML profile plus `a.b=value` overrides, validated.

Every section rejects unknown keys by name. Defaults follow the DeepSWE recipe where one exists;
configs/deepswe-32b.yaml states each value's source.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from deepswe.data.profile import (
    ConfigError,  # noqa: F401 - re-exported: the training CLI and trainer catch it from here
    load_section,
    validate_section,
)
from deepswe.env.agent.loop import EpisodeLimits
from deepswe.env.agent.prompts import Variant
from deepswe.env.sandbox import SandboxLimits
from deepswe.eval.config import EvalConfig
from deepswe.train.algos import GRPOConfig
from deepswe.train.backends import OptimConfig
from deepswe.train.backends.megatron.model import MegatronOptions, ParallelConfig
from deepswe.train.sft_config import SFTConfig
from deepswe.verify.tts_config import TTSConfig


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RunConfig(_Section):
    name: str = Field("run", description="run id prefix; the run folder is runs/<name>")
    seed: int = Field(0, description="seeds data order and every rollout's sampling")
    steps: int = Field(1, ge=1, description="optimizer steps in the run")
    save_every: int = Field(1, ge=1, description="checkpoint every this many steps")
    keep_checkpoints: int = Field(2, ge=1, description="newest checkpoints kept on disk")
    tensorboard: bool = Field(True, description="also log to TensorBoard if it is installed")


class ModelConfig(_Section):
    path: str = Field(description="local HF folder (deepswe-train init-model writes one)")
    device: str = Field("cpu", description="cpu or cuda[:i] (hf engine and backend)")
    dtype: Literal["float32", "bfloat16", "float16"] = Field("float32", description="weights")


class TextEnvConfig(_Section):
    """The `text` rollout source: the trainer's unit-test environment (one turn, no Docker)."""

    prompts: list[str] = Field(
        default_factory=lambda: [f"Write a word with the letter {c}." for c in "abcd"],
        min_length=1,
        description="user prompts, one task each",
    )
    target: str = Field("e", min_length=1, description="reward 1 iff the reply contains this")


class OpenEnvSourceConfig(_Section):
    """The `openenv` rollout source: episodes played on a running OpenEnv server of our tasks
    (`deepswe-eval serve`), whose own `openenv:` section sets the episode and sandbox limits."""

    url: str | None = Field(
        None, description="the server, http(s)://HOST:PORT (or ws(s)://); needed by `openenv`"
    )
    message_timeout_s: float = Field(
        900.0,
        gt=0,
        description="longest wait for one answer: a step's tool call, or the last step's grading",
    )

    @field_validator("url")
    @classmethod
    def _a_server_url(cls, url: str | None) -> str | None:
        if url is None:
            return url
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https", "ws", "wss") or not parts.hostname:
            raise ValueError(f"{url!r} is not an http(s):// or ws(s):// URL with a host")
        return url.rstrip("/")


class DataConfig(_Section):
    source: str = Field(
        "spine", description="rollout source: spine | openenv | text | module:Class"
    )
    path: str | None = Field(None, description="tasks for the spine source (JSONL or a name)")
    shuffle: bool = Field(True, description="reshuffle the tasks every epoch (seeded)")
    repo_mirror: str | None = Field(
        None,
        description="folder of git clones <owner>__<name>: R2E-Gym rows whose image this engine "
        "lacks are built from source from it (deepswe.env.recipes.r2e_gym.environment)",
    )
    r2e_env: Literal["auto", "build", "image"] = Field(
        "auto",
        description="R2E-Gym rows: R2E-Gym's own image when the engine has it, else built from "
        "source (auto), always built (build), or the image only (image)",
    )
    health: str | None = Field(
        None,
        description="a health manifest (deepswe-eval health's health.json, or an audit.json): "
        "the tasks it calls unhealthy are left out; default: a health.json beside data.path",
    )
    include_unhealthy: bool = Field(
        False, description="keep the tasks the manifest calls unhealthy"
    )
    weak_tasks: Literal["keep", "leave_out"] = Field(
        "keep",
        description="tasks whose tests the manifest measured weak (a wrong fix made from gold earns "
        "reward 1: deepswe-eval health --mutants K): kept and counted (the 42.2% recipe trained on "
        "R2E-Gym as published), or left out",
    )
    text: TextEnvConfig = Field(default_factory=TextEnvConfig)
    openenv: OpenEnvSourceConfig = Field(default_factory=OpenEnvSourceConfig)


class RolloutConfig(_Section):
    tasks_per_step: int = Field(8, ge=1, description="tasks per step (rLLM train_batch_size)")
    group_size: int = Field(8, ge=1, description="rollouts per task, G (rLLM rollout.n)")
    concurrency: int = Field(8, ge=1, description="episodes run at once (threads)")
    temperature: float = Field(1.0, ge=0, description="sampling temperature (rLLM: 1.0)")
    max_prompt_tokens: int = Field(4096, ge=1, description="first prompt budget (rLLM 4096)")
    max_response_tokens: int = Field(
        32768, ge=1, description="tokens after the prompt per trajectory (rLLM 32768)"
    )
    max_tokens_per_turn: int | None = Field(None, ge=1, description="cap per reply; None: none")
    old_logprobs: Literal["recompute", "engine"] = Field(
        "recompute",
        description="pi_old: recomputed by the trainer (as the reference) or the "
        "engine's sampled log-probs",
    )
    max_staleness: int = Field(
        0,
        ge=0,
        le=1,
        description="policy versions a trained trajectory may lag: 0 = synchronous GRPO++ "
        "(DeepSWE); 1 = the next step's episodes are sampled while this step trains (one "
        "engine holds one version of the weights, so 1 is the most; trainer.py)",
    )


class EpisodeConfig(EpisodeLimits):
    """A training episode: the env's EpisodeLimits itself (one model for evaluation and
    training), with training's defaults (rLLM's 50 steps and short prompt), plus the reward run
    and the sandbox."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_steps: int = Field(50, gt=0, description="agent steps per training episode (rLLM 50)")
    max_context_tokens: int | None = Field(  # type: ignore[assignment]
        None,
        gt=0,
        description="None: rollout.max_prompt_tokens + rollout.max_response_tokens, rLLM's "
        "bound on a trajectory (4,096 + 32,768)",
    )
    prompt_variant: Variant = Field("train", description="train: rLLM's prompt; eval: R2E-Gym's")
    reward_timeout_s: float | None = Field(300.0, gt=0, description="hidden-test run; None: task's")
    sandbox_backend: str = Field("docker", description="deepswe.env sandbox backend")
    sandbox: SandboxLimits = Field(default_factory=SandboxLimits)

    def limits(self, rollout: RolloutConfig) -> EpisodeLimits:
        """The EpisodeLimits an episode runs under, its context bound filled from `rollout`."""
        fields = self.model_dump(include=set(EpisodeLimits.model_fields))
        if fields["max_context_tokens"] is None:
            fields["max_context_tokens"] = rollout.max_prompt_tokens + rollout.max_response_tokens
        return EpisodeLimits(**fields)


class EngineConfig(_Section):
    name: str = Field("hf", description="inference engine: hf | vllm | module:Class")
    tensor_parallel: int = Field(1, ge=1, description="GPUs per engine replica (vllm)")


class BackendConfig(_Section):
    name: str = Field("hf", description="training backend: hf | megatron | module:Class")
    optim: OptimConfig = Field(default_factory=OptimConfig)
    logprob_chunk: int = Field(1024, ge=1, description="positions per log-softmax chunk")
    parallel: ParallelConfig = Field(
        default_factory=ParallelConfig, description="megatron: tensor/pipeline/context parallel"
    )
    megatron: MegatronOptions = Field(
        default_factory=MegatronOptions,
        description="megatron: distributed optimizer, sequence parallelism, recomputation",
    )


class ClusterConfig(_Section):
    """Where the run's parts live (deepswe.train.cluster: the placement plan and Ray)."""

    gpus: int = Field(0, ge=0, description="GPUs the run needs in all (0: CPU run)")
    scheduler: Literal["local", "ray"] = Field(
        "local",
        description="local: rollouts on a thread pool in the trainer process; ray: the "
        "engine and the rollout workers as Ray actors",
    )
    address: str | None = Field(None, description="ray.init address; None: start a local Ray")
    gpus_per_node: int = Field(8, ge=1, description="GPUs on each node of the cluster")
    rollout_workers: int | None = Field(
        None, ge=1, description="Ray rollout-worker actors; None: rollout.concurrency"
    )
    cpus_per_rollout_worker: float = Field(
        1.0,
        gt=0,
        description="CPUs Ray reserves for each rollout worker (the sandboxes not "
        "counted: they run in the container engine)",
    )
    cpu_data_parallel: int = Field(
        1,
        ge=1,
        description="CPU runs (gpus 0): data-parallel trainer ranks, the CPU stand-in "
        "for the DP a GPU plan derives from cluster.gpus; trainer world = TP x PP x CP x this. "
        "Above 1 needs scheduler ray and backend megatron",
    )
    cpu_colocate: bool = Field(
        False,
        description="CPU runs: put the engine inside the trainer-rank actors (one per "
        "model-parallel group, hf engine) as a GPU plan always does: the hybrid-worker seam on "
        "CPU. Needs scheduler ray and backend megatron",
    )
    cpus_per_trainer_rank: float = Field(
        1.0,
        gt=0,
        description="CPUs Ray reserves for each trainer-rank actor (CPU runs of a "
        "trainer world above 1); its torch threads are this, rounded down, at least 1",
    )


class TrainConfig(_Section):
    run: RunConfig = Field(default_factory=RunConfig)
    model: ModelConfig
    data: DataConfig = Field(default_factory=DataConfig)
    rollout: RolloutConfig = Field(default_factory=RolloutConfig)
    episode: EpisodeConfig = Field(default_factory=EpisodeConfig)
    engine: EngineConfig = Field(default_factory=EngineConfig)
    backend: BackendConfig = Field(default_factory=BackendConfig)
    algo: GRPOConfig = Field(default_factory=GRPOConfig)
    cluster: ClusterConfig = Field(default_factory=ClusterConfig)
    sft: SFTConfig = Field(default_factory=SFTConfig)  # deepswe-train sft only (tiny profile)
    # The profile's evaluation protocol: read by deepswe-eval, validated here too so that
    # `deepswe-train validate-config` checks a whole profile. Training never uses it.
    eval: EvalConfig = Field(default_factory=EvalConfig)
    # deepswe-reproduce tts (test-time scaling): validated here for the same reason; unused here.
    tts: TTSConfig = Field(default_factory=TTSConfig)
    # `make reproduce`'s stage sizes: validated by deepswe-reproduce (deepswe.reproduce.config),
    # which sits above training (nothing imports train's callers); passed through here.
    reproduce: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _consistent(self) -> TrainConfig:
        if self.data.source in ("spine", "openenv") and not self.data.path:
            raise ValueError(
                f"data.path: the {self.data.source} source needs a task file or dataset name"
            )
        if self.data.source == "openenv" and self.data.openenv.url is None:
            raise ValueError(
                "data.openenv.url: the openenv source needs the server's URL (deepswe-eval serve)"
            )
        return self


def load_config(path: str | Path, overrides: list[str] = ()) -> TrainConfig:  # type: ignore[assignment]
    """The validated config of YAML file `path` (the whole profile) with `overrides` (full
    dotted paths) applied in order: deepswe.data.profile's one loader."""
    return load_section(Path(path), None, TrainConfig, overrides)


def validate(data: dict[str, Any], where: str) -> TrainConfig:
    return validate_section(TrainConfig, data, where)


def resolved(cfg: TrainConfig) -> dict[str, Any]:
    """The fully resolved config (every default filled in) as plain data."""
    return cfg.model_dump(mode="json")


def dump_config(cfg: TrainConfig, path: Path) -> None:
    """Write the fully resolved config as YAML (runs/ID/config.yaml)."""
    path.write_text(yaml.safe_dump(resolved(cfg), sort_keys=False))
