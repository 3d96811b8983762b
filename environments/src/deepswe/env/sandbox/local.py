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

from deepswe.env.sandbox import ExecResult, SandboxLimits
from deepswe.env.sandbox.channel import SERVER_SOURCE, Channel


class LocalSandbox:
    """server.py run by the host's Python, in a working folder of the caller's choosing."""

    def __init__(
        self, image: str | None = None, limits: SandboxLimits | None = None, workdir: str = "/"
    ) -> None:
        self.id = f"local-{uuid.uuid4().hex[:12]}"
        self.limits = limits or SandboxLimits()
        self.workdir = workdir
        self._channel: Channel | None = Channel([sys.executable, "-u", str(SERVER_SOURCE)])

    def _ch(self) -> Channel:
        if self._channel is None:
            raise RuntimeError(f"sandbox {self.id} is closed")
        return self._channel

    def run(
        self,
        cmd: str,
        *,
        timeout: float | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
    ) -> ExecResult:
        return self._ch().run(
            cmd,
            timeout=timeout or self.limits.command_timeout_s,
            cwd=cwd or self.workdir,
            env=env,
            max_output=self.limits.max_output_bytes,
        )

    def read_file(self, path: str) -> bytes:
        return self._ch().read(path)

    def write_file(self, path: str, data: bytes | str, mode: int | None = None) -> None:
        self._ch().write(path, data.encode() if isinstance(data, str) else data, mode)

    def copy_in(self, src: Path, dest: str) -> None:
        src = Path(src)
        if src.is_dir():
            shutil.copytree(src, dest, dirs_exist_ok=True)
        else:
            Path(dest).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest)

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = None

    def __enter__(self) -> LocalSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
