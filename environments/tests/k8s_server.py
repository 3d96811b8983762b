"""A Kubernetes API server for tests, faithful on the wire, whose pods are real Docker containers.

No kubelet, kind or k3s can be installed here, so the backend is proven against this: the
unmodified `kubernetes` client drives it over HTTP exactly as it would a cluster. It serves
core/v1 pods (create, get, list by label, delete, delete-collection), answers errors as `Status`
objects, and upgrades `pods/exec` to a websocket speaking v5.channel.k8s.io or v4.channel.k8s.io
(one channel byte before each frame's data: 0 stdin, 1 stdout, 2 stderr, 3 the exit Status,
v5's 255 closes a channel). Each pod is `docker run --network none` with the pod's cpu and memory
limits; an exec is spliced to `docker exec -i`.

Faults, one knob each on FakeCluster, set by a test and consumed as they fire:
- `hold_pending` keeps new pods Pending (ContainerCreating) forever; `pending_s` for a while.
- An image the engine does not have ends in ImagePullBackOff, as a node that cannot pull would.
- `create_faults`: (status, committed) per create request: answered with that status, after
  creating the pod when `committed` (an answer lost on the way back).
- `exec_faults`: (status, message) per exec handshake: refused, as a kubelet that does not know
  the container yet refuses right after Running.
- `withhold_status`: an exec whose process ends never sends its status nor closes.
- `drop_streams()`: every open exec connection cut without a close frame.
- `evict(ns, name, hang=...)`: the pod Failed/Evicted and its container gone; with `hang` its
  streams go silent instead of ending (a node that vanished).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import socket
import struct
import subprocess
import threading
import time
import uuid
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"  # RFC 6455's fixed accept-key suffix
PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def status(code: int, reason: str, message: str, **details) -> dict:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure" if code >= 300 else "Success",
        "message": message,
        "reason": reason,
        "details": details,
        "code": code,
    }


def fault_status(code: int) -> dict:
    reason = {409: "AlreadyExists", 429: "TooManyRequests", 500: "InternalError"}.get(code, "")
    return status(code, reason or "InternalError", f"injected fault: {code} {reason}")


def matches(labels: dict, selector: str) -> bool:
    """Equality-based label selectors: `a=b`, `a==b`, `a!=b`, `a`, `!a`, comma for AND."""
    for term in filter(None, (t.strip() for t in selector.split(","))):
        if "!=" in term:
            k, v = term.split("!=", 1)
            if labels.get(k) == v:
                return False
        elif "=" in term:
            k, v = term.replace("==", "=").split("=", 1)
            if labels.get(k) != v:
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


def cpus(quantity: str) -> float:
    return int(quantity[:-1]) / 1000 if quantity.endswith("m") else float(quantity)


def memory_bytes(quantity: str) -> int:
    for suffix, scale in (("Ki", 1 << 10), ("Mi", 1 << 20), ("Gi", 1 << 30)):
        if quantity.endswith(suffix):
            return int(quantity[: -len(suffix)]) * scale
    return int(quantity)


class FakeCluster:
    """Pods by (namespace, name), each backed by one container carrying this cluster's label."""

    def __init__(self) -> None:
        self.label = f"deepswe.k8s-test={uuid.uuid4().hex[:8]}"
        self.pods: dict[tuple[str, str], dict] = {}
        self.lock = threading.Lock()
        self.hold_pending = False
        self.pending_s = 0.0
        self.create_faults: list[tuple[int, bool]] = []
        self.exec_faults: list[tuple[int, str]] = []
        self.withhold_status = False
        self.streams: dict[tuple[str, str], list[ServerSocket]] = {}
        self.verbs: set[tuple[str, str]] = set()  # (resource, RBAC verb) of every request

    def container(self, ns: str, name: str) -> str:
        return f"k8stest-{ns}-{name}"

    def create(self, ns: str, pod: dict) -> tuple[int, dict]:
        fault = self.create_faults.pop(0) if self.create_faults else None
        if fault and not fault[1]:
            return fault[0], fault_status(fault[0])
        code, body = self._create(ns, pod)
        return (fault[0], fault_status(fault[0])) if fault else (code, body)

    def _create(self, ns: str, pod: dict) -> tuple[int, dict]:
        meta = pod.setdefault("metadata", {})
        name = meta.get("name")
        if not name:
            return 422, status(422, "Invalid", "metadata.name: Required value", kind="pods")
        with self.lock:
            if (ns, name) in self.pods:
                msg = f'pods "{name}" already exists'
                return 409, status(409, "AlreadyExists", msg, name=name, kind="pods")
            meta.update(namespace=ns, uid=str(uuid.uuid4()), creationTimestamp=_now())
            meta["resourceVersion"] = "1"
            c = pod["spec"]["containers"][0]
            pod["status"] = {
                "phase": "Pending",
                "conditions": [{"type": "Ready", "status": "False"}],
                "containerStatuses": [
                    self._cstatus(c, {"waiting": {"reason": "ContainerCreating"}})
                ],
            }
            self.pods[(ns, name)] = pod
        if not self.hold_pending:
            threading.Thread(target=self._start, args=(ns, pod), daemon=True).start()
        return 201, pod

    def _cstatus(self, c: dict, state: dict, ready: bool = False) -> dict:
        return {
            "name": c["name"],
            "image": c["image"],
            "imageID": "",
            "ready": ready,
            "started": ready,
            "restartCount": 0,
            "state": state,
        }

    def _start(self, ns: str, pod: dict) -> None:
        time.sleep(self.pending_s)
        c = pod["spec"]["containers"][0]
        name = pod["metadata"]["name"]
        have = subprocess.run(["docker", "image", "inspect", c["image"]], capture_output=True)
        if have.returncode != 0:  # no registry is reachable: the node cannot pull it
            waiting = {"reason": "ImagePullBackOff", "message": f'Back-off pulling "{c["image"]}"'}
            pod["status"]["containerStatuses"] = [self._cstatus(c, {"waiting": waiting})]
            return
        lim = c.get("resources", {}).get("limits", {})
        argv = ["docker", "run", "-d", "--init", "--network", "none", "--label", self.label]
        argv += ["--name", self.container(ns, name)]
        if "cpu" in lim:
            argv += ["--cpus", str(cpus(lim["cpu"]))]
        if "memory" in lim:
            argv += ["--memory", str(memory_bytes(lim["memory"]))]
        argv += [c["image"], *c.get("command", []), *c.get("args", [])]
        started = subprocess.run(argv, capture_output=True, text=True)
        if started.returncode != 0:
            term = {"terminated": {"exitCode": 128, "reason": "StartError"}}
            pod["status"].update(phase="Failed", containerStatuses=[self._cstatus(c, term)])
            return
        pod["status"] = {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [self._cstatus(c, {"running": {"startedAt": _now()}}, True)],
        }

    def evict(self, ns: str, name: str, *, hang: bool = False) -> None:
        """What a node under pressure does: the pod Failed/Evicted, its container killed."""
        pod = self.pods[(ns, name)]
        if hang:
            for ws in self.streams.get((ns, name), []):
                ws.frozen = True
        c = pod["spec"]["containers"][0]
        term = {"terminated": {"exitCode": 137, "reason": "Error"}}
        pod["status"].update(
            phase="Failed",
            reason="Evicted",
            message="The node was low on resource: memory.",
            conditions=[{"type": "Ready", "status": "False"}],
            containerStatuses=[self._cstatus(c, term)],
        )
        subprocess.run(["docker", "rm", "-f", self.container(ns, name)], capture_output=True)

    def drop_streams(self) -> None:
        """Cut every open exec connection at the TCP level: no status, no close frame."""
        for sockets in list(self.streams.values()):
            for ws in sockets:
                ws.drop()

    def delete(self, ns: str, name: str) -> tuple[int, dict]:
        with self.lock:
            pod = self.pods.pop((ns, name), None)
        if pod is None:
            return 404, status(404, "NotFound", f'pods "{name}" not found', name=name, kind="pods")
        subprocess.run(["docker", "rm", "-f", self.container(ns, name)], capture_output=True)
        return 200, pod

    def listing(self, ns: str, selector: str) -> list[dict]:
        with self.lock:
            return [
                p
                for (n, _), p in self.pods.items()
                if n == ns and matches(p["metadata"].get("labels", {}), selector)
            ]

    def shutdown(self) -> None:
        ids = subprocess.run(
            ["docker", "ps", "-aq", "--filter", f"label={self.label}"],
            capture_output=True,
            text=True,
        ).stdout.split()
        if ids:
            subprocess.run(["docker", "rm", "-f", *ids], capture_output=True)


