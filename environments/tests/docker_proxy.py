"""A Unix socket in front of the Docker engine's that slows it down on purpose, for tests.

The unmodified docker SDK talks to it (DOCKER_HOST=unix://<path>) and it forwards every byte to
the real engine, with three knobs:
- `delay_s`: every answer waits this long before its first byte goes back (a loaded daemon);
- `create_answer_delay_s`: a create's answer waits this long more; past the client's timeout
  the container exists and its answer is lost;
- `create_request_delay_s`: a create request reaches the engine only this late, even after
  the client gave up on it: the container appears after the client's timeout (a create that
  sat in a busy daemon).
A request is recognised by its first bytes (an HTTP method at the start of what the client
sends after the previous answer). What it does not prove: the daemon's own slowness (its locks,
its disk), only a slow answer as a client sees it.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from pathlib import Path

METHODS = (b"GET ", b"POST ", b"PUT ", b"DELETE ", b"HEAD ")


class SlowDocker:
    """Serves `path` until `close()`; `url` is what DOCKER_HOST takes."""

    def __init__(
        self,
        path: Path,
        *,
        delay_s: float = 0.0,
        create_answer_delay_s: float = 0.0,
        create_request_delay_s: float = 0.0,
        target: str = "/var/run/docker.sock",
    ) -> None:
        self.path, self.target = str(path), target
        self.delay_s = delay_s
        self.create_answer_delay_s = create_answer_delay_s
        self.create_request_delay_s = create_request_delay_s
        self.requests = 0
        self.creates = 0
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        self._server.bind(self.path)
        self._server.listen(512)
        self._open = True
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"unix://{self.path}"

    def _accept(self) -> None:
        while self._open:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        upstream.connect(self.target)
        hold = {"s": 0.0}  # the wait owed by the next answer on this connection
        threading.Thread(target=self._answers, args=(upstream, client, hold), daemon=True).start()
        try:
            while chunk := client.recv(65536):
                if chunk.startswith(METHODS):
                    self.requests += 1
                    is_create = b"/containers/create" in chunk.split(b"\r\n", 1)[0]
                    hold["s"] = self.delay_s + (self.create_answer_delay_s if is_create else 0)
                    if is_create:
                        self.creates += 1
                        time.sleep(self.create_request_delay_s)
                upstream.sendall(chunk)
        except OSError:
            pass
        if self.create_request_delay_s:
            # A held create still reaches the engine after its client left: keep the request's
            # connection open long enough for the engine to read it.
            time.sleep(1.0)
        for s in (client, upstream):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_WR)

    @staticmethod
    def _answers(upstream: socket.socket, client: socket.socket, hold: dict) -> None:
        try:
            while chunk := upstream.recv(65536):
                if hold["s"]:
                    wait, hold["s"] = hold["s"], 0.0
                    time.sleep(wait)
                client.sendall(chunk)
        except OSError:
            pass
        for s in (client, upstream):
            with contextlib.suppress(OSError):
                s.close()

    def close(self) -> None:
        self._open = False
        with contextlib.suppress(OSError):
            self._server.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
