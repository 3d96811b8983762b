"""Fixtures for deepswe.env tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def base_image() -> str:
    """The bookworm base image (built from Debian packages on first use; a no-op after)."""
    from deepswe.env.images import ensure_base_image

    return ensure_base_image("bookworm")
