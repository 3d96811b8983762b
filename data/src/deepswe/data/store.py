"""Write tasks as JSONL atomically: a reader sees the old file or the whole new one, never half."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from deepswe.data.task import Task


def write_jsonl(tasks: Iterable[Task], path: str | Path) -> int:
    """Write one `Task.model_dump_json()` a line to `path` via a temp file in the same
    directory and a rename. Returns the number of tasks written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    count = 0
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            for task in tasks:
                f.write(task.model_dump_json() + "\n")
                count += 1
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)  # atomic on POSIX when both are on one filesystem
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return count
