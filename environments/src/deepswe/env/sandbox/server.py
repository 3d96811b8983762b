#!/usr/bin/env python3
"""The helper that runs inside every sandbox: JSON lines in on stdin, JSON lines out on stdout.

It is started once per sandbox over a single exec stream (`docker exec -i`, a Kubernetes exec
stream, or a plain subprocess in unit tests), so a tool call is one message instead of a new
`docker exec`, and Docker and Kubernetes share everything above the transport.

Standard library only, Python 3.6+: it runs with whatever python3 a task image has.

Requests (one JSON object a line, answered in order, one answer each):
  {"op": "run", "cmd": str, "timeout": s, "cwd": str, "env": {..}, "max_output": bytes}
      run by `bash -c cmd`, or, for a cmd over LONG_COMMAND_BYTES, `bash FILE` (a temporary
      copy, removed afterwards; $0 is then FILE), since Linux refuses an argv string over 128 KiB
  {"op": "read", "path": str, "max_bytes": int}      -> data (base64)
  {"op": "write", "path": str, "data": base64, "mode": int}
  {"op": "ping"}
  {"op": "config", "keepalive_s": s, "pids": int}   both optional; see SETTINGS
Answers: {"ok": true, ...} or {"ok": false, "error": str}, one line each, carrying the request's
"id" when it had one; a blank line is a keepalive (traffic on an idle stream, which nodes and
load balancers would otherwise cut). The host sends a fresh random id with every request and
takes only the answer that carries it: a line written into this process's stdout by anything
else (a test process that reached `/proc/<pid>/fd/1`) is not an answer.

When its input ends (the host closed the stream, or the connection dropped) the helper kills
the command in flight with its whole process group and exits: nothing outlives the stream.
"""

import base64
import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time

TRUNCATION_MARKER = "\n[... output truncated: {dropped} more bytes dropped ...]\n"
# After the command's own process exits, how long its pipes may stay open (held by children it
# left behind) before the whole process group is killed.
STRAGGLER_GRACE_S = 0.5
PIDS_NOTE = "\n[sandbox: more than {limit} processes; the command was killed]\n"
# Set by the "config" op. keepalive_s: a blank line on stdout this often (0: never). pids: the
# most processes the sandbox may hold while a command runs, counted in /proc (0: not counted
# here). The Kubernetes pod API has no per-pod pids limit, so that backend asks for it here;
# Docker enforces it in the kernel (--pids-limit).
SETTINGS = {"keepalive_s": 0.0, "pids": 0}
CURRENT = {"pgid": None}  # the process group of the command in flight
# Linux caps one argv string at 128 KiB (MAX_ARG_STRLEN): `bash -c CMD` fails with E2BIG for a
# longer CMD. A command over this many bytes is run from a file instead (`bash FILE`, removed
# afterwards); a shorter one keeps `bash -c` (its $0, its exec of a last simple command).
LONG_COMMAND_BYTES = 64 << 10
_out_lock = threading.Lock()


class _Capped:
    """Drains one pipe, keeping at most `limit` bytes and counting the rest."""

    def __init__(self, pipe, limit):
        self.pipe, self.limit = pipe, limit
        self.kept, self.dropped = bytearray(), 0
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def _drain(self):
        while True:
            try:
                chunk = os.read(self.pipe.fileno(), 65536)
            except OSError:
                break
            if not chunk:
                break
            room = self.limit - len(self.kept)
            if room > 0:
                self.kept.extend(chunk[:room])
            self.dropped += max(0, len(chunk) - max(room, 0))

    def text(self):
        out = self.kept.decode("utf-8", errors="replace")
        if self.dropped:
            out += TRUNCATION_MARKER.format(dropped=self.dropped)
        return out


def _kill_group(pgid):
    """SIGKILL every process of the group until none is left (a fork bomb keeps forking)."""
    for _ in range(50):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            return
        except PermissionError:
            return
        time.sleep(0.02)


def _count_processes():
    try:
        return sum(1 for name in os.listdir("/proc") if name.isdigit())
    except OSError:
        return 0


def _watch_pids(proc, limit, tripped):
    """Kill the command's group once the sandbox holds more than `limit` processes."""
    while proc.poll() is None:
        if _count_processes() > limit:
            tripped.append(True)
            _kill_group(proc.pid)
            return
        time.sleep(0.05)


def _capped(pipe, limit, pgid):
    """A drained pipe. When not even its thread can start, the command has taken every pid the
    sandbox has (a fork bomb, faster than the helper): its group is killed, which frees them."""
    try:
        return _Capped(pipe, limit)
    except RuntimeError:
        _kill_group(pgid)
        return _Capped(pipe, limit)


def _command_argv(cmd):
    """(the argv that runs `cmd` with bash, the file it was written to or None). A command longer
    than LONG_COMMAND_BYTES goes through a private temporary file: no argv string may hold it."""
    data = os.fsencode(cmd)
    if len(data) <= LONG_COMMAND_BYTES or b"\0" in data:
        return ["/bin/bash", "-c", cmd], None
    fd, path = tempfile.mkstemp(prefix="deepswe-cmd-", suffix=".sh")  # mode 0600
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
    except OSError:
        _remove(path)
        raise
    return ["/bin/bash", path], path


