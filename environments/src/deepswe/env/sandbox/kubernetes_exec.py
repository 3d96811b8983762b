"""The Kubernetes backend's stream: server.py behind one `pods/exec` websocket.

Split from kubernetes.py (the pod's life) because this is the part that talks the exec
protocol: binary frames, no second output buffer, and the pod's phase read when the stream
ends or stalls, so a dead pod is reported as such (SandboxDied -> infra_error).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

from kubernetes import client as k8s
from kubernetes.client.rest import ApiException
from kubernetes.stream.ws_client import STDERR_CHANNEL, STDOUT_CHANNEL, WSClient, get_websocket_url
from urllib3.exceptions import HTTPError

from deepswe.env.sandbox import SandboxDied

CONTAINER = "sandbox"
# How often a call that is still waiting asks the API server whether the pod is alive: a pod
# deleted or evicted under a hung stream is noticed this soon, not at the call's deadline.
POD_PROBE_S = 10.0


class ExecRefused(SandboxDied):
    """The exec handshake was refused (HTTP status `status`, 0 when no answer came)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def pod_state(api: k8s.ApiClient, namespace: str, pod: str) -> tuple[str | None, str]:
    """(phase, the pod's state in words); phase None when the pod no longer exists."""
    try:
        p = k8s.CoreV1Api(api).read_namespaced_pod(pod, namespace)
    except ApiException as exc:
        if exc.status == 404:
            return None, "pod gone"
        return "Unknown", f"pod unreadable: {exc.status} {exc.reason}"
    except HTTPError as exc:
        return "Unknown", f"API server unreachable: {exc}"
    st = p.status
    words = f"phase {st.phase}" + (f", {st.reason}: {st.message}" if st.reason else "")
    return st.phase, words


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
            status = getattr(exc, "status_code", 0) or 0
            raise ExecRefused(f"exec into pod {pod} refused: {exc}", status) from exc
        self._send_lock = threading.Lock()
        self._stderr = bytearray()
        self._last_probe = time.monotonic()

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

    def gone(self) -> str | None:
        """Why the pod is gone though the stream is still open (None while it runs)."""
        if time.monotonic() - self._last_probe < POD_PROBE_S:
            return None
        self._last_probe = time.monotonic()
        phase, words = pod_state(self._api, self._namespace, self._pod)
        if phase in ("Running", "Unknown"):  # Unknown: the API server hiccuped; keep waiting
            return None
        return f"pod {self._pod} is no longer running ({words}) while its exec stream hung"

    def death_note(self) -> str:
        tail = self._stderr.decode(errors="replace").strip()[-500:]
        _, words = pod_state(self._api, self._namespace, self._pod)
        note = f"exec stream to pod {self._pod} closed ({words})"
        return note + (f": {tail}" if tail else "")

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._ws.close()
