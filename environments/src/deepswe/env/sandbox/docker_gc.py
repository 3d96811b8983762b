"""Removing Docker sandboxes whose owner is gone, on an engine that may be loaded or slow.

`collect` lists once (one call, labels included: no inspect per container), then removes the
chosen containers a few at a time in parallel, each call with its own timeout, and stops
starting removals at its time bound. What it could not remove (an error, no answer, the bound)
is in the report by name and kept in a state file, so a second run continues with it even when
the engine is too busy to list. The first sandbox start of a process runs one `sweep` of this
host's orphans in the background (`sweep_once`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

import docker.errors

from deepswe.env.sandbox import SandboxError
from deepswe.env.sandbox.docker_engine import NO_ANSWER, engine, engine_host
from deepswe.env.sandbox.owner import HOST, LABEL, host, is_orphan

log = logging.getLogger(__name__)
PARALLEL = 8  # removals in flight: the engine serialises much of a removal anyway
CALL_TIMEOUT_S = 30.0
MAX_SECONDS = 300.0
Progress = Callable[[int, int], None]  # (containers dealt with, containers chosen)


@dataclass
class GcReport:
    """What one `collect` did. Names are container names (a sandbox's id)."""

    seen: int = 0  # sandbox containers listed (or resumed from the state file)
    removed: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # name -> why not
    left: list[str] = field(default_factory=list)  # not tried: the time bound came first
    list_error: str | None = None  # the listing failed; only the state file's were tried
    seconds: float = 0.0

    @property
    def complete(self) -> bool:
        """Everything chosen is gone and the engine was listed."""
        return not self.failed and not self.left and self.list_error is None

    def lines(self) -> list[str]:
        """The report in words: what was removed, then each thing that was not, and why."""
        out = [f"removed {len(self.removed)} sandbox container(s) in {self.seconds:.1f}s"]
        if self.list_error:
            out.append(f"could not list the engine's containers: {self.list_error}")
        out += [f"not removed: {name}: {why}" for name, why in sorted(self.failed.items())]
        if self.left:
            out.append(
                f"not tried ({len(self.left)}, the time bound came first; run gc again to "
                f"continue): {' '.join(sorted(self.left))}"
            )
        return out


def state_file() -> Path:
    """Where a stopped run leaves what it still meant to remove, per engine and host."""
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "deepswe"
    slug = "".join(c if c.isalnum() else "_" for c in engine_host())
    return root / f"gc-docker-{host()}-{slug}.json"


def _listed(selector: dict[str, str], timeout: float) -> list[dict]:
    filters = {"label": [f"{LABEL}=1", *(f"{k}={v}" for k, v in selector.items())]}
    rows = engine(timeout).api.containers(all=True, filters=filters)
    return [{"id": r["Id"], "name": r["Names"][0].lstrip("/"), "labels": r["Labels"]} for r in rows]


def _remove(row: dict, timeout: float) -> str | None:
    """None when the container is gone (removed now, before, or by the engine); else why not."""
    try:
        engine(timeout).api.remove_container(row["id"], force=True)
    except docker.errors.NotFound:
        return None
    except docker.errors.APIError as exc:
        if exc.status_code == 409 and "in progress" in str(exc):
            return None  # the engine is removing it (auto-remove)
        return f"the engine refused: {exc.explanation or exc}"
    except NO_ANSWER as exc:
        return f"no answer within {timeout:.0f}s ({type(exc).__name__})"
    return None


def collect(
    *,
    everything: bool = False,
    selector: dict[str, str] | None = None,
    parallel: int = PARALLEL,
    call_timeout_s: float = CALL_TIMEOUT_S,
    max_seconds: float = MAX_SECONDS,
    progress: Progress | None = None,
    state: Path | None = None,
) -> GcReport:
    """Remove this host's sandbox containers whose owner is gone (every sandbox container
    with `everything`), among those carrying the labels in `selector`.

    At most `parallel` removals in flight, each bounded by `call_timeout_s`; none started after
    `max_seconds`. With `state`, what remains is written there and tried first next time.
    """
    started = time.monotonic()
    report = GcReport()
    rows = _resumed(state)
    try:
        rows = _listed(selector or {}, call_timeout_s)
    except (docker.errors.APIError, SandboxError, *NO_ANSWER) as exc:
        report.list_error = f"{type(exc).__name__}: {exc}"
    chosen = [r for r in rows if is_orphan(r["labels"], everything=everything)]
    report.seen = len(rows)
    _remove_all(chosen, report, parallel, call_timeout_s, started + max_seconds, progress)
    report.seconds = time.monotonic() - started
    if state is not None:
        _save(state, [r for r in chosen if r["name"] in report.failed or r["name"] in report.left])
    return report


def _remove_all(
    rows: list[dict],
    report: GcReport,
    parallel: int,
    timeout: float,
    deadline: float,
    progress: Progress | None,
) -> None:
    todo = list(reversed(rows))
    running: dict[Future, dict] = {}
    with ThreadPoolExecutor(max_workers=max(1, parallel), thread_name_prefix="gc") as pool:
        while todo or running:
            while todo and len(running) < parallel and time.monotonic() < deadline:
                row = todo.pop()
                running[pool.submit(_remove, row, timeout)] = row
            if not running:
                break  # the bound came first: the rest are left
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for fut in done:
                row = running.pop(fut)
                why = fut.result()
                if why is None:
                    report.removed.append(row["name"])
                else:
                    report.failed[row["name"]] = why
            if progress is not None:
                progress(len(report.removed) + len(report.failed), len(rows))
    report.left = [r["name"] for r in reversed(todo)]


def _resumed(state: Path | None) -> list[dict]:
    if state is None or not state.exists():
        return []
    try:
        return json.loads(state.read_text())["containers"]
    except (OSError, ValueError, KeyError) as exc:
        log.warning("gc: ignoring unreadable state file %s (%s)", state, exc)
        return []


def _save(state: Path, rows: list[dict]) -> None:
    if not rows:
        with contextlib.suppress(FileNotFoundError):
            state.unlink()
        return
    state.parent.mkdir(parents=True, exist_ok=True)
    tmp = state.with_suffix(".tmp")
    tmp.write_text(json.dumps({"engine": engine_host(), "containers": rows}))
    tmp.replace(state)


_swept: set[str] = set()
_swept_lock = threading.Lock()


def sweep_once() -> None:
    """Once per process and engine, in the background: remove this host's sandboxes whose
    owner is gone (a killed run's), a few at a time so starts keep most of the engine."""
    key = engine_host()
    with _swept_lock:
        if key in _swept:
            return
        _swept.add(key)

    def sweep() -> None:
        try:
            report = collect(selector={HOST: host()}, parallel=2, max_seconds=120.0)
        except Exception as exc:  # a sweep is a courtesy: gc is the tool that must succeed
            log.warning("sandbox sweep failed: %s", exc)
            return
        if report.removed:
            log.info("swept %d leftover sandbox container(s)", len(report.removed))

    threading.Thread(target=sweep, name="sandbox-sweep", daemon=True).start()


__all__ = ["GcReport", "collect", "state_file", "sweep_once"]
