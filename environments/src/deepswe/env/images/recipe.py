"""The base-image recipe: suites, packages, the recipe hash and the tags derived from it.

Pure data and hashing, no Docker and no subprocess, so it is cheap to import and to test.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

# Bump when the build steps in base.py change in a way that changes the image's content.
RECIPE_VERSION = 1

DEFAULT_REPOSITORY = "deepswe/base"
DEFAULT_MIRROR = "http://deb.debian.org/debian"

# What a Python project needs to be installed and tested offline:
# - python3 + python3-venv: the interpreter and ensurepip, so /opt/venv gets pip and setuptools
#   from Debian's bundled wheels (no PyPI inside the build or the sandbox);
# - git and patch: graders apply and diff patches; ca-certificates for git over https when a
#   sandbox is given a network; procps for `ps`/`pkill -g` in process-group clean-up.
# Left out on purpose (infra/images/README.md): python3-pip (the venv has its own pip),
# python3-dev and build-essential (+280 MB measured; compiled dependencies arrive as wheels).
PACKAGES: tuple[str, ...] = (
    "ca-certificates",
    "git",
    "patch",
    "procps",
    "python3",
    "python3-venv",
)

SETUP_SCRIPT = "rootfs_setup.sh"


@dataclass(frozen=True)
class Suite:
    """A Debian release we build a base image from."""

    name: str
    python: str  # major.minor of the suite's python3, e.g. "3.11"
    glibc: tuple[int, int]  # the suite's glibc, bounds which manylinux wheels run there


SUITES: dict[str, Suite] = {
    "bookworm": Suite("bookworm", "3.11", (2, 36)),
    "bullseye": Suite("bullseye", "3.9", (2, 31)),
}


def get_suite(name: str) -> Suite:
    """Look up a suite by name; unknown names fail with the list of known ones."""
    try:
        return SUITES[name]
    except KeyError:
        raise ValueError(f"unknown suite {name!r}; known: {', '.join(SUITES)}") from None


def python_version(suite: str) -> str:
    """The major.minor Python version the suite's base image runs, e.g. "3.11"."""
    return get_suite(suite).python


def debian_arch() -> str:
    """The Debian architecture of this host (the images are built natively)."""
    machine = platform.machine().lower()
    return {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(
        machine, machine
    )


def setup_script() -> str:
    """The shell script run inside the fresh rootfs (venv, git config, clean-up)."""
    return resources.files(__package__).joinpath(SETUP_SCRIPT).read_text()


def packages(extra: Iterable[str] = ()) -> list[str]:
    """The Debian packages of an image: PACKAGES plus `extra` (a variant's, e.g. a compiler)."""
    return sorted(set(PACKAGES) | set(extra))


def recipe(suite: str, extra: Iterable[str] = ()) -> dict[str, object]:
    """Everything that decides an image's content. The mirror is left out on purpose:
    every Debian mirror serves the same packages, so the tag must not depend on it. `extra`
    packages make a variant (its own tag); with none the recipe is the suite's base image."""
    return {
        "suite": get_suite(suite).name,
        "arch": debian_arch(),
        "packages": packages(extra),
        "recipe_version": RECIPE_VERSION,
        "setup_script": setup_script(),
    }


def recipe_hash(suite: str, extra: Iterable[str] = ()) -> str:
    """sha256 over the canonical JSON of recipe(suite, extra), hex."""
    blob = json.dumps(recipe(suite, extra), sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()


def repository() -> str:
    """$DEEPSWE_BASE_REPOSITORY, else deepswe/base (tests and registries use their own)."""
    return os.environ.get("DEEPSWE_BASE_REPOSITORY", DEFAULT_REPOSITORY)


def base_image_tag(suite: str, extra: Iterable[str] = ()) -> str:
    """The tag of the current recipe's image, e.g. deepswe/base:bookworm-0123456789ab (a
    variant with extra packages gets its own hash). Builds nothing."""
    return f"{repository()}:{suite}-{recipe_hash(suite, extra)[:12]}"


def latest_tag(suite: str) -> str:
    """The moving tag, deepswe/base:<suite>, that points at the last image built."""
    return f"{repository()}:{get_suite(suite).name}"


def cache_root() -> Path:
    """$DEEPSWE_CACHE, else ~/.cache/deepswe. Rootfs trees and wheels live under it."""
    env = os.environ.get("DEEPSWE_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "deepswe"


def mirror() -> str:
    """The Debian mirror: $DEEPSWE_DEBIAN_MIRROR, else deb.debian.org."""
    return os.environ.get("DEEPSWE_DEBIAN_MIRROR", DEFAULT_MIRROR)
