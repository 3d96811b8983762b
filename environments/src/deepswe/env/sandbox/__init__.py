"""Sandboxes: where a task's repository lives while a policy works on it and while it is graded.

`Sandbox` is the Protocol every backend implements (docker.py, kubernetes.py, local.py beside
this file); one conformance test module runs against all of them. Backends are looked up by name in BACKENDS
(a full dotted path `module:Class` is accepted too) and imported only when chosen.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from deepswe.env.registry import resolve


class SandboxError(Exception):
    """The sandbox itself failed (not the command run in it). Ends an episode as infra_error."""


class SandboxStartError(SandboxError):
    """The sandbox could not be started (image missing, engine down, container exited at once)."""


class SandboxDied(SandboxError):
    """The sandbox went away under us (container killed, exec stream closed)."""


class SandboxLimits(BaseModel):
    """Limits on every sandbox: on by default, each configurable."""

    model_config = ConfigDict(extra="forbid")

    cpus: float | None = Field(
        1.0,
        gt=0,
        description="CPU cores the sandbox may use (a CFS quota); None: no quota, and a CPU "
        "weight of the host's core count, so what tests read of the machine (affinity, cgroup "
        "quota and shares) is the host's, as in swebench's containers. Grading sandboxes always "
        "run so (for_grading)",
    )
    memory: str = Field("4g", description="memory limit, docker syntax (e.g. 512m, 4g)")
    pids: int = Field(1024, gt=16, description="max processes: stops fork bombs")
    network: bool = Field(False, description="network access; off unless a task asks for it")
    offline: Literal["auto", "drop", "unreachable"] = Field(
        "auto",
        description="without network: drop (a network whose packets the host drops: a connect "
        "hangs until its timeout, as on a machine with no route out; sandbox/offline.py; needs "
        "root on the engine's machine), unreachable (no interface at all: a connect fails at "
        "once), or auto (drop where this host allows it, else unreachable, said once on stderr)",
    )
    command_timeout_s: float = Field(
        90.0, gt=0, description="default wall-clock limit per command (DeepSWE: 90 s per action)"
    )
    max_output_bytes: int = Field(
        1 << 20, gt=0, description="per stream; the rest is dropped with a marker"
    )
    start_timeout_s: float = Field(120.0, gt=0, description="how long starting may take")
    user_namespaces: bool = Field(
        False,
        description="let processes make a user namespace and nothing else a namespace gives "
        "(Docker: the grader's seccomp profile, sandbox/seccomp.py, instead of the engine's "
        "default, which refuses it). Grading sandboxes do (for_grading): the tests run as root "
        "of one, over their own files only, as the reference harnesses ran them as root",
    )

    def for_grading(self) -> SandboxLimits:
        """These limits with no CPU quota: the hidden tests see the machine's CPUs, as in the
        reference harness (pylint's parallel tests skip on "one" CPU read from a quota). Memory
        and process limits stay: tests do not read them as the machine's size. User
        namespaces on: the tests get root's reach over their own files (grading/tester.py)."""
        return self.model_copy(update={"cpus": None, "user_namespaces": True})


@dataclass(frozen=True)
class ExecResult:
    """What a command did. `exit_code` is -9 when the sandbox killed it for its timeout."""

    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool = False
    truncated: bool = False
    seconds: float = 0.0

    @property
    def output(self) -> str:
        """stdout then stderr, as one text (what a log wants)."""
        return self.stdout + self.stderr


@runtime_checkable
class Sandbox(Protocol):
    """A running, isolated place with a file system and a shell."""

    id: str

    def run(
        self,
        cmd: str,
        *,
        timeout: float | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
    ) -> ExecResult:
        """Run `cmd` with bash; kill its whole process group after `timeout` seconds."""
        ...

    def read_file(self, path: str) -> bytes:
        """Read a file's bytes; FileNotFoundError if it is not there."""
        ...

    def write_file(self, path: str, data: bytes | str, mode: int | None = None) -> None:
        """Write a file (parents created)."""
        ...

    def copy_in(self, src: Path, dest: str) -> None:
        """Copy a host file or folder to `dest` inside the sandbox."""
        ...

    def close(self) -> None:
        """Release everything the sandbox holds. Safe to call twice."""
        ...


BACKENDS: dict[str, str] = {
    "docker": "deepswe.env.sandbox.docker:DockerSandbox",
    "local": "deepswe.env.sandbox.local:LocalSandbox",
    "kubernetes": "deepswe.env.sandbox.kubernetes:KubernetesSandbox",
}


def backend_class(name: str) -> type:
    """The sandbox class for a registered name or a `module:Class` dotted path."""
    return resolve(BACKENDS, name, "sandbox backend")


def preflight(name: str) -> None:
    """Check, before any episode, that backend `name` can start sandboxes at all; a one-line
    SandboxStartError says why not (no cluster configured). A backend opts in with a static
    `preflight()`; ValueError for an unknown backend."""
    check = getattr(backend_class(name), "preflight", None)
    if check is not None:
        check()


def clean_leftovers(name: str) -> list[str]:
    """Remove the sandboxes of backend `name` whose creating process is gone (a killed run);
    their names. A backend opts in with a static `clean_leftovers()`."""
    clean = getattr(backend_class(name), "clean_leftovers", None)
    return clean() if clean is not None else []


__all__ = [
    "BACKENDS",
    "ExecResult",
    "Sandbox",
    "SandboxDied",
    "SandboxError",
    "SandboxLimits",
    "SandboxStartError",
    "backend_class",
    "clean_leftovers",
    "preflight",
]
