"""Rows from the Hugging Face Hub through `datasets.load_dataset` (imported only when used)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from deepswe.data.errors import DataError
from deepswe.data.loaders.files import ROW_SUFFIXES, RawRow, iter_raw_rows


def hub_rows(name: str, split: str, cache_dir: str | None = None) -> Iterator[RawRow]:
    """Rows of dataset `name` (a Hub id like "princeton-nlp/SWE-bench_Verified", with
    "@<revision>" for a commit, branch or tag other than the current one, or anything else
    `datasets.load_dataset` accepts), located as "name[split]:ROW". `cache_dir` defaults to
    datasets' own (HF_DATASETS_CACHE)."""
    try:
        import datasets  # optional dependency: pip install 'deepswe-data[hub]'
    except ImportError as e:
        raise DataError.at(
            name, "loading from the Hub needs `datasets`: pip install datasets"
        ) from e
    repo, _, revision = name.partition("@")  # "owner/name@<commit, branch or tag>"
    try:
        ds = datasets.load_dataset(
            repo, split=split, cache_dir=cache_dir, revision=revision or None
        )
    except Exception as e:  # network, auth, unknown name, bad split: all reported the same way
        raise DataError.at(name, f"could not load split {split!r}: {type(e).__name__}: {e}") from e
    for i, row in enumerate(ds, start=1):
        yield RawRow(f"{name}[{split}]:{i}", dict(row))


def local_or_hub_rows(name_or_path: str | Path, split: str) -> Iterator[RawRow]:
    """Rows of an existing local file/directory, else of the Hub dataset of that name (`split`
    applies to the Hub only). A missing path that looks like a file is an error, not a Hub id."""
    path = Path(name_or_path)
    if path.exists():
        return iter_raw_rows(path)
    if path.suffix in ROW_SUFFIXES:
        raise DataError.at(str(path), "no such file")
    return hub_rows(str(name_or_path), split)
