"""The Docker engine as the sandbox backend calls it: SDK clients whose every call is bounded.

One client per (DOCKER_HOST, timeout): lifecycle calls get the start's timeout, gc and the
reaper short ones, image builds the SDK's long default, so no call waits 300 s on a daemon that
is merely busy. DOCKER_HOST is read at each call, so a process (or a test) pointing it at
another socket gets a client for that socket.
"""

from __future__ import annotations

import os
import threading

import docker
import docker.errors
import requests.exceptions
import urllib3.exceptions

from deepswe.env.sandbox import SandboxStartError

# What a call raises when the engine's answer never came (timeout, dropped connection): the
# call may or may not have taken effect in the daemon.
NO_ANSWER: tuple[type[BaseException], ...] = (
    requests.exceptions.RequestException,
    urllib3.exceptions.HTTPError,
    OSError,
)
_clients: dict[tuple[str, float], docker.DockerClient] = {}
_lock = threading.Lock()


def engine_host() -> str:
    """The engine this process talks to now (DOCKER_HOST, or the default socket)."""
    return os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


def engine(timeout: float = 300.0, host: str | None = None) -> docker.DockerClient:
    """A client for `host` (default: DOCKER_HOST) whose calls give up after `timeout` seconds.

    The pool is large because every ready sandbox holds one connection (its attach socket)
    besides the lifecycle calls in flight.
    """
    host = host or engine_host()
    key = (host, float(timeout))
    with _lock:
        found = _clients.get(key)
    if found is not None:
        return found
    try:
        env = {**os.environ, "DOCKER_HOST": host}  # TLS settings come from the environment too
        made = docker.from_env(timeout=timeout, max_pool_size=256, environment=env)
        made.ping()
    except docker.errors.DockerException as exc:
        raise SandboxStartError(
            f"no Docker engine answers at {host} ({exc}); run `make engine` or start dockerd"
        ) from exc
    except NO_ANSWER as exc:
        raise SandboxStartError(
            f"the Docker engine at {host} gave no answer within {timeout:.0f}s ({exc})"
        ) from exc
    with _lock:
        return _clients.setdefault(key, made)


_cpus: dict[str, int] = {}


def engine_cpus() -> int:
    """CPUs of the engine's machine (its `info`), remembered per engine."""
    host = engine_host()
    if host not in _cpus:
        _cpus[host] = int(engine(60.0).info().get("NCPU") or os.cpu_count() or 1)
    return _cpus[host]


__all__ = ["NO_ANSWER", "engine", "engine_cpus", "engine_host"]
