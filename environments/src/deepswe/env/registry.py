"""The one lookup behind every plug point of the project.

A registry is a plain dict `name -> "module:attr"`, imported only when a name is looked up. A
full `module:attr` path is accepted in place of a name, so a user plugs in their own
implementation without editing a registry. The plug points (and their registries): sandbox
backends (`deepswe.env.sandbox.BACKENDS`), policies (`deepswe.env.policies.POLICIES`), test-log
parsers (`deepswe.env.grading.parsers.PARSERS`), and in deepswe.train inference engines,
training backends, rollout sources and advantage estimators.
"""

from __future__ import annotations

import importlib
from typing import Any


def resolve(registry: dict[str, str], name: str, what: str, *, callable_: bool = True) -> Any:
    """The object registered as `name`, or named by the `module:attr` path `name` itself.

    Raises ValueError, naming the known choices, when `name` is neither or cannot be imported
    (or, with `callable_`, is not callable). `what` names the plug point in messages.
    """
    target = registry.get(name, name)
    if ":" not in target:
        raise ValueError(f"unknown {what} {name!r}; known: {sorted(registry)} or 'module:attr'")
    module, _, attr = target.partition(":")
    try:
        obj = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"{what} {name!r}: cannot import {target!r}: {exc}") from exc
    if callable_ and not callable(obj):
        raise ValueError(f"{what} {name!r}: {target!r} is not callable")
    return obj


__all__ = ["resolve"]
