"""Shared pytest hooks: tests marked `docker` need an engine, tests marked `gpu` a CUDA device;
`models_endpoint`, the test server of OpenAI-compatible endpoint checks (every subproject); and
the R2E-Gym fixtures every subproject reads (`R2E_FIXTURES`, tests/data/r2e-gym).

Without an engine docker tests are skipped with the reason, except under CI (CI=true), where a
missing engine is an error: CI always has Docker, so a skip there would hide untested code.
gpu tests are deselected by `make test`; run directly without a GPU they skip with the reason.

`make test` runs two pytest-xdist workers (`--dist loadfile`, each file on one worker): every file
with a docker test is one unit (`pytest_xdist_make_scheduler`), run one file after another on one
worker as a plain run would, since their fixtures share the engine, the default caches and image
tags; every other file is taken by whichever worker is free. Docker tests wait on containers and
the network about half the time, which the other worker's CPU-bound files (torch, vLLM, Megatron)
fill. (`--dist loadgroup` would say this with marks, but pytest-xdist 3.8 cannot group under
pytest 9, whose node ids it no longer rewrites.)
"""

from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path

import pytest

# Real R2E-Gym rows and trajectories (tests/data/r2e-gym/README.md), for every subproject's tests:
# their modules read $DEEPSWE_R2E_FIXTURES at import, set here unless the caller points elsewhere.
R2E_FIXTURES = Path(__file__).resolve().parent / "tests" / "data" / "r2e-gym"
os.environ.setdefault("DEEPSWE_R2E_FIXTURES", str(R2E_FIXTURES))


@pytest.fixture(scope="session")
def r2e_fixtures() -> Path:
    """The folder of R2E-Gym trajectory files the tests read."""
    return Path(os.environ["DEEPSWE_R2E_FIXTURES"])


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


@pytest.hookimpl(optionalhook=True)  # a plain pytest without pytest-xdist has no such hook
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """`--dist loadfile` (`make test`), with every file that has a docker test in one unit."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class DockerFilesInTurn(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return "docker" if _has_docker_tests(config.rootpath / path) else path

    return DockerFilesInTurn(config, log)


@functools.cache
def _has_docker_tests(path: Path) -> bool:
    """The controller sees node ids, not marks: a file that marks a test `docker` says so in its
    text (`pytest.mark.docker`, on a test or in `pytestmark`)."""
    return (
        path.suffix == ".py"
        and path.is_file()
        and "mark.docker" in path.read_text(errors="replace")
    )


class ModelsEndpoints:
    """Starts FakeEndpoint servers listing models for one test; `key` is the key they take."""

    key = "sk-test-key"

    def __init__(self) -> None:
        self.servers: list = []

    def serve(self, models: dict[str, str | None]) -> str:
        """A server listing `models` (id -> root); its base URL, http://127.0.0.1:PORT/v1."""
        from deepswe.env.policies.fake_endpoint import FakeEndpoint

        self.servers.append(FakeEndpoint(models=models, key=self.key))
        return self.servers[-1].base_url


@pytest.fixture
def models_endpoint():
    """`models_endpoint.serve({"tiny-qwen3": "/models/tiny-qwen3"})`: the base URL of a real
    HTTP server answering GET /v1/models with those models (deepswe.env.policies.fake_endpoint:
    401 for another key, 403 for the key `forbidden`, 404 off /v1/models; no chat);
    `models_endpoint.key` its key."""
    endpoints = ModelsEndpoints()
    yield endpoints
    for server in endpoints.servers:
        server.close()
