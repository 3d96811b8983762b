"""Build the base images for real (debootstrap + docker import) and run them offline.

bookworm, the suite almost every task uses, is built afresh in every run, into a private
repository (deepswe-test/base) and cache folder, so that it neither reuses nor replaces the image
`make base-images` built (about 40-90 s on two cores). bullseye's checks run on the engine's own
image, which `make test` builds through `make setup` when it is missing (on a fresh CI machine,
from scratch): building it a second time here measured nothing new and cost CI 90 s.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

import docker
import pytest

from deepswe.env.images import base, base_image_tag, ensure_base_image, python_version
from deepswe.env.images.recipe import cache_root, latest_tag

pytestmark = [pytest.mark.docker, pytest.mark.slow]
REPO = "deepswe-test/base"


@pytest.fixture(scope="module", params=["bookworm", "bullseye"])
def built(request, tmp_path_factory):
    """(suite, tag, cache, latest tag): bookworm built afresh in a private repository, bullseye
    the engine's own image (built if missing)."""
    suite = request.param
    fresh = suite == "bookworm"
    client = docker.from_env()
    with pytest.MonkeyPatch.context() as mp:
        if fresh:
            cache = tmp_path_factory.mktemp(f"cache-{suite}")
            mp.setenv("DEEPSWE_BASE_REPOSITORY", REPO)
            mp.setenv("DEEPSWE_CACHE", str(cache))
        tag, latest = base_image_tag(suite), latest_tag(suite)
        if fresh:
            for old in (tag, latest):
                with contextlib.suppress(docker.errors.ImageNotFound):
                    client.images.remove(old, force=True)
        started = time.monotonic()
        assert ensure_base_image(suite) == tag
        print(
            f"\n[measure] {suite} base {'build' if fresh else 'ensure'}: "
            f"{time.monotonic() - started:.1f}s"
        )
        yield suite, tag, cache_root(), latest
        if fresh:
            for old in (tag, latest):
                client.images.remove(old, force=True)


def _run(tag: str, cmd: str) -> str:
    out = docker.from_env().containers.run(tag, ["sh", "-c", cmd], network_mode="none", remove=True)
    return out.decode()


def test_image_carries_labels_and_latest_tag(built):
    suite, tag, _, latest = built
    client = docker.from_env()
    attrs = client.api.inspect_image(tag)
    labels = attrs["Config"]["Labels"]
    assert labels["deepswe.suite"] == suite
    assert labels["deepswe.python"] == python_version(suite)
    assert tag.endswith("-" + labels["deepswe.recipe-hash"][:12])
    assert client.api.inspect_image(latest)["Id"] == attrs["Id"]
    assert attrs["Config"]["WorkingDir"] == "/testbed"
    assert "LANG=C.UTF-8" in attrs["Config"]["Env"]
    print(f"\n[measure] {suite} image size: {attrs['Size'] / 1e6:.0f} MB")


def test_tools_run_offline_and_python_is_the_venv(built):
    suite, tag, _, _ = built
    out = _run(
        tag,
        "python --version; command -v python; command -v pip; git --version; patch --version | head -1;"
        " ps -o pgid= -p $$ >/dev/null && echo procps-ok; pwd;"
        " python -c 'import ssl, sqlite3, ctypes, venv; print(\"stdlib-ok\")';"
        " grep -c '^python3 ' /etc/deepswe-base-packages.txt",
    )
    assert f"Python {python_version(suite)}." in out
    assert "/opt/venv/bin/python\n/opt/venv/bin/pip\n" in out
    assert "git version " in out and "GNU patch " in out
    assert "procps-ok" in out and "stdlib-ok" in out
    assert "/testbed\n" in out
    assert out.endswith("stdlib-ok\n1\n")  # the installed-package manifest names python3


def test_git_accepts_a_repo_owned_by_another_user(built):
    """Repositories copied into a sandbox belong to another uid; git must not refuse them
    with "dubious ownership", and commits need no prompt for an identity."""
    _, tag, _, _ = built
    out = _run(
        tag,
        "git init -q /testbed && chown -R 1234:1234 /testbed && cd /testbed && echo x > f"
        " && git add f && git commit -qm x && git rev-parse --abbrev-ref HEAD",
    )
    assert out.strip() == "main"


def test_second_ensure_is_a_noop(built, monkeypatch):
    suite, tag, cache, _ = built
    client = docker.from_env()
    before = client.api.inspect_image(tag)["Id"]
    calls = []
    real_build = base.build_base_image
    monkeypatch.setattr(
        base, "build_base_image", lambda *a, **k: calls.append(a) or real_build(*a, **k)
    )
    started = time.monotonic()
    assert ensure_base_image(suite) == tag
    print(f"\n[measure] {suite} no-op ensure: {time.monotonic() - started:.3f}s")
    assert calls == []
    assert client.api.inspect_image(tag)["Id"] == before
    rootfs = cache / "rootfs"
    assert not rootfs.exists() or not any(rootfs.iterdir()), "the rootfs folder was not cleaned up"


def test_ensure_restores_a_missing_latest_tag(built):
    suite, tag, _, latest = built
    client = docker.from_env()
    client.images.remove(latest)
    ensure_base_image(suite)
    assert client.api.inspect_image(latest)["Id"] == client.api.inspect_image(tag)["Id"]


def test_cli_in_a_fresh_process_is_a_noop(built):
    """What `make base-images` runs: a new process finds the image and builds nothing."""
    suite, tag, _, _ = built
    cli = Path(sys.executable).with_name("deepswe-env")
    env = {**os.environ, "PATH": "/usr/bin:/bin"}  # make's PATH may lack the venv and sbin
    res = subprocess.run(
        [str(cli), "images", "base", "--suite", suite], capture_output=True, text=True, env=env
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith(tag + "  (")
    assert "building" not in res.stderr
