"""Plug points (sandbox backends, policies, log parsers): a plain dict name -> "module:attr",
imported lazily; a full `module:attr` path is accepted too, so users can plug in their own."""

from __future__ import annotations

import importlib
from typing import Any


def resolve(registry: dict[str, str], name: str, what: str) -> Any:
    """The object registered as `name`, or named by the dotted path `name` itself."""
    target = registry.get(name, name)
    if ":" not in target:
        raise ValueError(f"unknown {what} {name!r}; known: {sorted(registry)}")
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)
