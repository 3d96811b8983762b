"""Read raw rows (dicts) from local files, remembering where each came from.

Formats: .jsonl/.ndjson (one JSON object a line; location = line number), .json (one object,
a list of objects, or an R2E-Gym trajectory whose `ds` / `env_args.ds` holds the row;
location = item number), .parquet (location = row number), or a directory of such files.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from deepswe.data.errors import DataError

ROW_SUFFIXES = (".jsonl", ".ndjson", ".json", ".parquet")


@dataclass(frozen=True)
class RawRow:
    """One row as read, or why it could not be read (`problem` set, `data` None)."""

    where: str
    data: dict[str, Any] | None
    problem: str | None = None


def iter_raw_rows(path: str | Path) -> Iterator[RawRow]:
    """Every row of `path` (a file or a directory of files), in order."""
    path = Path(path)
    if not path.exists():
        raise DataError.at(str(path), "no such file or directory")
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix in ROW_SUFFIXES)
        if not files:
            raise DataError.at(str(path), f"directory holds no {'/'.join(ROW_SUFFIXES)} files")
        for f in files:
            yield from _file_rows(f)
    else:
        yield from _file_rows(path)


def _file_rows(path: Path) -> Iterator[RawRow]:
    if path.suffix == ".parquet":
        yield from _parquet_rows(path)
    elif path.suffix == ".json":
        yield from _json_rows(path)
    else:
        yield from _jsonl_rows(path)


def _jsonl_rows(path: Path) -> Iterator[RawRow]:
    with path.open(encoding="utf-8") as f:
        for lineno, line in _numbered_lines(path, f):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                data = json.loads(line.rstrip("\r\n"))
            except json.JSONDecodeError as e:
                yield RawRow(where, None, f"invalid JSON: {e.msg} (column {e.colno})")
                continue
            if not isinstance(data, dict):
                yield RawRow(where, None, f"expected a JSON object, got {type(data).__name__}")
                continue
            yield RawRow(where, data)


def _numbered_lines(path: Path, f: TextIO) -> Iterator[tuple[int, str]]:
    lineno = 0
    try:
        for lineno, line in enumerate(f, start=1):
            yield lineno, line
    except UnicodeDecodeError as e:
        raise DataError.at(f"{path}:{lineno + 1}", f"not UTF-8 text: {e.reason}") from e


def _json_rows(path: Path) -> Iterator[RawRow]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as e:
        raise DataError.at(str(path), f"not UTF-8 text: {e.reason}") from e
    except json.JSONDecodeError as e:
        raise DataError.at(f"{path}:{e.lineno}", f"invalid JSON: {e.msg} (column {e.colno})") from e
    items = doc if isinstance(doc, list) else [_unwrap_trajectory(doc)]
    for i, item in enumerate(items, start=1):
        where = f"{path}:{i}"
        if isinstance(item, dict):
            yield RawRow(where, item)
        else:
            yield RawRow(where, None, f"expected a JSON object, got {type(item).__name__}")


def _unwrap_trajectory(doc: Any) -> Any:
    """R2E-Gym trajectory files keep their dataset row under `ds` or `env_args.ds`."""
    if not isinstance(doc, dict):
        return doc
    if isinstance(doc.get("ds"), dict):
        return doc["ds"]
    env_args = doc.get("env_args")
    if isinstance(env_args, dict) and isinstance(env_args.get("ds"), dict):
        return env_args["ds"]
    return doc


def _parquet_rows(path: Path) -> Iterator[RawRow]:
    try:
        import pyarrow.parquet as pq  # heavy; only needed for parquet input
    except ImportError as e:
        raise DataError.at(str(path), "reading parquet needs pyarrow: pip install pyarrow") from e
    try:
        rows = pq.read_table(path).to_pylist()
    except Exception as e:  # pyarrow raises several types for a corrupt file
        raise DataError.at(str(path), f"cannot read parquet: {e}") from e
    for i, row in enumerate(rows, start=1):
        yield RawRow(f"{path}:{i}", row)
