"""Tests that need the network, or a quiet machine, recognised from their log.

Sandboxes are offline (deepswe.env.sandbox.offline): a name lookup fails and a connect to an
outside address fails or hangs. A task whose gold patch fails with one of the messages below was
recorded online; no patch can pass it here, so health reports it (`deepswe-eval health`) and
training leaves it out. Each message is what the resolver or a client library prints when the
network is missing, never what a test of local behaviour prints ("Connection refused" from a
local server that is down is not one of them).

A test that fails only under load is not a network task: a client that gives a local server
0.4 s to answer (aiohttp_1c1c0ea3: `Cannot connect to host localhost:...` when the server had not
started listening yet), a `TimeoutError`, a socket that `timed out`. Those are `load_sign`s: health
calls such a task flaky, with that line as the reason.

A sign counts only where it belongs to a graded test the run failed: on a line naming that test,
or inside that test's section of the log (pytest's and sympy's `____ name ____` headers,
unittest's `ERROR: name`). A test file often holds tests the task does not grade; one of them
reaching for the network says nothing about why a graded test failed. A log with no sections at
all cannot say whose a line is, and any sign in it counts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_LOOPBACK = r"localhost\b|127\.|\[?::1\]?[:']|0\.0\.0\.0"
_SIGNS = re.compile(
    "|".join(
        [
            r"Temporary failure in name resolution",  # glibc EAI_AGAIN (socket.gaierror -3)
            r"Name or service not known",  # EAI_NONAME (-2)
            r"No address associated with hostname",  # EAI_NODATA (-5)
            r"nodename nor servname provided",  # the BSD wording
            r"getaddrinfo failed",
            r"Could not resolve host",  # curl, git
            r"Failed to resolve '",  # urllib3 2.x NameResolutionError
            # aiohttp ClientConnectorError and requests, to a host that is not this sandbox's own
            # loopback (a local server that is down is a local failure: aiohttp_1c1c0ea3)
            rf"Cannot connect to host (?!{_LOOPBACK})\S+ ssl:",
            rf"host='(?!{_LOOPBACK})[^']*', port=\d+\): Max retries exceeded with url",
            r"Network is unreachable",  # no interface (sandbox.offline: unreachable)
        ]
    )
)

_LOOPBACK_ADDRESS = r"127\.|::1'|0\.0\.0\.0"
# On an error line (pytest's `E   ...`, or a traceback's last line, `Name: message`): a wall-clock
# bound reached.
_LOAD = re.compile(
    "|".join(
        [
            r"^(?:E\s+)?(?:[\w.]+\.)?(?:TimeoutError|ReadTimeout|ConnectTimeout|TimeoutExpired)"
            r"(?::|$)",
            r"^(?:E\s+)?socket\.timeout(?::|$)",
            r"^E\s.*\btimed out\b",
            # a local server that was not listening yet (a connect to this sandbox's loopback)
            rf"^E\s.*Connect call failed \('(?:{_LOOPBACK_ADDRESS})",
            rf"^E\s.*Cannot connect to host (?:{_LOOPBACK})",
        ]
    )
)


# A section's header: pytest's and sympy's `____ title ____` (`====` for pytest's own parts),
# unittest's and django's `ERROR: title` / `FAIL: title`.
_HEADER = re.compile(r"^(?:[_=]{3,} (?P<title>.+?) [_=]{3,}|(?:ERROR|FAIL): (?P<unit>.+?))\s*$")


def _names(failed: Iterable[str]) -> re.Pattern[str] | None:
    """What names a failed test in the log: its last `::` part (`Class::test` shows as
    `Class.test` in pytest's headers), params kept, or the whole id where it has no `::`."""
    leaves = {t.split("::")[-1].strip() for t in failed} - {""}
    if not leaves:
        return None
    alternatives = "|".join(re.escape(x) for x in sorted(leaves, key=len, reverse=True))
    return re.compile(rf"(?<!\w)(?:{alternatives})(?![\w\[])")


def network_sign(log: str, failed: Iterable[str] | None = None) -> str | None:
    """The first line of `log` showing the tests reached for the network, or None.

    With `failed` (the graded tests the run did not pass), only a sign that belongs to one of
    them counts (module doc); without it, any sign in the log."""
    return _first_sign(log, failed, lambda line: bool(_SIGNS.search(line)))


def load_sign(log: str, failed: Iterable[str] | None = None) -> str | None:
    """The first error line of `log` showing a test reached a wall-clock bound (a timeout, a
    local server not listening yet), or None; `failed` as for `network_sign`."""
    return _first_sign(log, failed, lambda line: bool(_LOAD.search(line)))


def _first_sign(log: str, failed: Iterable[str] | None, sign) -> str | None:
    names = None if failed is None else _names(failed)
    if failed is not None and names is None:
        return None
    lines = log.splitlines()
    sectioned = names is not None and any(_HEADER.match(x) for x in lines)
    title = None
    for line in lines:
        header = _HEADER.match(line)
        if header:
            title = header.group("title") or header.group("unit")
            continue
        if not sign(line):
            continue
        if (
            names is None
            or not sectioned
            or names.search(line)
            or (title is not None and names.search(title))
        ):
            return " ".join(line.split())[:240]
    return None


__all__ = ["load_sign", "network_sign"]
