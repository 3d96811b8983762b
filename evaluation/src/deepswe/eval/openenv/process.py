"""A `deepswe-eval serve` process started from a profile section, waited on until it answers.

What a driver in another process needs (examples/trl_openenv, bench/openenv_latency.py, the
tests): a free port, the profile written beside the server's log, the process, and its URL once
`/health` answers; a server that exits or stays silent is an error carrying its log's tail.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import requests
import yaml


class ServerDidNotStart(RuntimeError):
    """The server exited, or did not answer /health in time; the message ends with its log."""


@dataclass
class ServeProcess:
    """A running server: its URL, process and log file."""

    url: str
    proc: subprocess.Popen
    log: Path

    def stop(self, timeout_s: float = 30.0) -> None:
        """Interrupt it (its sessions close their sandboxes), killing it if it lingers."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def free_port() -> int:
    """A TCP port on the loopback nobody listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_serve(
    section: dict, folder: Path, *, name: str = "server", timeout_s: float = 120.0
) -> ServeProcess:
    """`deepswe-eval serve` with `section` as its profile's `openenv:` section (a free port is
    chosen unless it names one), the profile and log written in `folder` as `<name>.yaml` and
    `<name>.log`; returns once it answers /health."""
    section = {**section, "port": section.get("port") or free_port()}
    folder.mkdir(parents=True, exist_ok=True)
    profile, log = folder / f"{name}.yaml", folder / f"{name}.log"
    profile.write_text(yaml.safe_dump({"openenv": section}))
    cli = str(Path(sys.executable).with_name("deepswe-eval"))
    with log.open("w") as out:
        proc = subprocess.Popen(
            [cli, "serve", "--config", str(profile)], stdout=out, stderr=subprocess.STDOUT
        )
    url = f"http://127.0.0.1:{section['port']}"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ServerDidNotStart(f"the server exited {proc.returncode}: {_tail(log)}")
        try:
            if requests.get(f"{url}/health", timeout=2).ok:
                return ServeProcess(url, proc, log)
        except requests.RequestException:
            pass
        time.sleep(0.5)
    proc.kill()
    proc.wait()
    raise ServerDidNotStart(f"the server did not answer in {timeout_s:.0f} s: {_tail(log)}")


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-2000:]


__all__ = ["ServeProcess", "ServerDidNotStart", "free_port", "start_serve"]