class Handler(BaseHTTPRequestHandler):
    cluster: FakeCluster
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # quiet: pytest shows failures, not access logs
        pass

    def _route(self) -> tuple[list[str], dict]:
        url = urlparse(self.path)
        return [p for p in url.path.split("/") if p], parse_qs(url.query)

    def _send(self, code: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        if code == 429:
            self.send_header("Retry-After", "1")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> dict:
        n = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(n) or b"{}")

    def do_POST(self) -> None:
        parts, _ = self._route()
        if parts[:3] == ["api", "v1", "namespaces"] and parts[4:] == ["pods"]:
            self.cluster.verbs.add(("pods", "create"))
            return self._send(*self.cluster.create(parts[3], self._body()))
        self._send(404, status(404, "NotFound", "the server could not find the requested resource"))

    def do_GET(self) -> None:
        parts, query = self._route()
        if parts[:3] != ["api", "v1", "namespaces"] or len(parts) < 5 or parts[4] != "pods":
            return self._send(
                404, status(404, "NotFound", "the server could not find the requested resource")
            )
        ns = parts[3]
        resource = "pods/exec" if parts[6:] == ["exec"] else "pods"
        self.cluster.verbs.add((resource, "list" if len(parts) == 5 else "get"))
        if len(parts) == 5:
            items = self.cluster.listing(ns, query.get("labelSelector", [""])[0])
            return self._send(
                200, {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items}
            )
        pod = self.cluster.pods.get((ns, parts[5]))
        if pod is None:
            msg = f'pods "{parts[5]}" not found'
            return self._send(404, status(404, "NotFound", msg, name=parts[5], kind="pods"))
        if parts[6:] == ["exec"]:
            return self._exec(ns, pod, query)
        self._send(200, pod)

    def do_DELETE(self) -> None:
        parts, query = self._route()
        if parts[:3] == ["api", "v1", "namespaces"] and parts[4:5] == ["pods"]:
            self.cluster.verbs.add(("pods", "delete" if len(parts) == 6 else "deletecollection"))
            if len(parts) == 6:
                return self._send(*self.cluster.delete(parts[3], parts[5]))
            gone = [p for p in self.cluster.listing(parts[3], query.get("labelSelector", [""])[0])]
            for p in gone:
                self.cluster.delete(parts[3], p["metadata"]["name"])
            return self._send(
                200, {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": gone}
            )
        self._send(404, status(404, "NotFound", "the server could not find the requested resource"))

    # --- pods/exec over a websocket ---------------------------------------------------------

    def _exec(self, ns: str, pod: dict, query: dict) -> None:
        if self.cluster.exec_faults:
            code, msg = self.cluster.exec_faults.pop(0)
            return self._send(code, status(code, "InternalError", msg))
        if pod["status"].get("phase") != "Running":
            msg = f"container {pod['spec']['containers'][0]['name']} not found"
            return self._send(400, status(400, "BadRequest", msg))
        offered = [p.strip() for p in self.headers.get("Sec-WebSocket-Protocol", "").split(",")]
        proto = next((p for p in PROTOCOLS if p in offered), None)
        key = self.headers.get("Sec-WebSocket-Key")
        if self.headers.get("Upgrade", "").lower() != "websocket" or not key or proto is None:
            return self._send(400, status(400, "BadRequest", "exec needs a websocket upgrade"))
        accept = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.send_header("Sec-WebSocket-Protocol", proto)
        self.end_headers()
        self.close_connection = True
        argv = ["docker", "exec", "-i", self.cluster.container(ns, pod["metadata"]["name"])]
        proc = subprocess.Popen(
            argv + query.get("command", []),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            bufsize=0,
        )
        ws = ServerSocket(self.connection)
        key = (ns, pod["metadata"]["name"])
        self.cluster.streams.setdefault(key, []).append(ws)
        for ch in (1, 2, 3):  # an empty frame per output channel says the stream is open
            ws.send(bytes([ch]))
        pumps = [
            threading.Thread(target=_pump, args=(proc.stdout, ws, 1), daemon=True),
            threading.Thread(target=_pump, args=(proc.stderr, ws, 2), daemon=True),
        ]
        for t in pumps:
            t.start()
        feeder = threading.Thread(target=_feed, args=(ws, proc), daemon=True)
        feeder.start()
        for t in pumps:
            t.join()
        code = proc.wait()
        if self.cluster.withhold_status or ws.frozen:
            feeder.join()  # silent until the client gives up and closes
            return
        if code == 0:
            result = {"metadata": {}, "status": "Success"}
        else:
            result = status(
                500, "NonZeroExitCode", f"command terminated with non-zero exit code: {code}"
            )
            result["details"] = {"causes": [{"reason": "ExitCode", "message": str(code)}]}
        ws.send(b"\x03" + json.dumps(result).encode())
        ws.close()


def _pump(pipe, ws: ServerSocket, channel: int) -> None:
    while chunk := pipe.read(65536):
        if not ws.send(bytes([channel]) + chunk):
            break


def _feed(ws: ServerSocket, proc: subprocess.Popen) -> None:
    """Client frames to the process's stdin; the stream's end (or v5 close of 0) closes stdin."""
    try:
        for payload in ws.frames():
            if payload[:1] == b"\x00":
                proc.stdin.write(payload[1:])
            elif payload[:2] == b"\xff\x00":
                break
    except OSError:
        pass
    with contextlib.suppress(OSError):
        proc.stdin.close()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()


class ServerSocket:
    """The server end of RFC 6455 framing: unmasked binary frames out, masked frames in."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.lock = threading.Lock()
        self.closed = False
        self.frozen = False  # sends are swallowed: a connection whose far end went silent

    def drop(self) -> None:
        with self.lock:
            self.closed = True
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)

    def send(self, payload: bytes, opcode: int = 0x2) -> bool:
        n = len(payload)
        if n < 126:
            head = struct.pack("!BB", 0x80 | opcode, n)
        elif n < 1 << 16:
            head = struct.pack("!BBH", 0x80 | opcode, 126, n)
        else:
            head = struct.pack("!BBQ", 0x80 | opcode, 127, n)
        with self.lock:
            if self.frozen:
                return True
            if self.closed:
                return False
            try:
                self.sock.sendall(head + payload)
            except OSError:
                self.closed = True
                return False
        return True

    def _read(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise OSError("connection closed")
            buf += chunk
        return buf

    def frames(self):
        """Data payloads (text or binary, fragments joined) until a close frame or EOF."""
        message = b""
        while True:
            b0, b1 = self._read(2)
            opcode, n = b0 & 0x0F, b1 & 0x7F
            if n == 126:
                n = struct.unpack("!H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", self._read(8))[0]
            mask = self._read(4) if b1 & 0x80 else b"\0\0\0\0"
            data = bytes(c ^ mask[i % 4] for i, c in enumerate(self._read(n)))
            if opcode == 0x8:
                return
            if opcode == 0x9:
                self.send(data, opcode=0xA)
                continue
            if opcode in (0x0, 0x1, 0x2):
                message += data
                if b0 & 0x80:
                    yield message
                    message = b""

    def close(self) -> None:
        if self.frozen:
            return
        self.send(struct.pack("!H", 1000), opcode=0x8)
        with self.lock:
            self.closed = True
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)


def serve(kubeconfig_path) -> tuple[ThreadingHTTPServer, FakeCluster]:
    """Start the server on a free local port and write a kubeconfig that points at it."""
    cluster = FakeCluster()
    handler = type("BoundHandler", (Handler,), {"cluster": cluster})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    host = f"http://127.0.0.1:{server.server_address[1]}"
    kubeconfig_path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "test", "cluster": {"server": host}}],
                "users": [{"name": "test", "user": {"token": "test-token"}}],
                "contexts": [
                    {
                        "name": "test",
                        "context": {"cluster": "test", "user": "test", "namespace": "deepswe"},
                    }
                ],
                "current-context": "test",
            }
        )
    )
    return server, cluster
