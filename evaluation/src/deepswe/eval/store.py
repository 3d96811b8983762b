"""The run folder on disk: one JSON file per finished episode, written atomically.

Layout of `runs/<ID>/`:

    config.json                          the protocol card (written once, checked on resume)
    episodes/<instance_id>/run-<k>.json  one EpisodeRecord per finished (task, run)

A record is written to a temporary file in the same folder, flushed, fsync'ed and moved into
place with `os.replace`, which POSIX makes atomic: a run killed at any moment leaves either the
whole record or none of it (plus, at worst, a stray `*.tmp` that `clean()` removes). What is on
disk is the only truth about what is done, so a resumed run skips exactly those episodes.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from enum import Enum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from deepswe.env.grading.outcomes import Outcome
from deepswe.env.trajectory import Trajectory


class EpisodeStatus(str, Enum):
    """How a stored episode counts. Everything not GRADED is kept out of the unresolved count."""

    GRADED = "graded"  # the grader gave an outcome (resolved, unresolved, apply failed, timeout)
    INFRA_ERROR = "infra_error"  # still an infrastructure failure after every retry
    UNSUPPORTED_ENV = "unsupported_env"  # no base image serves the task's environment


class EpisodeRecord(BaseModel):
    """One finished (task, run): what the summary counts and what the report reads."""

    model_config = ConfigDict(extra="forbid")

    instance_id: str
    run: int = Field(ge=0, description="run index k, 0-based")
    repo: str
    status: EpisodeStatus
    outcome: Outcome | None = Field(None, description="the grader's outcome when GRADED")
    attempts: int = Field(1, ge=0, description="tries, infra-error retries included")
    reason: str = Field("", description="why INFRA_ERROR / UNSUPPORTED_ENV")
    started_at: float = Field(0.0, description="unix seconds")
    finished_at: float = Field(0.0, description="unix seconds")
    trajectory: Trajectory | None = Field(None, description="the whole episode, grade included")
    verifier_score: float | None = Field(None, description="for Best@k, when a verifier ran")

    @property
    def resolved(self) -> bool:
        return self.status is EpisodeStatus.GRADED and self.outcome is Outcome.RESOLVED


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with_suppressed_unlink(tmp)
        raise


def with_suppressed_unlink(path: str | Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def atomic_write_json(path: Path, obj: object) -> None:
    """Write `obj` as JSON to `path` so that readers see the old file or the new one, never half."""
    _atomic_write(Path(path), json.dumps(obj, indent=1, sort_keys=False) + "\n")


class RunStore:
    """Reads and writes one run folder."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        self.episodes_dir = self.root / "episodes"

    @property
    def config_path(self) -> Path:
        return self.root / "config.json"

    def episode_path(self, instance_id: str, run: int) -> Path:
        # instance ids are "owner__name-123" style: safe as folder names; "/" is not allowed.
        if "/" in instance_id or instance_id in {"", ".", ".."}:
            raise ValueError(f"instance_id {instance_id!r} cannot name a folder")
        return self.episodes_dir / instance_id / f"run-{run}.json"

    def save(self, record: EpisodeRecord) -> Path:
        path = self.episode_path(record.instance_id, record.run)
        _atomic_write(path, record.model_dump_json(indent=1) + "\n")
        return path

    def done(self) -> set[tuple[str, int]]:
        """(instance_id, run) of every episode stored with a result. An INFRA_ERROR record is
        not a result: a resumed run tries that episode again (and replaces the record)."""
        return {
            (r.instance_id, r.run)
            for r in self.records()
            if r.status is not EpisodeStatus.INFRA_ERROR
        }

    def records(self) -> list[EpisodeRecord]:
        """Every stored record, sorted by (instance_id, run). Temp files are never read."""
        out = []
        if not self.episodes_dir.is_dir():
            return out
        for path in sorted(self.episodes_dir.glob("*/run-*.json")):
            out.append(EpisodeRecord.model_validate_json(path.read_text(encoding="utf-8")))
        return sorted(out, key=lambda r: (r.instance_id, r.run))

    def clean(self) -> int:
        """Remove temp files a killed writer left; returns how many."""
        stray = list(self.episodes_dir.glob("*/.*.tmp")) if self.episodes_dir.is_dir() else []
        for p in stray:
            with_suppressed_unlink(p)
        return len(stray)
