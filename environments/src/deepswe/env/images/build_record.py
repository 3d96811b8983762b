"""How long this machine took to build each task image, kept beside the image cache.

`ensure_task_image` writes one record when it builds an image (the seconds include the shared
layers it had to build first: an environment's first task pays for them); manifests read it
(`deepswe-eval health`, `audit`). An image built elsewhere, or before records were kept, has
none: its build time is unknown, never guessed.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
from pathlib import Path

from deepswe.env.images.recipe import cache_root


def _path(tag: str) -> Path:
    return cache_root() / "image-builds" / (re.sub(r"[^A-Za-z0-9_.-]", "_", tag) + ".json")


def record_build(tag: str, seconds: float) -> None:
    """Keep that building `tag` took `seconds` here (replaces an earlier record). Several
    threads or processes may finish the same image at once (a training step's parallel
    rollouts): each writes its own temporary file and the last rename wins. A record that
    cannot be written is left out; it never fails the build it describes."""
    path = _path(tag)
    record = {"tag": tag, "build_s": round(seconds, 1), "built_at": time.time()}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "w") as fh:
            fh.write(json.dumps(record))
        os.replace(tmp, path)
    except OSError:
        return


def build_seconds(tag: str) -> float | None:
    """The seconds building `tag` took on this machine, or None when no record is kept."""
    try:
        return float(json.loads(_path(tag).read_text())["build_s"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


__all__ = ["build_seconds", "record_build"]
