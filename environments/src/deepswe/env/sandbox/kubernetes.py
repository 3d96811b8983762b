"""Kubernetes sandboxes: one pod per sandbox, limits as requests = limits, one exec stream for all calls.

The pod is created with the official `kubernetes` client; server.py then runs over ONE long-lived
`pods/exec` websocket (the same JSON-lines helper as Docker, through channel.Transport), so a tool
call is one message, not one exec. Client pitfalls this file designs around:
- `kubernetes.stream.stream` swaps `call_api` on the ApiClient it is given (racy when shared) and
  keeps a second copy of all output for the stream's life: we open the websocket with
  `WSClient(capture_all=False, binary=True)` ourselves, and every sandbox owns its ApiClient.
- per-frame UTF-8 decoding splits multi-byte characters: binary frames, decoded per line.
- v4 exec cannot half-close stdin: the helper is ended by closing the stream (it exits on EOF).
- a stream can hang when its pod goes away: every call has a host-side deadline (channel.py) and
  a dropped stream reads the pod's phase into the SandboxDied message (-> infra_error).
- a handshake can fail right after Running: exec only once the pod is Ready and started, and
  retry a refused handshake (5xx, "container not found") while the start deadline allows.
- a create can fail transiently (429, 5xx) or land with its answer lost: retried, and a 409 for
  our own name adopts the pod an earlier attempt made.

Settings beyond SandboxLimits come from the environment, so every command that takes
`sandbox_backend: kubernetes` can use them unchanged: KUBECONFIG (else in-cluster),
DEEPSWE_K8S_CONTEXT, DEEPSWE_K8S_NAMESPACE, DEEPSWE_K8S_RUNTIME_CLASS (e.g. gvisor),
DEEPSWE_K8S_EPHEMERAL_STORAGE (default 10Gi), DEEPSWE_K8S_OWNER (`apiVersion/kind/name/uid` of
an object whose deletion cascades to every pod), DEEPSWE_K8S_KEEPALIVE_S (default 30).
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import time
import uuid
from pathlib import Path

from kubernetes import client as k8s
from kubernetes.client.rest import ApiException
from urllib3.exceptions import HTTPError

from deepswe.env.sandbox import SandboxDied, SandboxLimits, SandboxStartError
from deepswe.env.sandbox.admission import K8S_STARTS, Admission, gate
from deepswe.env.sandbox.channel import SERVER_SOURCE, Channel, ChannelSandbox
from deepswe.env.sandbox.kubernetes_cluster import (
    api_message,
    context_setting,
    gc,
    load_configuration,
    preflight,
    sweep_once,
)
from deepswe.env.sandbox.kubernetes_exec import CONTAINER, ExecRefused, ExecTransport
from deepswe.env.sandbox.owner import SANDBOX_ID, own_labels

# Pod Security "baseline": task images run as root (pip installs, apt), so "restricted"
# (runAsNonRoot) is impossible; we drop every capability a root task image does not need.
KEPT_CAPABILITIES = ["CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID"]
IMAGE_PULL_FAILURES = {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"}
# Reads exactly len(server.py) bytes of stdin as the helper's source, then runs it on the same
# stdin: no copy step before the stream exists, and the source never rides in the exec URL.
BOOTSTRAP = (
    "import sys; src = sys.stdin.buffer.read({n}); "
    "exec(compile(src, '/opt/deepswe/server.py', 'exec'))"
)
POLL_S = 0.2
# Create answers worth another try: throttled (429, honouring Retry-After) or a server hiccup.
RETRY_STATUSES = {429, 500, 502, 503, 504}
CREATE_ATTEMPTS = 6
EXEC_ATTEMPTS = 5
# Exec refusals retrying cannot fix: credentials, RBAC, the pod is gone.
EXEC_FINAL_STATUSES = {401, 403, 404}


def memory_quantity(docker_memory: str) -> str:
    """Docker's memory syntax (512m, 4g, 1024) as a Kubernetes quantity in bytes."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([bkmg]?)b?", docker_memory.strip().lower())
    if not m:
        raise ValueError(f"memory limit {docker_memory!r} is not like 512m or 4g")
    scale = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[m.group(2)]
    return str(int(float(m.group(1)) * scale))


