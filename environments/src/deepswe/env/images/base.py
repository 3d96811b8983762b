"""Registry-free base images: debootstrap a Debian rootfs, set it up, `docker import` it.

Nothing is pulled from a registry: packages come from a Debian mirror, the image from a tar
of the rootfs streamed into the engine. The image's tag carries the recipe hash, so an
unchanged recipe is found with one `docker image inspect` and never rebuilt.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TextIO

from deepswe.env.images.recipe import (
    base_image_tag,
    cache_root,
    debian_arch,
    get_suite,
    latest_tag,
    mirror,
    packages,
    recipe_hash,
    setup_script,
)

Log = Callable[[str], None]

DEBOOTSTRAP_TIMEOUT_S = 1800  # two cores and a slow mirror take ~3-5 min; 30 min means stuck
SETUP_TIMEOUT_S = 300
IMPORT_TIMEOUT_S = 900
SBIN_PATH = "/usr/sbin:/sbin"  # where Debian puts debootstrap; root's PATH under make may lack it
VENV = "/opt/venv"
IMAGE_ENV = {
    "PATH": f"{VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "VIRTUAL_ENV": VENV,
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "PYTHONUNBUFFERED": "1",
    "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    "PIP_NO_INPUT": "1",
}
LOCALE_GEN = "sed -i 's/^# *en_US.UTF-8 UTF-8/en_US.UTF-8 UTF-8/' /etc/locale.gen && locale-gen"
# debootstrap and the chroot run with a clean environment: the host's PIP_*, PYTHON* and
# locale must not leak into the image.
CHROOT_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8", "HOME": "/root"}


class ImageBuildError(RuntimeError):
    """A base image could not be built; the message says which step and where its log is."""


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _client(timeout: int = 60):
    import docker  # the only module here that needs the engine

    return docker.from_env(timeout=timeout)


def _image_id(client, tag: str) -> str | None:
    import docker

    try:
        return client.api.inspect_image(tag)["Id"]
    except docker.errors.ImageNotFound:
        return None


def ensure_base_image(
    suite: str, force: bool = False, log: Log = _stderr, extra: Iterable[str] = ()
) -> str:
    """Build the suite's base image (with `extra` Debian packages: a variant) unless the
    current recipe's tag exists; return that tag.

    The plain image is also tagged deepswe/base:<suite>. Safe to call from many processes:
    builds of one suite are serialised by a file lock, and a waiter finds the image its peer
    built.
    """
    extra = tuple(sorted(set(extra)))
    tag = base_image_tag(suite, extra)
    client = _client()
    if not force and _image_id(client, tag) is not None:
        if not extra:
            _tag_latest(client, tag, suite)
        return tag
    with _build_lock(suite):
        if force or _image_id(client, tag) is None:
            build_base_image(suite, log=log, extra=extra)
        else:
            log(f"[base {suite}] built by another process meanwhile: {tag}")
    return tag


def build_base_image(suite: str, log: Log = _stderr, extra: Iterable[str] = ()) -> str:
    """Build and tag the suite's base image (plus `extra` packages) unconditionally; return
    the hashed tag."""
    spec = get_suite(suite)
    extra = tuple(sorted(set(extra)))
    tag = base_image_tag(suite, extra)
    debootstrap = _find_debootstrap()
    workdir = cache_root() / "rootfs" / tag.rsplit(":", 1)[1]
    rootfs = workdir / "rootfs"
    logfile = workdir / "build.log"
    _remove_tree(workdir)
    workdir.mkdir(parents=True)
    started = time.monotonic()
    log(f"[base {suite}] building {tag} from {mirror()} (log: {logfile})")
    try:
        debs = cache_root() / "debs" / f"{suite}-{debian_arch()}"
        debs.mkdir(parents=True, exist_ok=True)
        cmd = [debootstrap, "--variant=minbase", f"--include={','.join(packages(extra))}"]
        cmd += [f"--cache-dir={debs}", suite, str(rootfs), mirror()]
        _run_logged(cmd, logfile, DEBOOTSTRAP_TIMEOUT_S, log, f"[base {suite}] debootstrap")
        _run_logged(
            ["chroot", str(rootfs), "/bin/sh", "-s"],
            logfile,
            SETUP_TIMEOUT_S,
            log,
            f"[base {suite}] setup",
            stdin=setup_script(),
        )
        if "locales" in extra:  # tests that set LANG=en_US.UTF-8 (swebench's django) need it
            _run_logged(
                ["chroot", str(rootfs), "/bin/sh", "-c", LOCALE_GEN],
                logfile,
                SETUP_TIMEOUT_S,
                log,
                f"[base {suite}] locales",
            )
        found = _chroot_python(rootfs)
        if found != spec.python:
            raise ImageBuildError(f"{suite} rootfs has python {found}, expected {spec.python}")
        log(f"[base {suite}] importing into Docker as {tag}")
        labels = {
            "deepswe.recipe-hash": recipe_hash(suite, extra),
            "deepswe.suite": suite,
            "deepswe.python": spec.python,
            "deepswe.extra-packages": " ".join(extra),
        }
        client = _client()
        previous = _image_id(client, tag)
        _import_rootfs(rootfs, tag, labels)
        if not extra:
            _tag_latest(client, tag, suite)
        _remove_if_dangling(client, previous)
        size = client.api.inspect_image(tag)["Size"]
    except BaseException:
        log(f"[base {suite}] FAILED after {time.monotonic() - started:.0f}s; log: {logfile}")
        raise
    _remove_tree(workdir)
    log(f"[base {suite}] built {tag}: {size / 1e6:.0f} MB in {time.monotonic() - started:.0f}s")
    return tag


def _find_debootstrap() -> str:
    # `make` may run with a PATH lacking /usr/sbin, where Debian installs debootstrap.
    found = shutil.which("debootstrap") or shutil.which("debootstrap", path=SBIN_PATH)
    if found is None:
        raise ImageBuildError(
            "debootstrap not found; install it with `apt-get install debootstrap` (Debian/Ubuntu)"
        )
    if os.geteuid() != 0:
        raise ImageBuildError("building a base image needs root (debootstrap and chroot)")
    return found


def _run_logged(
    cmd: list[str], logfile: Path, timeout_s: float, log: Log, label: str, stdin: str | None = None
) -> None:
    """Run cmd, appending its output to logfile and echoing the progress lines worth seeing
    (debootstrap's phases, not its 400 package names). A watchdog kills the whole process
    group at timeout_s, also when the command hangs without printing anything."""
    with logfile.open("a") as out:
        out.write(f"$ {' '.join(cmd)}\n")
        out.flush()
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=CHROOT_ENV,
            text=True,
            start_new_session=True,  # its own group, so the watchdog kills children too
        )
        expired = threading.Event()

        def watchdog() -> None:
            expired.set()
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)

        timer = threading.Timer(timeout_s, watchdog)
        timer.start()
        try:
            if stdin is not None:
                assert proc.stdin is not None
                proc.stdin.write(stdin)
                proc.stdin.close()
            assert proc.stdout is not None
            _echo_progress(proc.stdout, out, log, label)
            rc = proc.wait()
        finally:
            timer.cancel()
    if expired.is_set():
        raise ImageBuildError(f"{label} timed out after {timeout_s}s; log: {logfile}")
    if rc != 0:
        tail = "".join(logfile.read_text().splitlines(keepends=True)[-15:])
        raise ImageBuildError(f"{label} failed (exit {rc}); log: {logfile}\n{tail}")


def _echo_progress(lines: Iterable[str], out: TextIO, log: Log, label: str) -> None:
    """Copy every line to out; log phase lines ("I: Unpacking the base system..."), warnings
    and every 40th per-package line of each verb ("I: Retrieving sed 4.9-1")."""
    verbs: dict[str, int] = {}
    for line in lines:
        out.write(line)
        words = line.split()
        if line.startswith(("W: ", "E: ")):
            log(f"{label}: {line.strip()}")
        elif line.startswith("I: ") and len(words) > 1:
            verbs[words[1]] = verbs.get(words[1], 0) + 1
            phase = len(words) >= 4 and line.rstrip().endswith("...")
            if phase or verbs[words[1]] % 40 == 1:
                log(f"{label}: {line.strip()}")


def _chroot_python(rootfs: Path) -> str:
    code = "import sys; print('%d.%d' % sys.version_info[:2])"
    res = subprocess.run(
        ["chroot", str(rootfs), "/opt/venv/bin/python", "-c", code],
        capture_output=True,
        text=True,
        env=CHROOT_ENV,
        timeout=60,
    )
    if res.returncode != 0:
        raise ImageBuildError(f"the rootfs's /opt/venv/bin/python does not run: {res.stderr}")
    return res.stdout.strip()


def _import_rootfs(rootfs: Path, tag: str, labels: dict[str, str]) -> None:
    """Stream `tar -C rootfs .` into the engine's image import (no temporary tar file)."""
    changes = [f"ENV {k}={v}" for k, v in IMAGE_ENV.items()]
    changes += [f"LABEL {k}={json.dumps(v)}" for k, v in labels.items()]
    changes += ["WORKDIR /testbed", 'CMD ["/bin/bash"]']
    # /proc, /sys and /dev are the engine's to provide; debootstrap may leave entries there.
    tar = subprocess.Popen(
        ["tar", "-C", str(rootfs), "--numeric-owner", "--exclude=./proc/*", "--exclude=./sys/*"]
        + ["--exclude=./dev/*", "-cf", "-", "."],
        stdout=subprocess.PIPE,
    )
    assert tar.stdout is not None
    chunks: Iterator[bytes] = iter(lambda: tar.stdout.read(1 << 20), b"")
    repo, name = tag.rsplit(":", 1)  # rsplit: a registry host may carry a port
    try:
        result = _client(timeout=IMPORT_TIMEOUT_S).api.import_image(
            src=chunks, repository=repo, tag=name, changes=changes, stream_src=True
        )
    finally:
        tar.stdout.close()
        rc = tar.wait(timeout=IMPORT_TIMEOUT_S)
    errors = [ln for ln in str(result).splitlines() if '"error' in ln]
    if rc != 0 or errors:
        raise ImageBuildError(f"docker import of {rootfs} failed (tar exit {rc}): {errors}")


def _tag_latest(client, tag: str, suite: str) -> None:
    latest = latest_tag(suite)
    if _image_id(client, latest) != _image_id(client, tag):
        repo, name = latest.rsplit(":", 1)
        client.api.tag(tag, repo, name)


def _remove_if_dangling(client, image_id: str | None) -> None:
    """A --force rebuild leaves the old image untagged: drop it unless a container uses it."""
    import docker

    if image_id is None:
        return
    try:
        if not client.api.inspect_image(image_id)["RepoTags"]:
            client.api.remove_image(image_id)
    except (docker.errors.ImageNotFound, docker.errors.APIError):
        pass  # in use by a container, or already gone: both fine


@contextmanager
def _build_lock(suite: str) -> Iterator[None]:
    lock = cache_root() / "locks" / f"base-{suite}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _remove_tree(path: Path) -> None:
    """rm -rf that first unmounts what a killed debootstrap left mounted under path
    (its /proc or /sys): deleting through a live /proc mount would be a disaster."""
    if not path.exists():
        return
    prefix = str(path.resolve()) + "/"
    mounts = [ln.split()[1] for ln in Path("/proc/mounts").read_text().splitlines()]
    for point in sorted((m for m in mounts if m.startswith(prefix)), reverse=True):
        subprocess.run(["umount", "-l", point], check=True, timeout=60)
    shutil.rmtree(path)
