"""Admission control for sandbox starts: a bounded, first-come-first-served gate per backend.

An engine starts only so many sandboxes a second; asked for 256 at once, the Docker daemon
on a 2-core machine answered none of the last 201 creates within the SDK's 300 s read timeout
(issue 26) and made their containers anyway. So every start waits here, in arrival order, until
one of `limit` slots is free, and only then talks to the engine: the engine works at the pace
it sustains, and a start's own timeout counts from its admission, never from its queueing.

The slots bound the lifecycle calls (create, start, the helper's handshake); a ready sandbox
holds none. Removals have their own bound (`stops`), so teardown cannot starve starts.

Limits per backend come from the environment (as the Kubernetes backend's other settings do):
DEEPSWE_DOCKER_STARTS (default: DOCKER_STARTS_PER_CPU x the engine's CPUs, bench/fleet.py
measured why) and DEEPSWE_K8S_STARTS (default K8S_STARTS), or `set_limit` in code.

Progress: `status(backend)` is a FleetStatus (queued / starting / ready ...) a runner can print
whenever it likes; `watch(callback)` calls back on every change.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

# Starts in flight per engine CPU; `bench/fleet.py sweep` measures start throughput against it.
DOCKER_STARTS_PER_CPU = 2
# No cluster was measured (README, Kubernetes backend): the API server and kubelets of a real
# cluster take pod creates in parallel across nodes; 16 keeps a burst within client-side QPS.
K8S_STARTS = 16
ENV = {"docker": "DEEPSWE_DOCKER_STARTS", "kubernetes": "DEEPSWE_K8S_STARTS"}


@dataclass(frozen=True)
class FleetStatus:
    """One backend's sandboxes in this process, at one moment."""

    backend: str
    limit: int  # starts allowed in flight at once
    queued: int  # waiting for a slot
    starting: int  # admitted: creating, starting, handshaking
    ready: int  # started and not yet closed
    started: int  # ready ever, in this process
    failed: int  # starts that ended in an error

    def line(self) -> str:
        """The status in words, for a progress line."""
        return (
            f"{self.backend} sandboxes: {self.queued} queued, {self.starting} starting "
            f"(limit {self.limit}), {self.ready} ready; {self.started} started, "
            f"{self.failed} failed"
        )


Watcher = Callable[[FleetStatus], None]


class Admission:
    """A FIFO gate with `limit` slots: `with gate.slot(): start()`; then `gate.ready()` and,
    when the sandbox is closed, `gate.closed()`."""

    def __init__(self, backend: str, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"admission limit for {backend}: at least 1, not {limit}")
        self.backend = backend
        self.limit = limit
        self._lock = threading.Lock()
        self._waiting: deque[threading.Event] = deque()
        self._starting = 0
        self._ready = 0
        self._started = 0
        self._failed = 0
        self._watchers: list[Watcher] = []

    @contextlib.contextmanager
    def slot(self) -> Iterator[float]:
        """Wait for a slot in arrival order; yields the monotonic time of admission, from which
        the start's timeout counts. An error inside counts as a failed start."""
        self._acquire()
        try:
            yield time.monotonic()
        except BaseException:
            self._release(failed=True)
            raise
        self._release(failed=False)

    def _acquire(self) -> None:
        with self._lock:
            if self._starting < self.limit and not self._waiting:
                self._starting += 1
                turn = None
            else:
                turn = threading.Event()
                self._waiting.append(turn)
        self._notify()
        if turn is None:
            return
        try:
            turn.wait()  # set by _release, which hands its slot straight to us
        except BaseException:  # interrupted while queued: leave the queue, or give back
            with self._lock:
                if turn in self._waiting:
                    self._waiting.remove(turn)
                    turn = None
            if turn is not None:
                self._release(failed=False)
            self._notify()
            raise
        self._notify()

    def _release(self, *, failed: bool) -> None:
        with self._lock:
            self._failed += failed
            if self._waiting and self._starting <= self.limit:
                self._waiting.popleft().set()  # the slot passes on; `starting` stays
            else:
                self._starting -= 1
        self._notify()

    def ready(self) -> None:
        """A sandbox this gate admitted is ready."""
        with self._lock:
            self._ready += 1
            self._started += 1
        self._notify()

    def closed(self) -> None:
        """A ready sandbox was closed."""
        with self._lock:
            self._ready -= 1
        self._notify()

    def set_limit(self, limit: int) -> None:
        """Change the bound; waiting starts are admitted at once if it grew."""
        if limit < 1:
            raise ValueError(f"admission limit for {self.backend}: at least 1, not {limit}")
        with self._lock:
            self.limit = limit
            while self._waiting and self._starting < self.limit:
                self._starting += 1
                self._waiting.popleft().set()
        self._notify()

    def status(self) -> FleetStatus:
        with self._lock:
            return FleetStatus(
                self.backend,
                self.limit,
                len(self._waiting),
                self._starting,
                self._ready,
                self._started,
                self._failed,
            )

    def watch(self, callback: Watcher) -> Callable[[], None]:
        """Call `callback(status)` on every change (from the changing thread; keep it quick);
        returns the function that stops it."""
        with self._lock:
            self._watchers.append(callback)

        def stop() -> None:
            with self._lock, contextlib.suppress(ValueError):
                self._watchers.remove(callback)

        return stop

    def _notify(self) -> None:
        if not self._watchers:
            return
        now = self.status()
        for callback in list(self._watchers):
            callback(now)


_gates: dict[str, Admission] = {}
_gates_lock = threading.Lock()


def limit_from_env(backend: str, default: Callable[[], int]) -> int:
    """The limit DEEPSWE_<BACKEND>_STARTS sets, else `default()`; a bad value is named."""
    name = ENV.get(backend, f"DEEPSWE_{backend.upper()}_STARTS")
    raw = os.environ.get(name)
    if not raw:
        return default()
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r}: a whole number of starts at once") from None
    if value < 1:
        raise ValueError(f"{name}={raw!r}: at least 1")
    return value


def gate(backend: str, default: Callable[[], int]) -> Admission:
    """This process's gate for `backend`, made on first use with `default()` starts at once
    unless the environment sets the limit."""
    with _gates_lock:
        if backend not in _gates:
            _gates[backend] = Admission(backend, limit_from_env(backend, default))
        return _gates[backend]


def status(backend: str = "docker") -> FleetStatus | None:
    """The backend's status in this process; None before its first start."""
    found = _gates.get(backend)
    return found.status() if found else None


def watch(callback: Watcher, backend: str = "docker") -> Callable[[], None]:
    """Call back on every change of `backend`'s status (the gate is made if need be, with the
    backend's default limit); returns the function that stops it."""
    from deepswe.env.sandbox import backend_class

    return backend_class(backend).admission().watch(callback)


def set_limit(backend: str, limit: int) -> None:
    """Bound `backend`'s starts in flight in this process to `limit` from now on."""
    from deepswe.env.sandbox import backend_class

    backend_class(backend).admission().set_limit(limit)


__all__ = [
    "DOCKER_STARTS_PER_CPU",
    "K8S_STARTS",
    "Admission",
    "FleetStatus",
    "gate",
    "limit_from_env",
    "set_limit",
    "status",
    "watch",
]
