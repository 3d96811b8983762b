"""Shared pytest hooks: tests marked `docker` need an engine, tests marked `gpu` a CUDA device.

Without an engine docker tests are skipped with the reason, except under CI (CI=true), where a
missing engine is an error: CI always has Docker, so a skip there would hide untested code.
gpu tests are deselected by `make test`; run directly without a GPU they skip with the reason.
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


@functools.cache
def cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("gpu") is not None and not cuda_available():
        pytest.skip("no CUDA device: gpu tests run only on a GPU machine")
    if item.get_closest_marker("docker") is None or docker_answers():
        return
    reason = "no Docker engine answers `docker info` (run `make engine`)"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must run docker tests, but {reason}", pytrace=False)
    pytest.skip(reason)
