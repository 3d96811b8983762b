"""What every stage of `deepswe-reproduce tts` shares: the run's context, its error, and running
the other subprojects' commands with their output relayed (tts/pipeline.py)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from deepswe.data.task import Task
from deepswe.eval.config import EvalConfig
from deepswe.verify.store import candidates_from_run
from deepswe.verify.tts_config import TTSConfig
from deepswe.verify.types import Candidate

Log = Callable[[str], None]


class TTSError(RuntimeError):
    """A stage cannot go on; the message says what to do. What is on disk is kept."""


@dataclass
class Ctx:
    profile: Path
    out: Path
    cfg: TTSConfig
    eval_cfg: EvalConfig
    eval_overrides: list[str]
    log: Log
    tasks: dict[str, list[Task]] = field(default_factory=dict)  # split -> picked tasks
    dataset: dict[str, list[Task]] = field(default_factory=dict)  # split -> all of its dataset
    notes: list[str] = field(default_factory=list)
    stage: str = ""  # the running stage (deepswe.reproduce.pipeline.run_pipeline sets it)
    commands: list[str] = field(default_factory=list)

    def echo(self, msg: str) -> None:
        self.log(msg)

    def pool(self, split: str) -> Path:
        return self.out / f"pool-{split}"


def cli_bin(name: str) -> str:
    """A console script of this environment (deepswe-eval, deepswe-train)."""
    return str(Path(sys.executable).with_name(name))


def relay(cmd: list[str], log: Log) -> int:
    """Run a command, passing its output on line by line through `log`; its exit status."""
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as p:
        for line in p.stdout:  # type: ignore[union-attr]
            log(line.rstrip("\n"))
    return p.returncode


def with_issues(run: Path, tasks: list[Task]) -> list[Candidate]:
    """Every candidate of a pool run, in task order, its task's problem statement filled in."""
    pools = candidates_from_run(run, tasks)
    return [c for iid in sorted(pools) for c in pools[iid]]


__all__ = ["Ctx", "Log", "TTSError", "cli_bin", "relay", "with_issues"]
