"""Docker sandboxes: one container per sandbox, limits on by default, one stream for all calls.

A start waits its turn at the backend's admission gate (admission.py), then makes a container
whose main process is server.py, attached to before it starts (docker_attach.py): create,
attach, start, the helper's handshake. Every container carries labels naming its host, its
owner process and its own id from the create call on, so nothing is orphaned: a create whose
answer is lost is found by its id and removed (docker_reaper.py), a killed owner's containers
stop and are removed by the engine (auto-remove), and what is left anyway is swept by the next
process's first start and by `gc` (docker_gc.py).
"""

from __future__ import annotations

import io
import os
import shlex
import tarfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import docker
import docker.errors

from deepswe.env.sandbox import SandboxDied, SandboxLimits, SandboxStartError, seccomp
from deepswe.env.sandbox.admission import DOCKER_STARTS_PER_CPU, Admission, gate
from deepswe.env.sandbox.channel import SERVER_SOURCE, Channel, ChannelSandbox
from deepswe.env.sandbox.docker_attach import AttachTransport
from deepswe.env.sandbox.docker_engine import NO_ANSWER, engine, engine_cpus, engine_host
from deepswe.env.sandbox.docker_gc import collect, sweep_once
from deepswe.env.sandbox.docker_reaper import REAPER, made_on
from deepswe.env.sandbox.offline import offline_network_mode
from deepswe.env.sandbox.owner import LABEL, SANDBOX_ID, own_labels

# Reads exactly len(server.py) bytes of stdin as the helper's source, then runs it on the same
# stdin (the Kubernetes backend starts it the same way): nothing is copied in before start.
BOOTSTRAP = (
    "import sys; src = sys.stdin.buffer.read({n}); "
    "exec(compile(src, '/opt/deepswe/server.py', 'exec'))"
)
CALL_TIMEOUT_S = 30.0  # removals, copies and inspections
REMOVALS_IN_FLIGHT = 8  # teardown of a fleet must not starve its starts
_removals: ThreadPoolExecutor | None = None
_removals_lock = threading.Lock()


def _remover() -> ThreadPoolExecutor:
    global _removals
    with _removals_lock:
        if _removals is None:
            _removals = ThreadPoolExecutor(REMOVALS_IN_FLIGHT, thread_name_prefix="sandbox-rm")
        return _removals


def _remove(name: str, answered: bool, host: str) -> None:
    """Remove container `name` for good; what the engine does not confirm is the reaper's."""
    try:
        engine(CALL_TIMEOUT_S, host).api.remove_container(name, force=True)
        return
    except docker.errors.NotFound:
        if answered:
            return  # the engine removed it already (auto-remove)
    except docker.errors.APIError as exc:
        if exc.status_code == 409 and "in progress" in str(exc):
            return
    except NO_ANSWER:
        pass
    REAPER.lost(name, host)  # never answered (it may land yet), refused, or no answer


def client() -> docker.DockerClient:
    """The SDK client for long engine work (image builds): the SDK's 300 s read timeout."""
    return engine(300.0)


def _loopback_ipv6() -> dict[str, str] | None:
    """`::1` on the sandbox's loopback, as the machines task statuses were recorded on had it
    (R2E-Gym's aiohttp rows bind `::1`): Docker leaves IPv6 off in a container's namespace
    unless the network enables it. None where this kernel has no IPv6 to turn on."""
    if not os.path.exists("/proc/sys/net/ipv6/conf/lo/disable_ipv6"):
        return None
    return {"net.ipv6.conf.lo.disable_ipv6": "0"}


def _network_mode(lim: SandboxLimits) -> str | None:
    """Docker's default bridge with network; without, the offline network or no interface."""
    if lim.network:
        return None
    if lim.offline == "unreachable":
        return "none"
    return offline_network_mode(client(), required=lim.offline == "drop")


def _cpu_options(lim: SandboxLimits) -> dict:
    """A CFS quota of `lim.cpus`; with none, a CPU weight of the engine's core count (cgroup
    v1 tools such as pylint's read cpu.shares / 1024 as the CPUs they may use)."""
    if lim.cpus is not None:
        return {"nano_cpus": int(lim.cpus * 1e9)}
    return {"cpu_shares": 1024 * engine_cpus()}


