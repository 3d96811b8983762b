"""The pipeline: stages run in order, each recorded in OUT/stages.json when it finishes.

A stage is a function of the `Context` that runs the subprojects' own commands (the same ones a
user would type; each is printed and logged to OUT/logs/<stage>.log) and returns what it made
and the numbers the report needs. A rerun skips the stages recorded as done and reruns the
first one that is not; the commands it runs resume on their own where they can (an evaluation
folder keeps its finished episodes, training continues from its last checkpoint, test-time
scaling keeps its verdicts). `fresh=True` removes OUT first.

A stage that fails stops the pipeline: the state records the error, the report is written with
what finished, and the error is raised as `StageFailed` with the reason and the log's tail.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

from deepswe.reproduce.config import ReproduceConfig

STATE = "stages.json"


class StageFailed(RuntimeError):
    """A stage could not finish; the message says which, why and where its log is."""


@dataclass
class StageResult:
    """What a stage made (paths relative to the repository root) and the numbers it measured."""

    artifacts: list[str] = field(default_factory=list)
    numbers: dict[str, Any] = field(default_factory=dict)


@dataclass
class Context:
    """Everything a stage needs: where the run lives, the profile, and a command runner."""

    profile: Path  # the profile YAML
    out: Path  # runs/reproduce-<profile>
    cfg: ReproduceConfig
    bin: Path = field(default_factory=lambda: Path(sys.executable).parent)  # the venv's bin/
    echo: Callable[[str], None] = print
    stage: str = ""  # the running stage: names its log
    commands: list[str] = field(default_factory=list)  # what the running stage ran

    def path(self, *parts: str) -> Path:
        return self.out.joinpath(*parts)

    def sh(self, *args: str | Path, env: dict[str, str] | None = None) -> str:
        """Run one command (a console script of the venv, or any program), its output shown and
        appended to the stage's log; StageFailed with the log's tail on a non-zero exit.
        Returns the output."""
        cmd = [str(a) for a in args]
        exe = self.bin / cmd[0]
        if exe.exists():
            cmd[0] = str(exe)
        shown = " ".join([Path(cmd[0]).name if exe.exists() else cmd[0], *cmd[1:]])
        self.commands.append(shown)
        self.echo(f"$ {shown}")
        log = self.path("logs", f"{self.stage}.log")
        log.parent.mkdir(parents=True, exist_ok=True)
        lines: list[str] = []
        with log.open("a") as fh:
            fh.write(f"$ {shown}\n")
            fh.flush()
            proc = subprocess.Popen(
                cmd,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                env={**os.environ, **(env or {})},
            )
            assert proc.stdout is not None
            for line in proc.stdout:
                fh.write(line)
                fh.flush()  # `tail -f logs/<stage>.log` follows the stage
                lines.append(line)
                self.echo(line.rstrip("\n"))
            rc = proc.wait()
        if rc != 0:
            tail = "".join(lines[-15:])
            raise StageFailed(f"`{shown}` exited {rc} (log: {log})\n{tail}")
        return "".join(lines)


class RunContext(Protocol):
    """What run_pipeline needs of a run: reproduce's Context and test-time scaling's Ctx."""

    out: Path
    profile: Path
    stage: str  # set by run_pipeline: the running stage
    commands: list[str]  # what the running stage ran, for stages.json

    def echo(self, msg: str) -> None: ...


@dataclass
class Stage:
    name: str
    what: str  # one line for the report's stage table
    run: Callable[[Any], StageResult]  # of the pipeline's context


def read_state(out: Path) -> dict[str, Any]:
    """OUT/stages.json; a state of another shape (test-time scaling's before it ran on this
    runner) counts as nothing done: its stages run again and skip what is on disk."""
    try:
        state = json.loads((out / STATE).read_text())
    except FileNotFoundError:
        return {"stages": {}}
    return state if isinstance(state.get("stages"), dict) else {"stages": {}}


def write_state(out: Path, state: dict[str, Any]) -> None:
    tmp = out / (STATE + ".tmp")
    tmp.write_text(json.dumps(state, indent=1))
    tmp.replace(out / STATE)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def run_pipeline(
    ctx: RunContext,
    stages: list[Stage],
    *,
    fresh: bool = False,
    setup_seconds: float | None = None,
    after: Callable[[Any], None] | None = None,
) -> dict[str, Any]:
    """Run `stages` in order, skipping those recorded done; `after` (the report) runs at the end
    and after a failure. Returns the state. Raises StageFailed (after `after`)."""
    if fresh and ctx.out.exists():
        shutil.rmtree(ctx.out)
    ctx.out.mkdir(parents=True, exist_ok=True)
    state = read_state(ctx.out)
    state.setdefault("stages", {})
    state["profile"] = str(ctx.profile)
    state["order"] = [s.name for s in stages]
    state["what"] = {s.name: s.what for s in stages}
    if setup_seconds is not None:
        state["setup_seconds"] = round(setup_seconds, 1)
    state.setdefault("started", _now())
    write_state(ctx.out, state)
    try:
        for i, stage in enumerate(stages, 1):
            rec = state["stages"].get(stage.name, {})
            if rec.get("status") == "done":
                ctx.echo(
                    f"== [{i}/{len(stages)}] {stage.name}: done before "
                    f"({rec['seconds']:.0f} s), skipped"
                )
                continue
            ctx.echo(f"== [{i}/{len(stages)}] {stage.name}: {stage.what}")
            ctx.stage, ctx.commands = stage.name, []
            rec = {"status": "running", "started": _now(), "attempts": rec.get("attempts", 0) + 1}
            state["stages"][stage.name] = rec
            write_state(ctx.out, state)
            t0 = time.monotonic()
            try:
                result = stage.run(ctx)
            except BaseException as exc:  # a failed stage, or ^C: record it, then stop
                rec.update(
                    status="failed",
                    seconds=round(time.monotonic() - t0, 1),
                    commands=ctx.commands,
                    error=f"{type(exc).__name__}: {exc}"[:4000],
                )
                write_state(ctx.out, state)
                if isinstance(exc, StageFailed):
                    raise
                if isinstance(exc, Exception):
                    raise StageFailed(f"stage {stage.name}: {type(exc).__name__}: {exc}") from exc
                raise
            rec.update(
                status="done",
                seconds=round(time.monotonic() - t0, 1),
                commands=ctx.commands,
                artifacts=result.artifacts,
                numbers=result.numbers,
            )
            write_state(ctx.out, state)
            ctx.echo(f"== {stage.name}: done in {rec['seconds']:.0f} s")
        state["finished"] = _now()
        write_state(ctx.out, state)
    finally:
        if after is not None:
            after(ctx)
    return state
