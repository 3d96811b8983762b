"""Shared pytest hooks: tests marked `docker` need an engine, tests marked `gpu` a CUDA device;
`models_endpoint`, the test server of OpenAI-compatible endpoint checks (every subproject); and
the R2E-Gym fixtures every subproject reads (`R2E_FIXTURES`, tests/data/r2e-gym).

Without an engine docker tests are skipped with the reason, except under CI (CI=true), where a
missing engine is an error: CI always has Docker, so a skip there would hide untested code.
gpu tests are deselected by `make test`; run directly without a GPU they skip with the reason.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
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


class ModelsEndpoint(BaseHTTPRequestHandler):
    """GET /v1/models as vLLM answers it (each model with its `root`), behind a bearer key:
    401 for another key, 403 for the key `forbidden`, 404 off /v1/models. No chat: the tests
    that use it check endpoints before the first request. It does not prove that vLLM answers
    so; training/tests/test_train_vllm.py asks a real vLLM server."""

    key = "sk-test-key"
    models: list[dict] = []  # set per server by the `models_endpoint` fixture

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        auth = self.headers.get("Authorization", "")
        if self.path != "/v1/models":
            code, doc = 404, {"detail": "Not Found"}
        elif auth == "Bearer forbidden":
            code, doc = 403, {"error": {"message": "not for this key", "type": "forbidden"}}
        elif auth != f"Bearer {self.key}":
            code, doc = 401, {"error": {"message": "Unauthorized", "type": "auth"}}
        else:
            code, doc = 200, {"object": "list", "data": self.models}
        data = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


class ModelsEndpoints:
    """Starts ModelsEndpoint servers for one test; `key` is the key they take."""

    key = ModelsEndpoint.key

    def __init__(self) -> None:
        self.servers: list[ThreadingHTTPServer] = []

    def serve(self, models: dict[str, str | None]) -> str:
        """A server listing `models` (id -> root); its base URL, http://127.0.0.1:PORT/v1."""
        listed = [
            {
                "id": m,
                "object": "model",
                "created": 0,
                "owned_by": "vllm",
                "root": r,
                "parent": None,
            }
            for m, r in models.items()
        ]
        handler = type("Handler", (ModelsEndpoint,), {"models": listed})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}/v1"


@pytest.fixture
def models_endpoint():
    """`models_endpoint.serve({"tiny-qwen3": "/models/tiny-qwen3"})`: the base URL of a real
    HTTP server answering GET /v1/models with those models; `models_endpoint.key` its key."""
    endpoints = ModelsEndpoints()
    yield endpoints
    for server in endpoints.servers:
        server.shutdown()
        server.server_close()