def pod_manifest(
    name: str,
    image: str,
    limits: SandboxLimits,
    labels: dict[str, str],
    *,
    runtime_class: str | None = None,
    ephemeral_storage: str = "10Gi",
    owner: str | None = None,
    deadline_s: int = 24 * 3600,
) -> dict:
    """The pod for one sandbox: requests equal limits, no token, no service links, no restarts.

    `owner` is `apiVersion/kind/name/uid` of an object whose deletion deletes the pod too.
    """
    resources = {
        "memory": memory_quantity(limits.memory),
        "ephemeral-storage": ephemeral_storage,
    }
    if limits.cpus is not None:  # None: no CPU limit, the node's CPUs as the tests see them
        resources["cpu"] = f"{int(limits.cpus * 1000)}m"
    spec: dict = {
        "restartPolicy": "Never",
        "activeDeadlineSeconds": deadline_s,  # a backstop when the host that made it is gone
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": 0,
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [
            {
                "name": CONTAINER,
                "image": image,
                "imagePullPolicy": "IfNotPresent",
                "command": ["sleep", "infinity"],
                "resources": {"requests": resources, "limits": resources},
                "securityContext": {
                    "allowPrivilegeEscalation": False,
                    "capabilities": {"drop": ["ALL"], "add": KEPT_CAPABILITIES},
                },
            }
        ],
    }
    if runtime_class:
        spec["runtimeClassName"] = runtime_class  # e.g. gVisor
    metadata: dict = {"name": name, "labels": labels}
    if owner:
        api_version, kind, owner_name, uid = owner.rsplit("/", 3)
        ref = {"apiVersion": api_version, "kind": kind, "name": owner_name, "uid": uid}
        metadata["ownerReferences"] = [ref]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def retry_after(exc: ApiException) -> float | None:
    """Seconds a 429 asks us to wait (its Retry-After header), if it says."""
    value = (exc.headers or {}).get("Retry-After") if exc.headers else None
    try:
        return min(float(value), 30.0) if value else None
    except ValueError:
        return None


