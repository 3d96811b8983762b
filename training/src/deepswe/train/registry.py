"""Lazy `name -> "module:Class"` lookup for the trainer's plug points (engines, backends,
rollout sources); a full `module:Class` path plugs in a user's own implementation."""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

# Implementations named in the design that may not be written yet: while their module does not
# exist, a clear "not built yet" error instead of an ImportError traceback.
# Modules named in a registry before they exist: choosing one says "not built yet" instead of
# an ImportError traceback. Every shipped engine and backend is built today.
NOT_BUILT: dict[str, str] = {}


class NotBuiltError(RuntimeError):
    """The configuration names an implementation that does not exist yet."""


def load_plugin(registry: dict[str, str], name: str, kind: str) -> Any:
    target = registry.get(name, name)
    if ":" not in target:
        raise ValueError(f"unknown {kind} {name!r}; known: {sorted(registry)} or 'module:Class'")
    module, _, attr = target.partition(":")
    if module in NOT_BUILT and importlib.util.find_spec(module) is None:
        raise NotBuiltError(f"{kind} {name!r} is not built yet: {NOT_BUILT[module]}")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"{kind} {name!r}: cannot import {target!r}: {e}") from e
