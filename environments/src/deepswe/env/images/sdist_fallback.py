"""The fallback for a requirement with no wheel for the target: its sdist, built into a wheel on
the host (`build_pure_wheel`). Only a pure-Python wheel is right for another interpreter, so
anything else is refused naming the package, unless the image has a compiler: then the sdist
itself goes in (pip builds it inside the image) and a stub wheel carrying its metadata stands in
for it while the host resolves the closure (`STUB_MARK`). With a compiler the sdist also goes in
when it does not build on the host at all (a C library the image's apt list has and the host
lacks, pymssql's FreeTDS): its stub is then made from the sdist's own PKG-INFO. Also the primitives wheels.py shares
with it: the error pip's failures become, the Requires-Python version of a target, the timeout.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

PIP_TIMEOUT_S = 900
PURE_TAG = re.compile(r"-py[23][0-9]*(\.py[23][0-9]*)?-none-any\.whl$")

# pip reads `--python-version 3.6` as 3.6.0 when it checks Requires-Python: pandas 1.1.5
# (Requires-Python >=3.6.1) was refused for Python 3.6, which then got pandas 0.25.3. The images
# run late patch releases (3.6.15, 3.9.2, 3.11.2, ...), so the check is made for "X.Y.LATE".
LATE_PATCH = 99


def requires_python_version(python_version: str) -> str:
    """The version pip checks Requires-Python against for a target "X.Y" (wheel tags read X.Y
    only): a late patch release of it; a full "X.Y.Z" is kept."""
    return python_version if python_version.count(".") >= 2 else f"{python_version}.{LATE_PATCH}"


class WheelDownloadError(RuntimeError):
    """pip could not provide wheels for the target; the message carries pip's own output."""


def build_pure_wheel(
    name: str,
    requirements: list[str],
    dest: Path,
    sources: bool,
    wanted: str | None = None,
    env: dict[str, str] | None = None,
    python_version: str | None = None,
) -> None:
    """Build the sdist of `name` (pinned as in requirements) into a wheel on the host and put it
    in dest; with `sources`, a package that is not pure Python goes in as its sdist instead.

    The sdist is chosen for the *target* Python (its Requires-Python), not the host's: the
    newest release of a package often dropped the target, and a stub carrying its metadata
    would make the resolver backtrack through everything else."""
    wanted = matching_requirement(name, requirements) or wanted or name
    with TempDir(dest / f".build-{name}") as tmp:
        src = tmp / "sdist"
        download_sdist(wanted, src, env, python_version)
        sdist = next(p for p in src.iterdir() if p.is_file())
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--wheel-dir",
            str(tmp),
            str(sdist),
        ]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=PIP_TIMEOUT_S, env=env)
        if res.returncode != 0:
            metadata = sdist_file(sdist, "PKG-INFO") if sources else None
            if metadata is not None:  # the image builds it: its compiler, its apt libraries
                shutil.move(str(sdist), dest / sdist.name)
                write_stub(metadata, dest)
                return
            raise WheelDownloadError(
                f"no wheel for {name}, and its sdist {sdist.name} did not build:\n{tail(res)}"
            )
        for wheel in tmp.glob("*.whl"):
            if not PURE_TAG.search(wheel.name) and sources:
                shutil.move(str(sdist), dest / sdist.name)
                pure_stub(wheel, dest)
                continue
            if not PURE_TAG.search(wheel.name):
                raise WheelDownloadError(
                    f"{name} has no wheel for the target and is not pure Python ({wheel.name}); "
                    "it would need a compiler for the target interpreter"
                )
            shutil.move(str(wheel), dest / wheel.name)


# A stub wheel stands in for a source-only package while the closure is resolved on the host
# (pip download accepts only wheels): it carries the package's metadata, so its dependencies
# are fetched too, and is deleted once the closure settles, leaving the sdist.
STUB_MARK = "0deepswestub"


