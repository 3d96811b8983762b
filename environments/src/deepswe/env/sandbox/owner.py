"""Who made a sandbox: labels naming the host and the process, and whether that process lives.

Every sandbox (a container or a pod) carries these labels from its create call on, so a
process that dies (SIGKILL, OOM, a crash) leaves sandboxes that the next start and `gc` can
tell apart from live ones. A pid alone is reused by the kernel; the process's start time
(`/proc/<pid>/stat`, field 22, clock ticks since boot) makes the pair unique on a host.
"""

from __future__ import annotations

import os
import socket
from functools import cache

LABEL = "deepswe.sandbox"
HOST = "deepswe.host"
PID = "deepswe.owner-pid"
START = "deepswe.owner-start"
# Set before the create call, unique per sandbox: a create whose answer is lost is found by it.
SANDBOX_ID = "deepswe.sandbox-id"


def process_start(pid: int) -> str | None:
    """When `pid` started, in clock ticks since boot; None when there is no such process or
    /proc does not say (not Linux)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read().decode(errors="replace")
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces: split after it.
    fields = stat[stat.rfind(")") + 2 :].split()
    return fields[19] if len(fields) > 19 else None


def host() -> str:
    """This machine as the labels name it (a Kubernetes label value holds 63 characters)."""
    return socket.gethostname()[:63]


@cache
def _labels_of(pid: int) -> dict[str, str]:
    labels = {LABEL: "1", HOST: host(), PID: str(pid)}
    start = process_start(pid)
    if start is not None:
        labels[START] = start
    return labels


def own_labels() -> dict[str, str]:
    """The labels `gc` selects by: every sandbox, its host, its creating process."""
    return dict(_labels_of(os.getpid()))


def owner_alive(labels: dict[str, str]) -> bool:
    """Whether the process that made a sandbox with these labels still runs (on this host).

    A missing or bad pid is a dead owner; a pid that exists with another start time is a new
    process that reused the number, so the owner is dead too.
    """
    try:
        pid = int(labels.get(PID, "0"))
    except ValueError:
        return False
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # someone else's process: it exists
    started = labels.get(START)
    if started is None:
        return True  # made before start times were labelled: the pid is all we have
    now = process_start(pid)
    return now is None or now == started


def is_orphan(labels: dict[str, str], *, everything: bool = False) -> bool:
    """A sandbox of this host whose owner is gone (any sandbox at all with `everything`).

    A sandbox with no host label counts as this host's (labels of older versions); one of
    another host is never judged here: its owner's pid means nothing on this machine.
    """
    if everything:
        return True
    if labels.get(HOST, host()) != host():
        return False
    return not owner_alive(labels)


__all__ = [
    "HOST",
    "LABEL",
    "PID",
    "SANDBOX_ID",
    "START",
    "host",
    "is_orphan",
    "own_labels",
    "owner_alive",
    "process_start",
]
