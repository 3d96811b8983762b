"""Fixtures for deepswe.train tests. The publish tests' Hub-compatible server (hub_server.py)
and run-folder builders (publish_runs.py) are plain modules beside the tests, importable by name
from here on."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)


@pytest.fixture
def hub_server():
    """(the test Hub's state, its endpoint URL), answering publish_runs.TOKEN; shut down after."""
    from hub_server import serve
    from publish_runs import TOKEN

    server, state, endpoint = serve(TOKEN)
    yield state, endpoint
    server.shutdown()
