"""Shared pytest hooks: tests marked `docker` need an engine.

Without one they are skipped with the reason, except under CI (CI=true), where a missing engine
is an error: CI always has Docker, so a skip there would hide untested code.
"""

from __future__ import annotations

import functools
import os
import subprocess

import pytest


@functools.cache
def docker_answers() -> bool:
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("docker") is None or docker_answers():
        return
    reason = "no Docker engine answers `docker info` (run `make engine`)"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must run docker tests, but {reason}", pytrace=False)
    pytest.skip(reason)
