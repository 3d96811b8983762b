"""How big a task image's layers are: the environment, the shared history and working tree, the
task's own.

A task image built from source (images/task.py) stacks deepswe/task on deepswe/tree (when base
commit has a reference before its quarter, images/worktree.py) on deepswe/history (when the
repository has a history cut) on deepswe/env; the engine reports each image's whole size, so a
layer's share is the difference from the image below it. Benchmarks report these per task.
"""

from __future__ import annotations

from dataclasses import dataclass

from deepswe.env.sandbox.docker import client

MAX_PARENTS = 64  # Dockerfile steps between a task image and its env image


@dataclass(frozen=True)
class LayerSizes:
    """MB (10^6 bytes) of the environment image and of what history, tree and task add on it
    (tree_mb 0: no tree image, as every task image had before images/worktree.py)."""

    env_mb: int
    history_mb: int
    task_mb: int
    tree_mb: int = 0


def layer_sizes(task_image: str) -> LayerSizes:
    """The sizes of `task_image`'s layers, found by walking its parents up to the images tagged
    deepswe/tree:*, deepswe/history:* and deepswe/env:*. An image with no env parent counts
    whole as task."""
    task = client().images.get(task_image)
    found: dict[str, int] = {}
    layer = task
    for _ in range(MAX_PARENTS):
        for kind in ("tree", "history", "env"):
            if kind not in found and any(t.startswith(f"deepswe/{kind}:") for t in layer.tags):
                found[kind] = layer.attrs["Size"]
        parent = layer.attrs.get("Parent")
        if "env" in found or not parent:
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
    )


__all__ = ["LayerSizes", "layer_sizes"]
