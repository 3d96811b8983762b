"""Atomic checkpoints of a run, and the data cursor they record.

runs/ID/checkpoints/step-000004/ holds the backend's state (model in HF format, optimizer, RNG
states) and trainer.json (step, data cursor). It is written under a temporary name and renamed
into place, and `latest` (a one-line file) is replaced atomically after it: a run killed while
saving keeps its previous checkpoint, and never resumes from a half-written one.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


@dataclass
class DataCursor:
    """Position in the task list: epoch and index into that epoch's seeded permutation."""

    n_tasks: int
    seed: int
    shuffle: bool = True
    epoch: int = 0
    index: int = 0

    def order(self, epoch: int) -> list[int]:
        idx = list(range(self.n_tasks))
        if self.shuffle:
            random.Random(self.seed * 1_000_003 + epoch).shuffle(idx)
        return idx

    def take(self, k: int) -> list[int]:
        """The next k task indices (wrapping into new epochs); advances the cursor."""
        out: list[int] = []
        while len(out) < k:
            order = self.order(self.epoch)
            need = k - len(out)
            out += order[self.index : self.index + need]
            self.index += need
            if self.index >= self.n_tasks:
                self.epoch, self.index = self.epoch + 1, 0
        return out


def step_dir(root: Path, step: int) -> Path:
    return root / f"step-{step:06d}"


def save_checkpoint(
    root: Path,
    step: int,
    backend: Any,
    cursor: DataCursor,
    keep: int,
    tokenizer: Any = None,
    files: dict[str, str] | None = None,
) -> Path:
    """Write checkpoint `step` atomically; prune all but the newest `keep`. With `tokenizer`,
    model/ is a complete HF folder (loadable by AutoTokenizer too, e.g. for evaluation).
    `files`: name -> text written beside trainer.json (the trainer's pending batch)."""
    root.mkdir(parents=True, exist_ok=True)
    final = step_dir(root, step)
    tmp = root / f".tmp-{final.name}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    backend.save(tmp)
    if tokenizer is not None and (tmp / "model").is_dir():
        tokenizer.save_pretrained(tmp / "model")
    (tmp / "trainer.json").write_text(json.dumps({"step": step, "cursor": asdict(cursor)}))
    for name, text in (files or {}).items():
        (tmp / name).write_text(text)
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    latest_tmp = root / ".latest.tmp"
    latest_tmp.write_text(final.name + "\n")
    os.replace(latest_tmp, root / "latest")
    for old in sorted(p for p in root.glob("step-*") if p.is_dir())[:-keep]:
        shutil.rmtree(old)
    return final


def latest_checkpoint(root: Path) -> Path | None:
    """The checkpoint `latest` names, or None when the run has none."""
    pointer = root / "latest"
    if not pointer.exists():
        return None
    path = root / pointer.read_text().strip()
    if not (path / "trainer.json").exists():
        raise FileNotFoundError(f"{pointer} names {path}, which is not a complete checkpoint")
    return path


def load_checkpoint(path: Path, backend: Any) -> tuple[int, DataCursor]:
    """Restore `backend` from `path`; returns (the step it finished, the data cursor)."""
    state = json.loads((path / "trainer.json").read_text())
    backend.load(path)
    return int(state["step"]), DataCursor(**state["cursor"])
