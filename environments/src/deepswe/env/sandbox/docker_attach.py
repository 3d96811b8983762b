"""The Docker backend's stream: server.py as the container's own process, over its attach socket.

The container's command is the helper's bootstrap (read server.py's source from stdin, run it
on the same stdin), created with stdin open and attached to before it starts, as `docker run
-i` does. So a start is create + attach + start, three API calls in this process: no `docker
exec`, no CLI subprocess per sandbox, and no copy of the helper into the container.

The container is made with stdin-once and auto-remove: when this process goes (even by
SIGKILL) its end of the socket closes, the helper reads end-of-input, kills the command in
flight and exits, the container stops and the engine removes it. Nothing outlives its owner.

Frames on the socket (no TTY): 8 bytes [stream, 0, 0, 0, size: uint32 big-endian] then
`size` bytes; stream 1 is stdout (the protocol), 2 is stderr (kept, the tail, for messages).
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Callable, Iterator

HEADER = struct.Struct(">BxxxL")
STDOUT, STDERR = 1, 2
STDERR_TAIL = 2000  # bytes of the helper's stderr kept for a death message
RECV_BYTES = 1 << 16


class AttachTransport:
    """One container's attach socket, speaking to the helper that is its main process.

    `sock` is what the SDK's `attach_socket` returns (a socket, or a SocketIO over one);
    `why_gone()` asks the engine what became of the container, for death messages.
    """

    def __init__(self, sock, why_gone: Callable[[], str]) -> None:
        self._sock: socket.socket = getattr(sock, "_sock", sock)
        self._keep = sock  # the SDK's wrapper holds the HTTP response; dropping it closes TLS
        self._sock.settimeout(None)  # a command may be quiet for its whole timeout
        self._why_gone = why_gone
        self._ended = threading.Event()
        self._stderr = bytearray()
        self._closed = False

    def send(self, data: bytes) -> None:
        self._sock.sendall(data)

    def lines(self) -> Iterator[bytes]:
        """stdout's lines until the stream ends; stderr frames are kept apart."""
        pending = bytearray()
        line = bytearray()
        try:
            for stream, payload in self._frames(pending):
                if stream == STDERR:
                    self._stderr.extend(payload)
                    del self._stderr[:-STDERR_TAIL]
                    continue
                line.extend(payload)
                while (cut := line.find(b"\n")) >= 0:
                    yield bytes(line[: cut + 1])
                    del line[: cut + 1]
        finally:
            self._ended.set()

    def _frames(self, buf: bytearray) -> Iterator[tuple[int, bytes]]:
        while True:
            while len(buf) < HEADER.size:
                if not self._recv_into(buf):
                    return
            stream, size = HEADER.unpack_from(buf)
            while len(buf) < HEADER.size + size:
                if not self._recv_into(buf):
                    return
            yield stream, bytes(buf[HEADER.size : HEADER.size + size])
            del buf[: HEADER.size + size]

    def _recv_into(self, buf: bytearray) -> bool:
        try:
            chunk = self._sock.recv(RECV_BYTES)
        except OSError:
            return False
        buf.extend(chunk)
        return bool(chunk)

    def ended(self) -> bool:
        return self._ended.is_set()

    def gone(self) -> str | None:
        return None  # the socket ends when the container does: ended() says so

    def death_note(self) -> str:
        tail = self._stderr.decode(errors="replace").strip()[-500:]
        return f"sandbox helper stream closed ({self._why_gone()}){': ' + tail if tail else ''}"

    def close(self) -> None:
        """Close our end: the helper reads end-of-input and exits (the container with it)."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self._sock.close()


__all__ = ["AttachTransport"]