def _remove(path):
    if path is not None:
        with contextlib.suppress(OSError):
            os.unlink(path)


def run(req):
    timeout = float(req.get("timeout") or 90.0)
    limit = int(req.get("max_output") or 1 << 20)
    env = dict(os.environ)
    env.update(req.get("env") or {})
    start = time.monotonic()
    script = None
    try:
        argv, script = _command_argv(req["cmd"])
        proc = subprocess.Popen(
            argv,
            cwd=req.get("cwd") or None,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # own process group: a timeout kills everything it started
        )
    except OSError as exc:
        # The command could not start (its cwd was deleted, no pids left): the command
        # failed, not the sandbox. Reported like a shell that cannot execute: status 126.
        _remove(script)
        msg = "could not start command in %s: %s\n" % (req.get("cwd") or ".", exc)
        return {
            "ok": True,
            "exit_code": 126,
            "stdout": "",
            "stderr": msg,
            "timed_out": False,
            "truncated": False,
            "seconds": round(time.monotonic() - start, 4),
        }
    CURRENT["pgid"] = proc.pid
    out, err = _capped(proc.stdout, limit, proc.pid), _capped(proc.stderr, limit, proc.pid)
    tripped = []
    if SETTINGS["pids"]:
        args = (proc, SETTINGS["pids"], tripped)
        try:
            threading.Thread(target=_watch_pids, args=args, daemon=True).start()
        except RuntimeError:  # no thread left: the limit is already reached
            tripped.append(True)
            _kill_group(proc.pid)
    timed_out = False
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
    # Kill what is left of the group: the command itself on timeout, or children it left behind
    # that would hold the pipes open forever (`yes &`).
    out.thread.join(0 if timed_out else STRAGGLER_GRACE_S)
    _kill_group(proc.pid)
    proc.wait()
    CURRENT["pgid"] = None
    _remove(script)
    out.thread.join(5)
    err.thread.join(5)
    note = PIDS_NOTE.format(limit=SETTINGS["pids"]) if tripped else ""
    return {
        "ok": True,
        "exit_code": proc.returncode if not timed_out else -9,
        "stdout": out.text(),
        "stderr": err.text() + note,
        "timed_out": timed_out,
        "truncated": bool(out.dropped or err.dropped),
        "seconds": round(time.monotonic() - start, 4),
    }


def read(req):
    with open(req["path"], "rb") as fh:
        data = fh.read(int(req.get("max_bytes") or 64 << 20))
    return {"ok": True, "data": base64.b64encode(data).decode("ascii")}


def write(req):
    path = req["path"]
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(base64.b64decode(req["data"]))
    if req.get("mode") is not None:
        os.chmod(path, int(req["mode"]))
    return {"ok": True}


def _emit(channel, text):
    with _out_lock:
        channel.write(text)
        channel.flush()


def _keepalive(channel):
    while True:
        time.sleep(SETTINGS["keepalive_s"])
        try:
            _emit(channel, "\n")
        except (OSError, ValueError):
            return


def _configure(channel):
    def config(req):
        first = not SETTINGS["keepalive_s"]
        SETTINGS["keepalive_s"] = float(req.get("keepalive_s") or SETTINGS["keepalive_s"])
        SETTINGS["pids"] = int(req.get("pids") or SETTINGS["pids"])
        if first and SETTINGS["keepalive_s"] > 0:
            threading.Thread(target=_keepalive, args=(channel,), daemon=True).start()
        return {"ok": True}

    return config


def _read_requests(requests):
    """stdin's lines to `requests`; at its end, kill the command in flight: nothing may outlive
    the stream (an exec'd process survives a dropped Kubernetes exec stream otherwise)."""
    for line in sys.stdin:
        requests.put(line)
    requests.put(None)
    pgid = CURRENT["pgid"]
    if pgid is not None:
        _kill_group(pgid)


OPS = {
    "run": run,
    "read": read,
    "write": write,
    "ping": lambda req: {"ok": True, "pid": os.getpid()},
}


def main():
    # Our own stdout carries the protocol; nothing else may write to it.
    channel = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    sys.stdout = sys.stderr
    OPS["config"] = _configure(channel)
    requests = queue.Queue()
    threading.Thread(target=_read_requests, args=(requests,), daemon=True).start()
    while True:
        line = requests.get()
        if line is None:
            break
        if not line.strip():
            continue
        req = {}
        try:
            req = json.loads(line)
            answer = OPS[req["op"]](req)
        except KeyError as exc:
            answer = {"ok": False, "error": "bad request: missing or unknown %s" % exc}
        except Exception as exc:  # answer every request; the host decides what is fatal
            answer = {"ok": False, "error": "%s: %s" % (type(exc).__name__, exc)}
        if isinstance(req, dict) and "id" in req:
            answer["id"] = req["id"]
        try:
            _emit(channel, json.dumps(answer) + "\n")
        except (OSError, ValueError):  # the host is gone
            break


if __name__ == "__main__":
    main()
