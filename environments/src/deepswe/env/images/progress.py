"""A line at least every 30 s while an image build works silently.

Docker prints a build step's output only as the step writes it: a pip install compiling a
C extension, or `git gc` on a large history, can run for minutes without a line, and a user
watching the log cannot tell a slow build from a hung one. `Heartbeat` logs what is running
("<label>: <what>, 95 s so far; last output: ...") whenever `every` seconds have passed since
the last line it or its caller logged, and what the code below says it is doing (`activity`:
an sdist built in a build stage, wheels downloaded).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

EVERY_S = 30.0
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# thread ident -> what the code it runs says it is doing, innermost last (`activity`)
_DOING: dict[int, list[str]] = {}


@contextmanager
def activity(what: str) -> Iterator[None]:
    """Name what this thread is doing deep inside a build ("building numpy-1.19.2.tar.gz with
    Python 3.9 in build stage ..."): every heartbeat of a build this thread runs says it, so
    code far below the Heartbeat's owner needs no handle on it."""
    me = threading.get_ident()
    stack = _DOING.setdefault(me, [])
    stack.append(what)
    try:
        yield
    finally:
        stack.pop()
        if not stack:
            _DOING.pop(me, None)


class Heartbeat:
    """`with Heartbeat(log, "deepswe/env:abc (environment)") as hb:` then `hb.doing("Step 3/9 :
    RUN pip ...")` as the work moves, `hb.output(line)` for a line of its output, and
    `hb.logged()` after the caller logs a line of its own."""

    def __init__(self, log: Callable[[str], None], label: str, every: float | None = None) -> None:
        self.log, self.label = log, label
        self.every = EVERY_S if every is None else every
        self.what, self.last_output = "starting", ""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True, name="build-heartbeat")
        self.started = self._said = time.monotonic()
        self._owner = threading.get_ident()  # whose `activity` each line names

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def doing(self, what: str) -> None:
        with self._lock:
            self.what, self.last_output = what, ""

    def output(self, line: str) -> None:
        line = _ANSI.sub("", line).strip()  # the engine's colour codes alone are not output
        if line:
            with self._lock:
                self.last_output = line

    def logged(self) -> None:
        with self._lock:
            self._said = time.monotonic()

    def _beat(self) -> None:
        while not self._stop.wait(min(1.0, self.every / 4)):
            with self._lock:
                now = time.monotonic()
                if now - self._said < self.every:
                    continue
                self._said = now
                line = f"  {self.label}: {self.what}, {now - self.started:.0f} s so far"
                inner = _DOING.get(self._owner, [])[-1:]  # a slice: the owner may pop meanwhile
                if inner:
                    line += f" ({inner[0]})"
                if self.last_output:
                    line += f"; last output: {self.last_output[:160]}"
            self.log(line)