def download_sdist(
    wanted: str, dest: Path, env: dict[str, str] | None = None, python_version: str | None = None
) -> None:
    from packaging.requirements import InvalidRequirement, Requirement

    try:  # only this package as an sdist: its build dependencies may come as wheels (a
        # source-only numpy under --no-binary :all: is what failed cf-units' metadata step)
        only = Requirement(wanted).name
    except InvalidRequirement:
        only = ":all:"
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", only]
    if python_version:  # pip allows a target Python with --no-deps: Requires-Python is honoured
        cmd += [
            "--implementation",
            "cp",
            "--python-version",
            requires_python_version(python_version),
        ]
    cmd += ["--dest", str(dest), wanted]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=PIP_TIMEOUT_S, env=env)
    if res.returncode != 0:
        said = res.stdout + res.stderr
        if re.search(
            r"(Downloading|File was already downloaded|Saved) \S*\.(tar\.gz|zip)", said
        ) and (
            "metadata" in said or "subprocess-exited-with-error" in said
        ):  # pip found the sdist; preparing it (setup.py egg_info) is what failed
            raise WheelDownloadError(
                f"the sdist of {wanted} was found, but preparing it failed (an old sdist may "
                f"need the build tools of its own time):\n{tail(res)}"
            )
        raise WheelDownloadError(f"no sdist for {wanted}:\n{tail(res)}")


def pure_stub(host_wheel: Path, dest: Path) -> None:
    """A py3-none-any wheel of the same name and version holding only host_wheel's metadata."""
    with zipfile.ZipFile(host_wheel) as src:
        meta = next(n for n in src.namelist() if n.endswith(".dist-info/METADATA"))
        write_stub(src.read(meta), dest)


def sdist_file(sdist: Path, name: str) -> bytes | None:
    """The file `name` at the top of an sdist (.tar.gz or .zip: `<project>-<version>/<name>`),
    or None when it has none or the archive cannot be read."""
    try:
        if sdist.name.endswith(".zip"):
            with zipfile.ZipFile(sdist) as zf:
                found = [n for n in zf.namelist() if n.count("/") == 1 and n.endswith(f"/{name}")]
                return zf.read(found[0]) if found else None
        with tarfile.open(sdist) as tf:
            members = [
                m for m in tf.getmembers() if m.name.count("/") == 1 and m.name.endswith(f"/{name}")
            ]
            handle = tf.extractfile(members[0]) if members else None
            return handle.read() if handle is not None else None
    except (OSError, tarfile.TarError, zipfile.BadZipFile):
        return None


def write_stub(metadata: bytes, dest: Path) -> None:
    """The stub wheel of the distribution `metadata` (core metadata: Name, Version) describes."""
    from email.parser import BytesParser

    from packaging.utils import canonicalize_name

    head = BytesParser().parsebytes(metadata, headersonly=True)
    name = canonicalize_name(str(head["Name"])).replace("-", "_")
    version = str(head["Version"])
    info = f"{name}-{version}.dist-info"
    wheel_meta = (
        b"Wheel-Version: 1.0\nGenerator: deepswe\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    stub = dest / f"{name}-{version}-{STUB_MARK}-py3-none-any.whl"
    with zipfile.ZipFile(stub, "w") as out:
        out.writestr(f"{info}/METADATA", metadata)
        out.writestr(f"{info}/WHEEL", wheel_meta)
        out.writestr(f"{info}/RECORD", "")


def matching_requirement(name: str, requirements: list[str]) -> str | None:
    norm = re.sub(r"[-_.]+", "-", name).lower()
    for req in requirements:
        head = re.split(r"[\s<>=!~;\[@]", req, maxsplit=1)[0]
        if re.sub(r"[-_.]+", "-", head).lower() == norm:
            return req
    return None


class TempDir:
    def __init__(self, path: Path):
        self.path = path

    def __enter__(self) -> Path:
        shutil.rmtree(self.path, ignore_errors=True)
        self.path.mkdir(parents=True)
        return self.path

    def __exit__(self, *exc) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def tail(res: subprocess.CompletedProcess, lines: int = 25) -> str:
    return "\n".join((res.stdout + res.stderr).splitlines()[-lines:])


__all__ = [
    "LATE_PATCH",
    "PIP_TIMEOUT_S",
    "PURE_TAG",
    "STUB_MARK",
    "WheelDownloadError",
    "build_pure_wheel",
    "download_sdist",
    "matching_requirement",
    "pure_stub",
    "requires_python_version",
    "tail",
]
