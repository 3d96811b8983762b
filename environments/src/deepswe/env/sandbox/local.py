"""A sandbox that is a plain host subprocess: no isolation at all.

For unit tests of everything above the transport (it speaks the same protocol as the Docker
backend, through the same server.py) and for trusted work on a machine without Docker. Paths are
host paths; limits other than timeouts and output caps are not enforced.
"""

from __future__ import annotations

import shutil
import sys
import uuid
from pathlib import Path

from deepswe.env.sandbox import SandboxLimits
from deepswe.env.sandbox.channel import SERVER_SOURCE, Channel, ChannelSandbox


class LocalSandbox(ChannelSandbox):
    """server.py run by the host's Python, in a working folder of the caller's choosing."""

    def __init__(
        self, image: str | None = None, limits: SandboxLimits | None = None, workdir: str = "/"
    ) -> None:
        self.id = f"local-{uuid.uuid4().hex[:12]}"
        self.limits = limits or SandboxLimits()
        self.workdir = workdir
        self._channel: Channel | None = Channel([sys.executable, "-u", str(SERVER_SOURCE)])

    def copy_in(self, src: Path, dest: str) -> None:
        src = Path(src)
        if src.is_dir():
            shutil.copytree(src, dest, dirs_exist_ok=True)
        else:
            Path(dest).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest)
