"""The `reproduce:` section of a profile: what `make reproduce` runs beyond the other sections.

The other sections already say how to train (run, sft, rollout, ...), evaluate (eval) and
select (tts); this one says which evaluations the pipeline adds, on which tasks, and the
preflight's thresholds. Unknown keys are refused by name, like every section.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from deepswe.data.profile import load_section


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SweToy(_Section):
    """swe-toy, the tiny profile's curriculum (deepswe.data.swetoy): sizes and seed."""

    out: str = Field("runs/data/swe-toy", description="folder of the dataset (made by `data`)")
    train: int = Field(8, ge=1, description="train-split repositories (SFT and GRPO++)")
    test: int = Field(8, ge=1, description="held-out repositories (the learning evaluation)")
    seed: int = Field(0, description="seeds the repositories and statements")


class Learning(_Section):
    """Held-out evaluation of the trained model against its own SFT start: the same tasks,
    protocol and per-(task, run, reply) seeds, both served by vLLM and driven by the
    openai policy, as a user evaluates any model."""

    dataset: str = Field("runs/data/swe-toy/test.jsonl", description="held-out tasks")
    runs: int = Field(4, ge=1, description="runs per task and model (Pass@1 +- std over runs)")
    seed: int = Field(0, description="base seed of the sampled replies (the same for both)")
    max_steps: int = Field(4, ge=1, description="steps per episode (as in training)")
    max_tokens: int = Field(256, ge=1, description="tokens per reply (rollout.max_tokens_per_turn)")
    workers: int = Field(2, ge=1, description="episodes at once")


class SweMiniCheck(_Section):
    """The trained model and the gold/empty baselines on a few swe-mini:test tasks: real bugs
    in real projects, where a 10M-parameter model is expected to resolve nothing; the
    baselines show the harness grades those tasks (gold resolves, empty does not)."""

    dataset: str = Field("swe-mini:test", description="dataset name or task file")
    per_repo: int = Field(2, ge=1, description="first N tasks (by id) of each project")
    runs: int = Field(1, ge=1, description="model runs per task")
    max_steps: int = Field(4, ge=1, description="steps per episode")
    max_tokens: int = Field(256, ge=1, description="tokens per reply")


class Preflight(_Section):
    min_free_gb: float = Field(
        12.0, ge=0, description="free disk under runs/ and Docker's root (images, models, runs)"
    )
    vllm: bool = Field(True, description="need vLLM's CPU build (.venv-vllm) for the evaluations")


class ReproduceConfig(_Section):
    profile: Literal["tiny", "deepswe-32b"] = Field("tiny", description="which pipeline")
    budget_minutes: float = Field(
        20.0, gt=0, description="the wall time the profile's sizes were chosen for (README)"
    )
    swe_toy: SweToy = Field(default_factory=SweToy)
    learning: Learning = Field(default_factory=Learning)
    swe_mini: SweMiniCheck = Field(default_factory=SweMiniCheck)
    tts: bool = Field(True, description="run the test-time-scaling stage (the profile's tts:)")
    tts_overrides: list[str] = Field(
        default_factory=list,
        description="tts.a.b=v overrides of the tts stage: the profile's tts: section sizes make "
        "eval-tts; the pipeline may run it smaller to keep its budget",
    )
    preflight: Preflight = Field(default_factory=Preflight)


def load_reproduce_config(path: str | Path, overrides: list[str] = ()) -> ReproduceConfig:
    """The validated `reproduce:` section of profile `path`, `overrides` (reproduce.a.b=v)
    applied; ConfigError naming the file and the field otherwise."""
    return load_section(path, "reproduce", ReproduceConfig, overrides)
