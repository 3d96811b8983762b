"""Interpreters the Debian suites do not ship (3.5-3.8, 3.10, ...), provided by the host.

A task whose environment names another Python gets a CPython prefix from the host copied into
its image at /opt/python, registered with the dynamic linker, and /opt/venv rebuilt from it.
The prefix must be built for the image's Debian release (the same glibc, OpenSSL, libffi and
sqlite the suite ships): on Debian bookworm, `pyenv install 3.6.15` builds one. Point
$DEEPSWE_HOST_PYTHONS at a folder of such prefixes, one per version, named by version
(pyenv's `~/.pyenv/versions` has exactly that layout); the newest patch release of the
wanted major.minor is used.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

ENV_VAR = "DEEPSWE_HOST_PYTHONS"
_VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")


class NoHostPython(LookupError):
    """No usable prefix of the wanted version; the message says how to provide one."""


def host_python(version: str) -> Path:
    """The prefix (with bin/python3) of the newest host CPython `version` ("3.6")."""
    root = os.environ.get(ENV_VAR)
    how = (
        f"set ${ENV_VAR} to a folder of CPython prefixes named by version, built for the image's "
        "Debian release (e.g. pyenv's ~/.pyenv/versions after `pyenv install "
        f"{version}.<patch>` on Debian bookworm)"
    )
    if not root:
        raise NoHostPython(f"Python {version} is not in the Debian images; {how}")
    if not Path(root).expanduser().is_dir():
        raise NoHostPython(f"${ENV_VAR}={root} is not a folder; {how}")
    found = []
    for entry in Path(root).expanduser().iterdir():
        m = _VERSION.match(entry.name)
        if m and f"{m.group(1)}.{m.group(2)}" == version and (entry / "bin" / "python3").exists():
            found.append((int(m.group(3)), entry))
    if not found:
        raise NoHostPython(f"no CPython {version} under ${ENV_VAR}={root}; {how}")
    return max(found)[1]


__all__ = ["ENV_VAR", "NoHostPython", "host_python"]
