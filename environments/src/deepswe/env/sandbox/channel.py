"""The host side of the sandbox helper protocol (server.py): one process, JSON lines both ways.

Every backend starts server.py inside its sandbox over one stream and hands it here as a
Transport (an argv for a subprocess, or the Kubernetes backend's exec websocket); everything
above the transport (run, read, write, timeouts, dead-sandbox detection) is shared.
"""

from __future__ import annotations

import base64
import json
import queue
import secrets
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from deepswe.env.sandbox import ExecResult, SandboxDied, SandboxError, SandboxLimits

SERVER_SOURCE = Path(__file__).with_name("server.py")
# Extra seconds the host waits past a command's own timeout before it calls the helper hung.
REPLY_GRACE_S = 30.0
# While waiting for an answer, how often the transport is asked whether its sandbox is gone.
GONE_CHECK_S = 1.0


class Transport(Protocol):
    """One byte stream to server.py: a subprocess pipe (Docker, local) or an exec websocket."""

    def send(self, data: bytes) -> None:
        """Write bytes to the helper's stdin; OSError if the stream is gone."""
        ...

    def lines(self) -> Iterator[bytes]:
        """The helper's stdout, a line at a time, until the stream ends."""
        ...

    def ended(self) -> bool:
        """True once the stream is over (the helper exited or the connection dropped)."""
        ...

    def gone(self) -> str | None:
        """Why the sandbox is known to be gone although the stream is still open (a pod
        deleted under a hung exec stream), or None. Called while a call waits."""
        ...

    def death_note(self) -> str:
        """Why the stream ended, for a SandboxDied message."""
        ...

    def close(self) -> None:
        """End the stream and whatever runs behind it. Safe to call twice."""
        ...


class ProcessTransport:
    """server.py behind a host subprocess's pipes (`docker exec -i ...`, or python3 itself)."""

    def __init__(self, argv: list[str]) -> None:
        self.argv = argv
        self._proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            bufsize=0,
        )

    def send(self, data: bytes) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.write(data)
        self._proc.stdin.flush()

    def lines(self) -> Iterator[bytes]:
        assert self._proc.stdout is not None
        yield from self._proc.stdout

    def ended(self) -> bool:
        return self._proc.poll() is not None

    def gone(self) -> str | None:
        return None  # the pipes close when the process or container goes: ended() says so

    def death_note(self) -> str:
        code = self._proc.poll()
        err = b""
        if code is not None and self._proc.stderr is not None:
            err = self._proc.stderr.read() or b""
        tail = err.decode(errors="replace").strip()[-500:]
        return f"sandbox helper stream closed (exit {code}){': ' + tail if tail else ''}"

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()


def _parse(line: bytes) -> dict | None:
    try:
        answer = json.loads(line)
    except ValueError:
        return None
    return answer if isinstance(answer, dict) else None


class Channel:
    """A running server.py, spoken to over one transport. One request at a time.

    `transport` is a Transport, or an argv run as a ProcessTransport.
    """

    def __init__(self, transport: Transport | list[str], *, ready_timeout_s: float = 60.0) -> None:
        if isinstance(transport, list):
            transport = ProcessTransport(transport)
        self._transport = transport
        self._lock = threading.Lock()
        self.keepalives = 0  # blank lines seen: the helper's traffic on an idle stream
        self.forged = 0  # lines that were not the answer asked for (wrong or no id)
        self._replies: queue.Queue[bytes | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        self.call({"op": "ping"}, wait_s=ready_timeout_s)

    def _pump(self) -> None:
        """Move answer lines to a queue, so a wait can time out; None marks end of stream.
        Blank lines are the helper's keepalives (traffic on an idle stream): not answers."""
        try:
            for line in self._transport.lines():
                if line.strip():
                    self._replies.put(line)
                else:
                    self.keepalives += 1
        finally:
            self._replies.put(None)

    def call(self, request: dict, *, wait_s: float) -> dict:
        """Send one request, return its answer; SandboxDied if the stream ends or stalls.

        Each request carries a fresh random id and only the answer that echoes it counts: a
        line forged into the helper's stdout by code running in the sandbox is skipped."""
        rid = secrets.token_hex(16)
        with self._lock:
            if self._transport.ended() and self._replies.empty():
                raise SandboxDied(self._death_note())
            try:
                self._transport.send((json.dumps({**request, "id": rid}) + "\n").encode())
            except OSError as exc:
                raise SandboxDied(f"{self._death_note()} ({exc})") from exc
            deadline = time.monotonic() + wait_s
            while True:
                line = self._answer(max(deadline - time.monotonic(), 0.001))
                if line is None:
                    raise SandboxDied(self._death_note())
                answer = _parse(line)
                if answer is not None and answer.get("id") == rid:
                    break
                self.forged += 1
        if not answer.get("ok"):
            raise SandboxError(answer.get("error", "unknown sandbox helper error"))
        return answer

    def _answer(self, wait_s: float) -> bytes | None:
        """The next answer line (None: the stream ended); SandboxDied when none comes within
        `wait_s` or the transport learns its sandbox is gone while the stream hangs."""
        deadline = time.monotonic() + wait_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.close()
                raise SandboxDied(f"sandbox helper gave no answer within {wait_s:.0f}s")
            try:
                return self._replies.get(timeout=min(left, GONE_CHECK_S))
            except queue.Empty:
                why = self._transport.gone()
                if why:
                    self.close()
                    raise SandboxDied(why) from None

    def run(
        self,
        cmd: str,
        *,
        timeout: float,
        cwd: str | None,
        env: dict[str, str] | None,
        max_output: int,
    ) -> ExecResult:
        req = {
            "op": "run",
            "cmd": cmd,
            "timeout": timeout,
            "cwd": cwd,
            "env": env or {},
            "max_output": max_output,
        }
        a = self.call(req, wait_s=timeout + REPLY_GRACE_S)
        return ExecResult(
            exit_code=a["exit_code"],
            stdout=a["stdout"],
            stderr=a["stderr"],
            timed_out=a["timed_out"],
            truncated=a["truncated"],
            seconds=a["seconds"],
        )

    def read(self, path: str) -> bytes:
        try:
            a = self.call({"op": "read", "path": path}, wait_s=REPLY_GRACE_S)
        except SandboxError as exc:
            if str(exc).startswith(("FileNotFoundError", "IsADirectoryError")):
                raise FileNotFoundError(path) from exc
            raise
        return base64.b64decode(a["data"])

    def write(self, path: str, data: bytes, mode: int | None) -> None:
        req = {"op": "write", "path": path, "data": base64.b64encode(data).decode(), "mode": mode}
        self.call(req, wait_s=REPLY_GRACE_S)

    def _death_note(self) -> str:
        return self._transport.death_note()

    def close(self) -> None:
        self._transport.close()


class ChannelSandbox:
    """What every backend shares once its helper stream is up: run, read, write, close.

    Subclasses set `id`, `limits`, `workdir` and `_channel`, and add `copy_in`.
    """

    id: str
    limits: SandboxLimits
    workdir: str
    _channel: Channel | None = None

    def _ch(self) -> Channel:
        if self._channel is None:
            raise SandboxDied(f"sandbox {self.id} is closed")
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

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = None

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