class KubernetesSandbox(ChannelSandbox):
    """A pod started from `image` with `limits`; deleted by `close()`.

    Starts wait their turn at the backend's admission gate (admission.py); `queued_seconds`
    is that wait, `ready_seconds` admission to ready.
    """

    _api: k8s.ApiClient | None = None
    _pod: str | None = None
    _counted = False

    def __init__(
        self,
        image: str,
        limits: SandboxLimits | None = None,
        *,
        workdir: str = "/testbed",
        labels: dict[str, str] | None = None,
        kubeconfig: str | None = None,
        context: str | None = None,
        runtime_class: str | None = None,
    ) -> None:
        self.limits = limits or SandboxLimits()
        self.image = image
        self.workdir = workdir
        self.id = f"deepswe-{uuid.uuid4().hex[:12]}"
        self._channel: Channel | None = None
        cfg, self.namespace = load_configuration(kubeconfig, context or context_setting())
        # One ApiClient per sandbox: the client's stream helpers patch a client's request
        # function in place, and a shared client has orphaned pods in other projects.
        self._api = k8s.ApiClient(cfg)
        self._core = k8s.CoreV1Api(self._api)
        self.labels = {**own_labels(), SANDBOX_ID: self.id, **(labels or {})}
        requested = time.monotonic()
        env = os.environ.get
        try:
            admission = self.admission()
            sweep_once(kubeconfig, context or context_setting())
            body = pod_manifest(
                self.id,
                image,
                self.limits,
                self.labels,
                runtime_class=runtime_class or env("DEEPSWE_K8S_RUNTIME_CLASS"),
                ephemeral_storage=env("DEEPSWE_K8S_EPHEMERAL_STORAGE") or "10Gi",
                owner=env("DEEPSWE_K8S_OWNER"),
            )
            with admission.slot() as admitted:
                self.queued_seconds = admitted - requested
                deadline = admitted + self.limits.start_timeout_s  # from admission, not the queue
                self._pod = self.id  # from here close() deletes it, even if its answer is lost
                self._create(body, deadline)
                self._channel = self._connect(deadline)
        except BaseException as exc:
            self.close()
            if isinstance(exc, SandboxStartError):
                raise
            if isinstance(exc, (ApiException, HTTPError, SandboxDied, OSError)):
                raise SandboxStartError(
                    f"pod {self.id} from {image!r} did not start: {exc}"
                ) from exc
            raise
        admission.ready()
        self._counted = True
        self.ready_seconds = time.monotonic() - admitted

    @staticmethod
    def admission() -> Admission:
        """This process's start gate for the Kubernetes backend."""
        return gate("kubernetes", lambda: K8S_STARTS)

    def _create(self, body: dict, deadline: float) -> None:
        """Create the pod; retry 429/5xx and lost answers; a 409 for our own name adopts it."""
        delay = 0.5
        for attempt in range(1, CREATE_ATTEMPTS + 1):
            try:
                self._core.create_namespaced_pod(self.namespace, body)
                return
            except ApiException as exc:
                if exc.status == 409 and self._is_ours():
                    return  # an earlier attempt made it and its answer was lost
                retry, why, wait = exc.status in RETRY_STATUSES, api_message(exc), retry_after(exc)
            except HTTPError as exc:  # no answer: the create may or may not have landed
                retry, why, wait = True, f"no answer ({exc})", None
            wait = wait or delay
            if not retry or attempt == CREATE_ATTEMPTS or time.monotonic() + wait > deadline:
                raise SandboxStartError(
                    f"pod {self.id} from {self.image!r} could not be created: {why}"
                )
            time.sleep(wait)
            delay = min(delay * 2, 8.0)

    def _is_ours(self) -> bool:
        try:
            pod = self._core.read_namespaced_pod(self.id, self.namespace)
        except ApiException:
            return False
        labels = pod.metadata.labels or {}
        return all(labels.get(k) == v for k, v in {**own_labels(), SANDBOX_ID: self.id}.items())

    def _connect(self, deadline: float) -> Channel:
        """Once the pod is Ready, start server.py over one exec stream (handshakes retried)."""
        delay = 0.5
        for attempt in range(1, EXEC_ATTEMPTS + 1):
            self._wait_ready(deadline)
            source = SERVER_SOURCE.read_bytes()
            argv = ["python3", "-u", "-c", BOOTSTRAP.format(n=len(source))]
            try:
                transport = ExecTransport(self._api, self.namespace, self.id, argv)
                break
            except ExecRefused as exc:
                # Right after Running the kubelet may not know the container yet ("container
                # not found", a 5xx): the API server's view leads the node's.
                final = exc.status in EXEC_FINAL_STATUSES or attempt == EXEC_ATTEMPTS
                if final or time.monotonic() + delay > deadline:
                    raise
                time.sleep(delay)
                delay *= 2
        # The pod API has no per-pod pids limit: the helper counts them. Its keepalive keeps
        # nodes and load balancers from cutting the stream while a command runs quietly.
        keepalive = float(os.environ.get("DEEPSWE_K8S_KEEPALIVE_S") or 30.0)
        setup = {"op": "config", "keepalive_s": keepalive, "pids": self.limits.pids}
        try:
            transport.send(source)
            channel = Channel(transport, ready_timeout_s=max(1.0, deadline - time.monotonic()))
            channel.call(setup, wait_s=max(1.0, deadline - time.monotonic()))
        except BaseException:
            transport.close()
            raise
        return channel

    def _wait_ready(self, deadline: float) -> None:
        """Poll until the container is Ready and started; image pull failures end it at once."""
        state = "not yet created"
        while time.monotonic() < deadline:
            pod = self._core.read_namespaced_pod(self.id, self.namespace)
            st = pod.status
            state = f"phase {st.phase}" + (f", {st.reason}" if st.reason else "")
            for cs in st.container_statuses or []:
                waiting = cs.state.waiting if cs.state else None
                if waiting and waiting.reason in IMAGE_PULL_FAILURES:
                    raise SandboxStartError(
                        f"pod {self.id}: image {self.image!r} cannot be pulled "
                        f"({waiting.reason}: {waiting.message})"
                    )
                if waiting:
                    state += f", {waiting.reason}"
            if st.phase in ("Failed", "Succeeded"):
                raise SandboxStartError(f"pod {self.id} ended before it was ready ({state})")
            ready = any(c.type == "Ready" and c.status == "True" for c in st.conditions or [])
            started = all(cs.started for cs in st.container_statuses or [])
            if ready and started and st.container_statuses:
                return
            time.sleep(POLL_S)
        raise SandboxStartError(
            f"pod {self.id} was not Ready within {self.limits.start_timeout_s:.0f}s ({state})"
        )

    def copy_in(self, src: Path, dest: str) -> None:
        """Copy a host file or folder to `dest` through the helper (there is no copy API)."""
        src = Path(src)
        if src.is_file():
            self.write_file(dest, src.read_bytes(), mode=src.stat().st_mode & 0o777)
            return
        self.run(f"mkdir -p {shlex.quote(dest)}")
        for path in sorted(src.rglob("*")):
            target = f"{dest.rstrip('/')}/{path.relative_to(src).as_posix()}"
            if path.is_symlink():
                link = shlex.quote(os.readlink(path))
                self.run(f"ln -sfn {link} {shlex.quote(target)}")
            elif path.is_dir():
                self.run(f"mkdir -p {shlex.quote(target)}")
            else:
                self.write_file(target, path.read_bytes(), mode=path.stat().st_mode & 0o777)

    def close(self) -> None:
        super().close()
        if self._counted:
            self._counted = False
            self.admission().closed()
        if self._pod is not None:
            with contextlib.suppress(ApiException, HTTPError):
                self._core.delete_namespaced_pod(self._pod, self.namespace, grace_period_seconds=0)
            self._pod = None
        if self._api is not None:
            self._api.close()
            self._api = None

    @staticmethod
    def preflight() -> None:
        """Fail fast, in one line, when no cluster is configured or its API server is silent."""
        preflight()

    @staticmethod
    def clean_leftovers() -> list[str]:
        """Delete this host's sandbox pods whose creating process is gone (a killed run)."""
        return gc(orphans_only=True)


__all__ = ["KubernetesSandbox", "gc", "load_configuration", "memory_quantity", "pod_manifest"]