def _tar_of(src: Path, arcname: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(str(src), arcname=arcname)
    return buf.getvalue()


class DockerSandbox(ChannelSandbox):
    """A container started from `image` with `limits`; closed (removed) by `close()`.

    `queued_seconds`: the wait for admission; `ready_seconds`: admission to ready.
    """

    _cid: str | None = None
    _counted = False

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
        self._engine = engine_host()
        self._channel: Channel | None = None
        self._sent_create = False
        requested = time.monotonic()
        try:
            admission = self.admission()
            sweep_once()
            with admission.slot() as admitted:
                self.queued_seconds = admitted - requested
                self._start(labels or {}, admitted + self.limits.start_timeout_s)
        except BaseException as exc:
            self.close(wait=True)  # a failed start has nothing of its own left when it raises
            if isinstance(exc, SandboxStartError):
                raise
            if isinstance(exc, (docker.errors.DockerException, SandboxDied, *NO_ANSWER)):
                raise SandboxStartError(f"sandbox from {image!r} did not start: {exc}") from exc
            raise
        admission.ready()
        self._counted = True
        self.ready_seconds = time.monotonic() - admitted

    @staticmethod
    def admission() -> Admission:
        """This process's start gate for the Docker backend."""
        return gate("docker", lambda: DOCKER_STARTS_PER_CPU * engine_cpus())

    def _start(self, labels: dict[str, str], deadline: float) -> None:
        """create, attach, start, handshake; each call bounded by the start's timeout."""
        lim = self.limits
        api = engine(lim.start_timeout_s).api
        host_config = api.create_host_config(
            init=True,  # reap orphans: zombies would count against the pids limit
            auto_remove=True,  # the helper exits when our stream closes: the engine cleans up
            network_mode=_network_mode(lim),
            sysctls=_loopback_ipv6(),
            mem_limit=lim.memory,
            memswap_limit=lim.memory,
            pids_limit=lim.pids,
            security_opt=[
                "no-new-privileges",
                *([seccomp.security_opt()] if lim.user_namespaces else []),
            ],
            log_config={"type": "none"},  # the protocol is not a log: no json-file writes
            **_cpu_options(lim),
        )
        source = SERVER_SOURCE.read_bytes()
        made_on(self._engine)
        self._sent_create = True
        try:
            # create + start, never run: `run` pulls a missing image from a registry.
            created = api.create_container(
                self.image,
                command=["python3", "-u", "-c", BOOTSTRAP.format(n=len(source))],
                stdin_open=True,  # with attach-before-start: stdin-once, as `docker run -i`
                name=self.id,
                labels={**own_labels(), SANDBOX_ID: self.id, **labels},
                host_config=host_config,
            )
        except docker.errors.APIError as exc:
            self._sent_create = False  # the engine answered, refusing: nothing was made
            if isinstance(exc, docker.errors.ImageNotFound):
                raise SandboxStartError(
                    f"image {self.image!r} is not on this engine; build it first "
                    "(deepswe-env build)"
                ) from exc
            raise
        self._cid = created["Id"]
        sock = api.attach_socket(
            self._cid, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
        )
        transport = AttachTransport(sock, self._why_gone)
        try:
            api.start(self._cid)
            transport.send(source)
            left = deadline - time.monotonic()
            if left <= 0:
                raise SandboxStartError(
                    f"sandbox {self.id} was not ready within {lim.start_timeout_s:.0f}s "
                    "of its admission"
                )
            self._channel = Channel(transport, ready_timeout_s=left)
        except BaseException:
            transport.close()
            raise

    def _why_gone(self) -> str:
        """What the engine says of the container, for a death message."""
        try:
            state = engine(CALL_TIMEOUT_S, self._engine).api.inspect_container(self.id)["State"]
        except docker.errors.NotFound:
            return "the container is gone: it exited or was removed"
        except (docker.errors.APIError, *NO_ANSWER) as exc:
            return f"the engine did not say what became of the container: {exc}"
        oom = ", killed for memory" if state.get("OOMKilled") else ""
        return f"container {state.get('Status')}, exit code {state.get('ExitCode')}{oom}"

    def copy_in(self, src: Path, dest: str) -> None:
        """Copy a host file or folder to `dest` (its parent is created)."""
        if self._cid is None or self._channel is None:
            raise SandboxDied(f"sandbox {self.id} is closed")
        parent, name = os.path.split(dest.rstrip("/"))
        self.run(f"mkdir -p {shlex.quote(parent or '/')}")
        try:
            api = engine(CALL_TIMEOUT_S, self._engine).api
            ok = api.put_archive(self._cid, parent or "/", _tar_of(Path(src), name))
        except (docker.errors.APIError, *NO_ANSWER) as exc:
            raise SandboxDied(f"copy into {self.id} failed: {exc}") from exc
        if not ok:
            raise SandboxDied(f"copy into {self.id} failed")

    @staticmethod
    def clean_leftovers() -> list[str]:
        """Remove this host's sandbox containers whose creating process is gone."""
        return gc()

    def close(self, *, wait: bool = False) -> None:
        """End the stream: the helper exits and the engine removes the container. Its removal
        is also confirmed in the background (at most REMOVALS_IN_FLIGHT at once; `wait`: here),
        so a closing episode does not wait on the engine; never raises for the engine: what it
        does not confirm is the reaper's."""
        super().close()
        if self._counted:
            self._counted = False
            self.admission().closed()
        if not self._sent_create:
            return
        self._sent_create = False
        job = _remover().submit(_remove, self.id, self._cid is not None, self._engine)
        self._cid = None
        if wait:
            job.result()


def gc(*, everything: bool = False) -> list[str]:
    """Remove sandbox containers left by crashed runs on this host (all of them if
    `everything`); their names. `docker_gc.collect` says more (what could not be removed)."""
    return collect(everything=everything).removed


__all__ = ["LABEL", "DockerSandbox", "client", "gc"]
