"""Containers this process may have made but holds no answer for: found by label and removed.

A create whose answer is lost (the call timed out, the connection dropped, the process was
interrupted mid-call) may still land in the daemon, now or later: the request can sit in a
busy daemon past the client's timeout. Each sandbox labels its container with its own id
(`deepswe.sandbox-id`) before the create call, so the reaper looks for those ids in one list
call right away and again on a widening schedule, removing each as it appears. A removal that
got no answer is handed here too. At exit, whatever this process still has is removed; a
process killed before that leaves its containers to the next start's sweep and to `gc`.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import threading
import time

import docker.errors

from deepswe.env.sandbox.docker_engine import NO_ANSWER, engine
from deepswe.env.sandbox.owner import HOST, PID, SANDBOX_ID, START, own_labels

log = logging.getLogger(__name__)
# Seconds after the loss at which the engine is asked again. A create the daemon holds longer
# than the last check is left to the exit sweep, the next process's sweep and gc.
CHECKS_S = (0.0, 1.0, 3.0, 10.0, 30.0, 90.0, 300.0)
CALL_TIMEOUT_S = 30.0
EXIT_SECONDS = 20.0  # the exit sweep's bound: a hung engine must not hang the exit


class Reaper:
    """Lost sandbox ids of this process, per engine, checked on a schedule in one thread."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._lost: dict[str, tuple[str, float, int]] = {}  # id -> (engine, since, checks done)
        self._thread: threading.Thread | None = None

    def lost(self, sandbox_id: str, host: str) -> None:
        """The container named `sandbox_id` on engine `host` may exist: find it, remove it."""
        with self._lock:
            self._lost[sandbox_id] = (host, time.monotonic(), 0)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="reaper", daemon=True)
                self._thread.start()
            self._lock.notify_all()

    def pending(self) -> list[str]:
        with self._lock:
            return sorted(self._lost)

    def wait_idle(self, timeout: float) -> bool:
        """Until nothing is pending (True) or `timeout` passes (False)."""
        end = time.monotonic() + timeout
        with self._lock:
            while self._lost:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._lock.wait(min(left, 0.2))
        return True

    def _due(self) -> tuple[dict[str, list[str]], float]:
        """Ids due for a check now, by engine; and the seconds until the next one is due."""
        now, due, wake = time.monotonic(), {}, 60.0
        for sid, (host, since, checks) in self._lost.items():
            at = since + CHECKS_S[checks]
            if at <= now:
                due.setdefault(host, []).append(sid)
            else:
                wake = min(wake, at - now)
        return due, wake

    def _run(self) -> None:
        while True:
            with self._lock:
                if not self._lost:
                    self._thread = None
                    return
                due, wake = self._due()
                if not due:
                    self._lock.wait(wake)
                    continue
            for host, ids in due.items():
                gone = self._check(host, ids)
                with self._lock:
                    for sid in ids:
                        self._advance(sid, gone)
                    self._lock.notify_all()

    def _advance(self, sid: str, gone: set[str]) -> None:
        entry = self._lost.get(sid)
        if entry is None:
            return
        host, since, checks = entry
        if sid in gone or checks + 1 >= len(CHECKS_S):
            if sid not in gone:
                log.warning("sandbox %s: no container found after %.0fs", sid, CHECKS_S[-1])
            del self._lost[sid]
        else:
            self._lost[sid] = (host, since, checks + 1)

    def _check(self, host: str, ids: list[str]) -> set[str]:
        """Remove the containers of `ids` that exist; the ids now known gone. An id is known
        gone only once its container was found and removed: absence may mean not yet made."""
        api = engine(CALL_TIMEOUT_S, host).api
        mine = own_labels()
        filters = {"label": [f"{k}={mine[k]}" for k in (HOST, PID, START) if k in mine]}
        try:
            rows = api.containers(all=True, filters=filters)
        except (docker.errors.APIError, *NO_ANSWER) as exc:
            log.warning("reaper: cannot list containers (%s); will try again", exc)
            return set()
        gone = set()
        for row in rows:
            sid = (row.get("Labels") or {}).get(SANDBOX_ID)
            if sid in ids:
                try:
                    api.remove_container(row["Id"], force=True)
                    gone.add(sid)
                except docker.errors.NotFound:
                    gone.add(sid)
                except (docker.errors.APIError, *NO_ANSWER) as exc:
                    log.warning("reaper: cannot remove %s yet (%s)", sid, exc)
        return gone


REAPER = Reaper()
_hosts: set[str] = set()  # engines this process made sandboxes on


def made_on(host: str) -> None:
    """Remember that this process makes sandboxes on engine `host`: swept at exit."""
    if not _hosts:
        atexit.register(_exit_sweep)
    _hosts.add(host)


def _exit_sweep() -> None:
    """Remove every container this process still has (a lost create, a start cut short):
    live sandboxes stop by themselves when their stream closes at exit, and are removed."""
    end = time.monotonic() + EXIT_SECONDS
    mine = own_labels()
    filters = {"label": [f"{k}={mine[k]}" for k in (HOST, PID, START) if k in mine]}
    for host in sorted(_hosts):
        with contextlib.suppress(Exception):  # at exit: nothing left to report to
            api = engine(min(CALL_TIMEOUT_S, max(1.0, end - time.monotonic())), host).api
            for row in api.containers(all=True, filters=filters):
                if time.monotonic() > end:
                    return
                with contextlib.suppress(docker.errors.APIError, *NO_ANSWER):
                    api.remove_container(row["Id"], force=True)


__all__ = ["REAPER", "Reaper", "made_on"]
