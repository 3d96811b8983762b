"""Which interpreter runs pip for a target Python.

pip evaluates environment markers with the interpreter it runs under, even with
`--python-version`: run by the host's 3.11 for a 3.10 image, pandas 1.5.3's
`numpy>=1.23.2; python_version >= "3.11"` applies and `numpy==1.23.0` conflicts with it. So
the resolution runs under an interpreter of the target's version when the host has one that runs
this pip (`$DEEPSWE_HOST_PYTHONS`'s, or `python3.X` on PATH; pip 26 needs 3.10+), with this
venv's pip first on its path; otherwise under the host's own, with the markers decided for the
target all the same: a `sitecustomize` first on pip's path makes the environment its vendored
`packaging` evaluates markers in say the target's python_version (pandas 1.3.5's
`numpy>=1.21.0; python_version >= "3.10"` then does not apply to a 3.7 image, whose R2E-Gym
setup log pins numpy 1.17.5).
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

from deepswe.env.images.recipe import cache_root


def resolver_python(python_version: str) -> list[str]:
    """The command that runs pip for a `python_version` target: `python -m pip` of an
    interpreter of that version with this venv's pip first on its path, or of the host's own
    interpreter when none is found or none runs this pip (module doc)."""
    python = _target_interpreter(python_version)
    if python is None:
        here = f"{sys.version_info[0]}.{sys.version_info[1]}"
        if python_version == here or python_version.count(".") != 1:
            return [sys.executable, "-m", "pip"]
        return ["env", f"PYTHONPATH={_marker_shim(python_version)}", sys.executable, "-m", "pip"]
    return ["env", f"PYTHONPATH={_pip_shim()}", python, "-m", "pip"]


_MARKER_SHIM = """\
# Written by deepswe (deepswe.env.images.pip_runner): pip, run by the host's Python for a
# Python {version} target, decides environment markers for the target.
def _target_markers():
    try:
        from pip._vendor.packaging import markers
    except Exception:
        return
    host = markers.default_environment

    def target():
        env = host()
        env.update(python_version="{version}", python_full_version="{version}.{late}")
        return env

    markers.default_environment = target


_target_markers()
"""


def _marker_shim(python_version: str) -> Path:
    """A folder holding only a sitecustomize.py that sets pip's marker environment to the
    target's Python (module doc)."""
    from deepswe.env.images.sdist_fallback import LATE_PATCH

    shim = cache_root() / "marker-shim" / python_version
    shim.mkdir(parents=True, exist_ok=True)
    text = _MARKER_SHIM.format(version=python_version, late=LATE_PATCH)
    path = shim / "sitecustomize.py"
    if not path.is_file() or path.read_text() != text:
        tmp = shim / f".sitecustomize-{os.getpid()}-{threading.get_ident()}"
        tmp.write_text(text)
        os.replace(tmp, path)
    return shim


@functools.cache
def _pip_package() -> Path:
    """This interpreter's pip package folder, asked of a child process: importing pip here would
    switch off setuptools' distutils shim for the rest of the process (its _distutils_hack does
    so on `import pip`), and setuptools imported later fails on the standard library's."""
    res = subprocess.run(
        [sys.executable, "-c", "import os, pip; print(os.path.dirname(pip.__file__))"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return Path(res.stdout.strip())


def _pip_shim() -> Path:
    """A folder holding only this venv's pip (a link), to put first on another Python's path."""
    shim = cache_root() / "pip-path"
    shim.mkdir(parents=True, exist_ok=True)
    link, target = shim / "pip", _pip_package()
    if not link.is_symlink() or link.resolve() != target.resolve():
        tmp = shim / f".pip-{os.getpid()}-{threading.get_ident()}"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(target)
        os.replace(tmp, link)
    return shim


@functools.cache
def _target_interpreter(python_version: str) -> str | None:
    """A host interpreter of `python_version` that runs this pip, or None (the host's own)."""
    if python_version == f"{sys.version_info[0]}.{sys.version_info[1]}":
        return None
    from deepswe.env.images.hostpython import NoHostPython, host_python

    candidates = []
    with contextlib.suppress(NoHostPython, OSError):
        candidates.append(str(host_python(python_version) / "bin" / "python3"))
    if shutil.which(f"python{python_version}"):
        candidates.append(shutil.which(f"python{python_version}"))
    shim = _pip_shim()
    for python in candidates:
        try:  # "pip 26.3 from <shim>/pip (python 3.10)": this pip, running on that Python
            res = subprocess.run(
                [python, "-m", "pip", "--version"],
                capture_output=True,
                text=True,
                timeout=60,
                env={**os.environ, "PYTHONPATH": str(shim)},
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        out = res.stdout.strip()
        if res.returncode == 0 and out.endswith(f"(python {python_version})"):
            return python
    return None


__all__ = ["resolver_python"]
