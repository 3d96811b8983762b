"""An evaluation's configuration: the `eval:` section of a profile YAML, plus `a.b=v` overrides.

One model says everything about how episodes are run and graded: the dataset, the policy, runs,
workers, retries, the episode limits and the sandbox limits. `deepswe-eval run --config
configs/<profile>.yaml` reads it (other sections of a profile belong to training and are not
read here); command-line flags and `eval.a.b=value` overrides edit the same model; the run's
protocol card embeds it, so a resume that changes any protocol value is refused by name.
Defaults are DeepSWE's evaluation protocol (100 steps, 64k context, temperature 1.0).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from deepswe.data.profile import ConfigError, load_section, validate_section
from deepswe.data.task import Task
from deepswe.env.agent.loop import EpisodeLimits
from deepswe.env.policies import PolicySpec
from deepswe.env.sandbox import SandboxLimits


class EvalConfig(BaseModel):
    """How an evaluation runs. Fields listed in PROTOCOL decide what it measures."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dataset: str = Field(
        "swe-bench-verified",
        description="swe-bench-verified | r2e-gym-subset | swe-mini[:train|:test] | a task file",
    )
    policy: PolicySpec = Field(default_factory=PolicySpec)
    runs: int = Field(1, ge=1, description="independent runs per task (DeepSWE: 16)")
    baseline_runs: int = Field(
        1, ge=1, description="runs of the gold and empty baselines (`deepswe-eval validate`)"
    )
    workers: int = Field(1, ge=1, description="episodes in flight at once")
    infra_retries: int = Field(2, ge=0, description="retries of an infra error before recording")
    max_infra_errors: int = Field(
        0, ge=0, description="infra_error episodes accepted before the command exits 3"
    )
    episode: EpisodeLimits = Field(default_factory=EpisodeLimits)
    sandbox: SandboxLimits = Field(default_factory=SandboxLimits)
    sandbox_backend: str = Field("docker", description="deepswe.env sandbox backend")
    swebench_env: Literal["auto", "build", "image"] = Field(
        "auto",
        description="SWE-bench environments: the official image when present (auto), always "
        "built from source (build), or the official image (image)",
    )
    r2e_env: Literal["auto", "build", "image"] = Field(
        "auto",
        description="R2E-Gym environments: R2E-Gym's image when the engine has it (auto), "
        "always built from source from --repo-mirror (build), or R2E-Gym's image (image)",
    )
    repo_mirror: str | None = Field(
        None,
        description="folder of git clones <owner>__<name> (SWE-bench and R2E-Gym from source)",
    )
    grading_rules: Literal["task", "strict", "swebench"] = Field(
        "task",
        description="how patches are graded: each task's own rules (task: strict for swe-mini, "
        "swe-toy, R2E-Gym and task files; SWE-bench 4.1.0's for SWE-bench-format tasks, the "
        "42.2% protocol), or these rules for every task (deepswe.data.task.TestSpec.rules)",
    )


# What a resume must keep equal (dataset content and task selection are checked beside these).
# Not here, free to change: workers, max_infra_errors, sandbox_backend, repo_mirror, the policy's
# endpoint and replay folder.
PROTOCOL: tuple[str, ...] = (
    "policy.name",
    "policy.args",
    "policy.model",
    "policy.temperature",
    "policy.max_tokens",
    "policy.seed",  # the draws: a resume with another seed would mix two samplings
    "runs",
    "infra_retries",
    "episode",
    "sandbox",
    "swebench_env",
    "r2e_env",
    "grading_rules",
)


def with_grading_rules(task: Task, cfg: EvalConfig) -> Task:
    """`task` graded by `cfg.grading_rules` (unchanged for "task")."""
    if cfg.grading_rules == "task":
        return task
    spec = task.test_spec.model_copy(update={"rules": cfg.grading_rules})
    return task.model_copy(update={"test_spec": spec})


def protocol_values(cfg: EvalConfig) -> dict[str, Any]:
    """The PROTOCOL fields of `cfg` as plain data, keyed by their dotted names."""
    data = cfg.model_dump(mode="json")
    out: dict[str, Any] = {}
    for key in PROTOCOL:
        node: Any = data
        for part in key.split("."):
            node = node[part]
        out[key] = node
    return out


def load_eval_config(
    profile: str | Path | None, overrides: list[str] = (), edits: dict[str, Any] | None = None
) -> EvalConfig:  # type: ignore[assignment]
    """The validated `eval:` section of `profile` (defaults when None), `overrides` (full dotted
    paths, eval.a.b=v) applied in order, then `edits` (dotted key -> value, from command-line
    flags): deepswe.data.profile's one loader."""
    return load_section(profile, "eval", EvalConfig, overrides, edits)


def validate_eval_config(data: dict[str, Any], where: str) -> EvalConfig:
    return validate_section(EvalConfig, data, where, "eval")


__all__ = [
    "PROTOCOL",
    "ConfigError",
    "EvalConfig",
    "load_eval_config",
    "protocol_values",
    "validate_eval_config",
    "with_grading_rules",
]
