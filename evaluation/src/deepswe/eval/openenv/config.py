"""The server's config: a profile's `openenv:` section (deepswe.data.profile's one loader), every
field documented, unknown keys refused by name."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from deepswe.data.profile import load_section
from deepswe.env.agent.loop import EpisodeLimits
from deepswe.env.sandbox import SandboxLimits


class OpenEnvConfig(BaseModel):
    """One OpenEnv server of SWE tasks: what it serves, each episode's limits, its sessions."""

    model_config = ConfigDict(extra="forbid")

    tasks: str = Field(
        ..., description="the task set: a dataset name (swe-mini, r2e-gym-subset, ...) or a file"
    )
    health: str | None = Field(
        None, description="a health manifest (deepswe-eval health's health.json or audit.json)"
    )
    include_unhealthy: bool = Field(False, description="serve the tasks the manifest refuses")
    seed: int = Field(0, description="the order in which resets without a task id get tasks")
    episode: EpisodeLimits = Field(
        default_factory=EpisodeLimits,
        description="steps, wall time, per-action timeout, prompts, scaffold (context: the client's)",
    )
    sandbox: SandboxLimits = Field(default_factory=SandboxLimits)
    sandbox_backend: str = Field("docker", description="deepswe.env sandbox backend")
    grading_rules: Literal["task", "strict", "swebench"] = Field(
        "task", description="as eval.grading_rules: each task's own, or these for every task"
    )
    repo_mirror: str | None = Field(
        None, description="git clones <owner>__<name>: SWE-bench and R2E-Gym rows from source"
    )
    swebench_env: Literal["auto", "build", "image"] = Field(
        "auto", description="as eval.swebench_env"
    )
    r2e_env: Literal["auto", "build", "image"] = Field("auto", description="as eval.r2e_env")
    max_sessions: int = Field(8, ge=1, description="sessions (sandboxes) at once; more are refused")
    session_ttl_s: float | None = Field(
        600.0,
        gt=0,
        description="a session idle this long is closed with its sandbox (None: never); must "
        "exceed episode.action_timeout_s, since a call's time counts as idle",
    )
    host: str = Field("127.0.0.1", description="the address the server listens on")
    port: int = Field(8000, ge=0, le=65535, description="its port (0: any free one)")

    @model_validator(mode="after")
    def _ttl_outlasts_a_call(self) -> OpenEnvConfig:
        if self.session_ttl_s is not None and self.session_ttl_s <= self.episode.action_timeout_s:
            raise ValueError(
                f"session_ttl_s ({self.session_ttl_s:g}) must exceed episode.action_timeout_s "
                f"({self.episode.action_timeout_s:g}): openenv counts a call in flight as idle"
            )
        return self


def load_openenv_config(
    profile: str | Path | None, overrides: list[str] = (), edits: dict[str, Any] | None = None
) -> OpenEnvConfig:  # type: ignore[assignment]
    """The validated `openenv:` section of `profile`, then `openenv.a.b=v` overrides and the
    command line's `edits`; ConfigError naming each bad key by its full path."""
    return load_section(profile, "openenv", OpenEnvConfig, overrides, edits)


__all__ = ["OpenEnvConfig", "load_openenv_config"]
