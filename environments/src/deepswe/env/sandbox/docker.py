"""Docker sandboxes: one container per sandbox, limits on by default, one exec stream for all calls.

Lifecycle (create, copy in, remove) goes through the docker SDK; commands go through server.py
started once with `docker exec -i`, so a tool call costs one JSON message, not a new exec.
Every container carries labels so `gc()` can remove what a crashed run left behind.
"""

from __future__ import annotations

import contextlib
import io
import os
import socket
import tarfile
import time
import uuid
from pathlib import Path

import docker
import docker.errors

from deepswe.env.sandbox import SandboxDied, SandboxLimits, SandboxStartError
from deepswe.env.sandbox.channel import SERVER_SOURCE, Channel, ChannelSandbox
from deepswe.env.sandbox.offline import ensure_offline_network

LABEL = "deepswe.sandbox"
HELPER_DIR = "/opt/deepswe"
_client: docker.DockerClient | None = None


def client() -> docker.DockerClient:
    """One SDK client per process, with a pool large enough for many sandboxes at once."""
    global _client
    if _client is None:
        try:
            _client = docker.from_env(timeout=300, max_pool_size=128)
            _client.ping()
        except docker.errors.DockerException as exc:
            _client = None
            raise SandboxStartError(
                f"no Docker engine answers ({exc}); run `make engine` or start dockerd"
            ) from exc
    return _client


def _network_mode(lim: SandboxLimits) -> str | None:
    """Docker's default bridge with network; without, the offline network or no interface."""
    if lim.network:
        return None
    if lim.offline == "unreachable":
        return "none"
    return ensure_offline_network(client())


_host_cpus: int | None = None


def _cpu_options(lim: SandboxLimits) -> dict:
    """A CFS quota of `lim.cpus`; with none, a CPU weight of the engine's core count (cgroup
    v1 tools such as pylint's read cpu.shares / 1024 as the CPUs they may use)."""
    global _host_cpus
    if lim.cpus is not None:
        return {"nano_cpus": int(lim.cpus * 1e9)}
    if _host_cpus is None:
        _host_cpus = int(client().info().get("NCPU") or os.cpu_count() or 1)
    return {"cpu_shares": 1024 * _host_cpus}


def _tar_of(src: Path, arcname: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(str(src), arcname=arcname)
    return buf.getvalue()


class DockerSandbox(ChannelSandbox):
    """A container started from `image` with `limits`; closed (removed) by `close()`."""

    def __init__(
        self,
        image: str,
        limits: SandboxLimits | None = None,
        *,
        workdir: str = "/testbed",
        labels: dict[str, str] | None = None,
    ) -> None:
        self.limits = limits or SandboxLimits()
        self.image = image
        self.workdir = workdir
        self.id = f"deepswe-{uuid.uuid4().hex[:12]}"
        self._container = None
        self._channel: Channel | None = None
        started = time.monotonic()
        try:
            self._container = self._create(labels or {})
            self.copy_in(SERVER_SOURCE, f"{HELPER_DIR}/server.py")
            self._channel = Channel(
                [
                    "docker",
                    "exec",
                    "-i",
                    self._container.id,
                    "python3",
                    "-u",
                    f"{HELPER_DIR}/server.py",
                ],
                ready_timeout_s=self.limits.start_timeout_s,
            )
        except BaseException as exc:
            self.close()
            if isinstance(exc, SandboxStartError):
                raise
            if isinstance(exc, (docker.errors.DockerException, SandboxDied, OSError)):
                raise SandboxStartError(f"sandbox from {image!r} did not start: {exc}") from exc
            raise
        self.ready_seconds = time.monotonic() - started

    def _create(self, labels: dict[str, str]):
        lim = self.limits
        try:
            # create + start, never run: `run` pulls a missing image from a registry.
            container = client().containers.create(
                self.image,
                command=["sleep", "infinity"],
                name=self.id,
                init=True,  # reap orphans: zombies would count against the pids limit
                network_mode=_network_mode(lim),
                **_cpu_options(lim),
                mem_limit=lim.memory,
                memswap_limit=lim.memory,
                pids_limit=lim.pids,
                security_opt=["no-new-privileges"],
                labels={
                    LABEL: "1",
                    "deepswe.host": socket.gethostname(),
                    "deepswe.owner-pid": str(os.getpid()),
                    **labels,
                },
            )
        except docker.errors.ImageNotFound as exc:
            raise SandboxStartError(
                f"image {self.image!r} is not on this engine; build it first (deepswe-env build)"
            ) from exc
        self._container = container  # so close() removes it if start fails
        container.start()
        return container

    def copy_in(self, src: Path, dest: str) -> None:
        """Copy a host file or folder to `dest` (its parent is created)."""
        if self._container is None:
            raise SandboxDied(f"sandbox {self.id} is closed")
        parent, name = os.path.split(dest.rstrip("/"))
        try:
            self._container.exec_run(["mkdir", "-p", parent or "/"])
            ok = self._container.put_archive(parent or "/", _tar_of(Path(src), name))
        except docker.errors.APIError as exc:
            raise SandboxDied(f"copy into {self.id} failed: {exc}") from exc
        if not ok:
            raise SandboxDied(f"copy into {self.id} failed")

    @staticmethod
    def clean_leftovers() -> list[str]:
        """Remove this host's sandbox containers whose creating process is gone."""
        return gc()

    def close(self) -> None:
        super().close()
        if self._container is not None:
            with contextlib.suppress(docker.errors.NotFound):
                self._container.remove(force=True)
            self._container = None


def gc(*, everything: bool = False) -> list[str]:
    """Remove sandbox containers left by crashed runs on this host (all of them if `everything`).

    A container is left over when the process that created it is gone.
    """
    removed = []
    host = socket.gethostname()
    for c in client().containers.list(all=True, filters={"label": LABEL}):
        owner_alive = False
        if c.labels.get("deepswe.host") == host:
            try:
                pid = int(c.labels.get("deepswe.owner-pid", "0"))
                if pid > 0:
                    os.kill(pid, 0)
                    owner_alive = True
            except (ProcessLookupError, ValueError):
                owner_alive = False
            except PermissionError:
                owner_alive = True
        if everything or not owner_alive:
            c.remove(force=True)
            removed.append(c.name)
    return removed
