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
- a handshake can fail right after Running: exec only once the pod is Ready and started.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.rest import ApiException
from kubernetes.stream.ws_client import STDERR_CHANNEL, STDOUT_CHANNEL, WSClient, get_websocket_url
from urllib3.exceptions import HTTPError

from deepswe.env.sandbox import SandboxDied, SandboxLimits, SandboxStartError
from deepswe.env.sandbox.channel import SERVER_SOURCE, Channel, ChannelSandbox

LABEL = "deepswe.sandbox"
CONTAINER = "sandbox"
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


def load_configuration(
    kubeconfig: str | None = None, context: str | None = None
) -> tuple[k8s.Configuration, str]:
    """Client configuration and namespace from KUBECONFIG / ~/.kube/config, else in-cluster."""
    cfg = k8s.Configuration()
    path = kubeconfig or os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
    path = path.split(os.pathsep)[0]
    if os.path.exists(path):
        k8s_config.load_kube_config(config_file=path, context=context, client_configuration=cfg)
        _, active = k8s_config.list_kube_config_contexts(config_file=path)
        if context:
            contexts, _ = k8s_config.list_kube_config_contexts(config_file=path)
            active = next(c for c in contexts if c["name"] == context)
        namespace = (active or {}).get("context", {}).get("namespace") or "default"
    elif os.environ.get("KUBERNETES_SERVICE_HOST"):
        k8s_config.load_incluster_config(client_configuration=cfg)
        ns_file = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
        namespace = ns_file.read_text().strip() if ns_file.exists() else "default"
    else:
        raise SandboxStartError(
            f"no Kubernetes cluster configured: no kubeconfig at {path} and not in a cluster "
            "(set KUBECONFIG)"
        )
    return cfg, os.environ.get("DEEPSWE_K8S_NAMESPACE") or namespace


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
    deadline_s: int = 24 * 3600,
) -> dict:
    """The pod for one sandbox: requests equal limits, no token, no service links, no restarts."""
    resources = {"cpu": f"{int(limits.cpus * 1000)}m", "memory": memory_quantity(limits.memory)}
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
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
    }


class ExecTransport:
    """server.py behind one `pods/exec` websocket (binary frames, no second output buffer)."""

    def __init__(self, api: k8s.ApiClient, namespace: str, pod: str, argv: list[str]) -> None:
        self._api, self._namespace, self._pod = api, namespace, pod
        cfg = api.configuration
        query = [("container", CONTAINER), ("stdin", "true"), ("stdout", "true")]
        query += [("stderr", "true"), ("tty", "false")] + [("command", a) for a in argv]
        url = get_websocket_url(f"{cfg.host}/api/v1/namespaces/{namespace}/pods/{pod}/exec", query)
        headers = {}
        for auth in cfg.auth_settings().values():
            if auth.get("in") == "header" and auth.get("value"):
                headers[auth["key"].lower()] = auth["value"]
        try:
            self._ws = WSClient(cfg, url, headers, capture_all=False, binary=True)
        except Exception as exc:  # the handshake was refused (websocket-client's own types)
            raise SandboxDied(f"exec into pod {pod} refused: {exc}") from exc
        self._send_lock = threading.Lock()
        self._stderr = bytearray()

    def send(self, data: bytes) -> None:
        if not self._ws.is_open():
            raise OSError("exec stream is closed")
        with self._send_lock:
            try:
                self._ws.write_stdin(data)
            except Exception as exc:  # websocket-client raises its own types on a dead socket
                raise OSError(str(exc)) from exc

    def lines(self) -> Iterator[bytes]:
        pending = b""
        while self._ws.is_open():
            try:
                self._ws.update(timeout=1)
            except Exception:  # a dropped connection: the stream is over
                break
            pending += self._ws.read_channel(STDOUT_CHANNEL)
            self._stderr = (self._stderr + self._ws.read_channel(STDERR_CHANNEL))[-2000:]
            *done, pending = pending.split(b"\n")
            for line in done:
                yield line + b"\n"

    def ended(self) -> bool:
        return not self._ws.is_open()

    def death_note(self) -> str:
        tail = self._stderr.decode(errors="replace").strip()[-500:]
        note = f"exec stream to pod {self._pod} closed ({pod_state(self._api, self._namespace, self._pod)})"
        return note + (f": {tail}" if tail else "")

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._ws.close()


