"""Tests that need the network, recognised from their log.

Sandboxes are offline (deepswe.env.sandbox.offline): a name lookup fails and a connect to an
outside address fails or hangs. A task whose gold patch fails with one of the messages below was
recorded online; no patch can pass it here, so health reports it (`deepswe-eval health`) and
training leaves it out. Each message is what the resolver or a client library prints when the
network is missing, never what a test of local behaviour prints ("Connection refused" from a
local server that is down is not one of them).
"""

from __future__ import annotations

import re

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
            r"Cannot connect to host \S+ ssl:",  # aiohttp ClientConnectorError
            r"Max retries exceeded with url",  # requests
            r"Network is unreachable",  # no interface (sandbox.offline: unreachable)
        ]
    )
)


def network_sign(log: str) -> str | None:
    """The first line of `log` showing the tests reached for the network, or None."""
    match = _SIGNS.search(log)
    if match is None:
        return None
    start = log.rfind("\n", 0, match.start()) + 1
    end = log.find("\n", match.end())
    line = " ".join(log[start : end if end != -1 else len(log)].split())
    return line[:240]


__all__ = ["network_sign"]
