"""The Docker engine's side of an image build: whether an image is there, and a build streamed
as the engine runs it, each step logged as it starts and a heartbeat while one is silent
(progress.py). Nothing is ever pulled: FROM names a local image."""

from __future__ import annotations

from pathlib import Path

import docker.errors

from deepswe.env.images.base import Log
from deepswe.env.images.progress import Heartbeat
from deepswe.env.sandbox.docker import client


def image_exists(tag: str) -> bool:
    """Whether the Docker engine has an image tagged `tag` (builds nothing, pulls nothing)."""
    try:
        client().images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


def docker_build(
    context: Path, dockerfile: str, tag: str, labels: dict[str, str], log: Log
) -> str | None:
    """docker build; None on success, else the build's whole output (for build_offline). Each
    step is logged as it starts, and a heartbeat line every 30 s while a step runs silently
    (images/progress.py), naming the image, its kind (labels) and the step."""
    (context / "Dockerfile").write_text(dockerfile)
    instance = labels.get("deepswe.instance")
    label = f"{tag} ({labels.get('deepswe.kind', 'image')}" + (
        f" of {instance})" if instance else ")"
    )
    output: list[str] = []
    error = None
    with Heartbeat(log, label) as beat:
        beat.doing("sending the build context to the engine")
        # The low-level API streams the build as it runs (the high-level images.build reads
        # it whole first: a 6-minute build printed nothing, then every step at once).
        # pull=False: FROM names a local image; no registry is ever asked.
        stream = client().api.build(
            path=str(context),
            tag=tag,
            labels=labels,
            pull=False,
            rm=True,
            forcerm=True,
            decode=True,
        )
        for chunk in stream:
            text = chunk.get("stream", "") if isinstance(chunk, dict) else ""
            output.append(text)
            if isinstance(chunk, dict) and chunk.get("error"):
                error = str(chunk["error"])
            if text.strip().startswith("Step"):
                log(f"  {text.strip()}")
                beat.doing(text.strip()[:160])
                beat.logged()
            else:
                for line in text.splitlines():
                    beat.output(line)
    if error is not None:
        return f"{''.join(output)}\n{error}"
    return None


__all__ = ["docker_build", "image_exists"]