def pod_state(api: k8s.ApiClient, namespace: str, pod: str) -> str:
    """The pod's phase and reason in words ("gone" if it no longer exists)."""
    try:
        p = k8s.CoreV1Api(api).read_namespaced_pod(pod, namespace)
    except ApiException as exc:
        return "pod gone" if exc.status == 404 else f"pod unreadable: {exc.status} {exc.reason}"
    st = p.status
    return f"phase {st.phase}" + (f", {st.reason}: {st.message}" if st.reason else "")


class KubernetesSandbox(ChannelSandbox):
    """A pod started from `image` with `limits`; deleted by `close()`."""

    _api: k8s.ApiClient | None = None

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
        self._pod: str | None = None
        cfg, self.namespace = load_configuration(kubeconfig, context)
        # One ApiClient per sandbox: the client's stream helpers patch a client's request
        # function in place, and a shared client has orphaned pods in other projects.
        self._api = k8s.ApiClient(cfg)
        self._core = k8s.CoreV1Api(self._api)
        started = time.monotonic()
        all_labels = {LABEL: "1", "deepswe.host": socket.gethostname()[:63], **(labels or {})}
        try:
            body = pod_manifest(
                self.id, image, self.limits, all_labels, runtime_class=runtime_class
            )
            self._core.create_namespaced_pod(self.namespace, body)
            self._pod = self.id
            self._wait_ready(started + self.limits.start_timeout_s)
            source = SERVER_SOURCE.read_bytes()
            argv = ["python3", "-u", "-c", BOOTSTRAP.format(n=len(source))]
            transport = ExecTransport(self._api, self.namespace, self.id, argv)
            transport.send(source)
            left = max(1.0, started + self.limits.start_timeout_s - time.monotonic())
            self._channel = Channel(transport, ready_timeout_s=left)
        except BaseException as exc:
            self.close()
            if isinstance(exc, SandboxStartError):
                raise
            if isinstance(exc, (ApiException, HTTPError, SandboxDied, OSError)):
                raise SandboxStartError(
                    f"pod {self.id} from {image!r} did not start: {exc}"
                ) from exc
            raise
        self.ready_seconds = time.monotonic() - started

    def _wait_ready(self, deadline: float) -> None:
        """Poll until the container is Ready and started; image pull failures end it at once."""
        state = "not yet created"
        while time.monotonic() < deadline:
            pod = self._core.read_namespaced_pod(self.id, self.namespace)
            st = pod.status
            state = f"phase {st.phase}"
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
        if self._pod is not None:
            with contextlib.suppress(ApiException):
                self._core.delete_namespaced_pod(self._pod, self.namespace, grace_period_seconds=0)
            self._pod = None
        if self._api is not None:
            self._api.close()
            self._api = None


def gc(
    selector: str | None = None, *, kubeconfig: str | None = None, context: str | None = None
) -> int:
    """Delete every sandbox pod matching `selector` (e.g. `deepswe.run=abc`) in one call.

    Without a selector, every deepswe sandbox pod of this host. Returns how many were named.
    """
    cfg, namespace = load_configuration(kubeconfig, context)
    host = socket.gethostname()[:63]
    label = f"{LABEL}=1," + (selector or f"deepswe.host={host}")
    with k8s.ApiClient(cfg) as api:
        core = k8s.CoreV1Api(api)
        n = len(core.list_namespaced_pod(namespace, label_selector=label).items)
        core.delete_collection_namespaced_pod(
            namespace, label_selector=label, grace_period_seconds=0
        )
    return n
