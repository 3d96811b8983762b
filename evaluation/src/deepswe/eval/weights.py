"""What an evaluation evaluated: a digest of a checkpoint's weight files.

An evaluation through an endpoint knows only a model name; the server knows which folder it
loaded (vLLM answers it as the model's `root` in /v1/models). When that folder is on this
machine, its weights are digested here and the digest goes into the run card, so a published
number can be checked against the weights it is published with (`make publish`).

The digest covers the weight files only (`*.safetensors`, `*.bin`, and the safetensors index),
by name and content: two folders with the same weights and a different README or tokenizer
digest alike; a single changed tensor does not.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

WEIGHT_PATTERNS = ("*.safetensors", "*.bin", "*.safetensors.index.json")


class NoWeights(ValueError):
    """The folder holds no weight file."""


def weight_files(folder: Path) -> list[Path]:
    """The weight files directly in `folder`, sorted by name."""
    found = {p for pattern in WEIGHT_PATTERNS for p in folder.glob(pattern) if p.is_file()}
    return sorted(found, key=lambda p: p.name)


def weights_digest(folder: str | Path) -> str:
    """sha256 over each weight file's name and sha256, in name order. NoWeights if none."""
    folder = Path(folder)
    files = weight_files(folder)
    if not files:
        raise NoWeights(f"{folder}: no weight files ({', '.join(WEIGHT_PATTERNS)})")
    outer = hashlib.sha256()
    for path in files:
        inner = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                inner.update(chunk)
        outer.update(f"{path.name}\0{inner.hexdigest()}\n".encode())
    return outer.hexdigest()


__all__ = ["WEIGHT_PATTERNS", "NoWeights", "weight_files", "weights_digest"]
