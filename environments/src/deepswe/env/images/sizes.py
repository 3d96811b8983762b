"""How big a task image's layers are: the environment, the shared history and working tree, the
task's own.

A task image built from source (images/task.py) stacks deepswe/task on deepswe/tree (when base
commit has a reference before its quarter, images/worktree.py) on deepswe/history (when the
repository has a history cut) on deepswe/env on deepswe/base (a Debian rootfs, one layer, shared
by every environment built on it); the engine reports each image's whole size, so a layer's
share is the difference from the image below it. Benchmarks report these per task.
"""

from __future__ import annotations

from dataclasses import dataclass

from deepswe.env.sandbox.docker import client

MAX_PARENTS = 64  # Dockerfile steps between a task image and its env image


@dataclass(frozen=True)
class LayerSizes:
    """MB (10^6 bytes) of the environment image, whole (its base included), and of what history,
    tree and task add on it (tree_mb 0: no tree image, as every task image had before
    images/worktree.py); base_mb: the Debian base image below the environment (0: none found),
    so that the environment's own share is env_mb - base_mb; base: that image's tag."""

    env_mb: int
    history_mb: int
    task_mb: int
    tree_mb: int = 0
    base_mb: int = 0
    base: str = ""


def layer_sizes(task_image: str) -> LayerSizes:
    """The sizes of `task_image`'s layers, found by walking its parents up to the images tagged
    deepswe/tree:*, deepswe/history:*, deepswe/env:* and deepswe/base:*. An image with no env
    parent counts whole as task."""
    task = client().images.get(task_image)
    found: dict[str, int] = {}
    base = ""
    layer = task
    for _ in range(MAX_PARENTS):
        for kind in ("tree", "history", "env", "base"):
            tags = [t for t in layer.tags if t.startswith(f"deepswe/{kind}:")]
            if kind not in found and tags:
                found[kind] = layer.attrs["Size"]
                if kind == "base":  # the hashed tag (the moving deepswe/base:<suite> too)
                    base = max(tags, key=len)
        parent = layer.attrs.get("Parent")
        if "base" in found or not parent:
            break
        layer = client().images.get(parent)
    env = found.get("env", 0)
    history = found.get("history", env)
    tree = found.get("tree", history)
    return LayerSizes(
        round(env / 1e6),
        round((history - env) / 1e6),
        round((task.attrs["Size"] - tree) / 1e6),
        round((tree - history) / 1e6),
        round(found["base"] / 1e6) if "env" in found and "base" in found else 0,
        base if "env" in found else "",
    )


__all__ = ["LayerSizes", "layer_sizes"]
