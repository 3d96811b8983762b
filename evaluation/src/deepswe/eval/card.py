"""The protocol card: everything that decides what a run measures, written to config.json.

A resumed run must measure the same thing as the run it continues, so `check_resume` compares
the protocol fields of the card on disk with the new one and refuses on any difference.
Operational fields (workers, endpoint URL, code version, start time) may change on resume.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from deepswe.data.task import Task
from deepswe.env.agent import prompts
from deepswe.env.agent.loop import EpisodeLimits


class ProtocolMismatch(Exception):
    """A resume asked for a different protocol than the run folder holds."""


class ProtocolCard(BaseModel):
    """What was measured and how. `PROTOCOL_FIELDS` must match for a resume."""

    model_config = ConfigDict(extra="forbid")

    dataset: str = Field(description="name or path given to --dataset")
    dataset_sha256: str = Field(description="sha256 over the selected tasks' canonical JSON")
    instance_ids: list[str] = Field(description="the selected tasks, in run order")
    policy: str = Field(description="gold | empty | openai | replay")
    policy_args: dict[str, str] = Field(default_factory=dict, description="--policy-arg k=v")
    model: str | None = Field(None, description="model name (openai policy)")
    temperature: float | None = Field(None, description="sampling temperature (openai policy)")
    max_tokens: int | None = Field(None, description="per reply (openai policy)")
    runs: int = Field(gt=0, description="independent runs per task")
    limits: EpisodeLimits
    prompt_sha256: str = Field(description="sha256 of the system + user prompt templates used")
    infra_retries: int = Field(ge=0, description="extra tries after an infrastructure error")
    swebench_build: str = Field("", description="how SWE-bench environments were obtained")
    # operational, free to change on resume:
    workers: int = Field(1, gt=0)
    base_url: str | None = None
    code_version: str = Field("", description="`git describe --always --dirty` of this checkout")
    started_at: str = Field("", description="UTC time the run folder was created")


PROTOCOL_FIELDS = (
    "dataset_sha256",
    "instance_ids",
    "policy",
    "policy_args",
    "model",
    "temperature",
    "max_tokens",
    "runs",
    "limits",
    "prompt_sha256",
    "infra_retries",
    "swebench_build",
)


def tasks_sha256(tasks: list[Task]) -> str:
    h = hashlib.sha256()
    for t in tasks:
        h.update(t.model_dump_json().encode())
        h.update(b"\n")
    return h.hexdigest()


def prompt_sha256(variant: str) -> str:
    text = prompts.system_prompt(variant) + "\0" + prompts.user_prompt("{problem}", variant)
    return hashlib.sha256(text.encode()).hexdigest()


def code_version(cwd: Path | None = None) -> str:
    """`git describe --always --dirty` of the checkout this code runs from, or "unknown"."""
    where = cwd or Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "describe", "--always", "--dirty", "--tags"],
            cwd=where,
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 else "unknown"


def utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def check_resume(old: ProtocolCard, new: ProtocolCard) -> None:
    """Raise ProtocolMismatch naming every protocol field that differs."""
    a, b = old.model_dump(mode="json"), new.model_dump(mode="json")
    diffs = [
        f"{k}: on disk {_short(a[k])}, asked {_short(b[k])}"
        for k in PROTOCOL_FIELDS
        if a[k] != b[k]
    ]
    if diffs:
        raise ProtocolMismatch(
            "this run folder was started with a different protocol; use a new --out, or the "
            "same options as before. Differences:\n  " + "\n  ".join(diffs)
        )


def _short(value: object) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 120 else text[:117] + "..."
