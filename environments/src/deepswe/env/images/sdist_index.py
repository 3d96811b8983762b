"""Which sdist, and the date of its build tools, read from the index's JSON listing alone
(PEP 691, upload times from PEP 700): sdist_native.py builds what this picks. Nothing is built to
pick it (pip's `download` would prepare its metadata with today's setuptools, which is what fails
for an old sdist)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import InvalidSdistFilename, canonicalize_name, parse_sdist_filename
from packaging.version import Version

from deepswe.env.images.sdist_fallback import (
    PIP_TIMEOUT_S,
    WheelDownloadError,
    requires_python_version,
)

PYPI_SIMPLE = "https://pypi.org/simple/"
JSON_ACCEPT = "application/vnd.pypi.simple.v1+json"
# First releases (python.org, PEP 494/537/569/596/619/664/693/719): no tool older than the
# interpreter it builds for.
PYTHON_RELEASED = {
    "3.5": "2015-09-13",
    "3.6": "2016-12-23",
    "3.7": "2018-06-27",
    "3.8": "2019-10-14",
    "3.9": "2020-10-05",
    "3.10": "2021-10-04",
    "3.11": "2022-10-24",
    "3.12": "2023-10-02",
    "3.13": "2024-10-07",
}


class NativeBuildUnavailable(LookupError):
    """This way cannot serve the requirement (no JSON listing, no such sdist); the caller falls
    back to its other ways."""


@dataclass(frozen=True)
class IndexFile:
    filename: str
    url: str
    sha256: str | None
    requires_python: str | None
    yanked: bool
    upload_time: str | None


def _index_url() -> str:
    return os.environ.get("PIP_INDEX_URL") or PYPI_SIMPLE


def index_files(name: str) -> list[IndexFile]:
    """The files the index lists for project `name` (PEP 691 JSON)."""
    base = _index_url().rstrip("/") + "/"
    url = f"{base}{canonicalize_name(name)}/"
    req = urllib.request.Request(url, headers={"Accept": JSON_ACCEPT})
    try:
        with urllib.request.urlopen(req, timeout=60) as res:
            if JSON_ACCEPT not in res.headers.get("Content-Type", ""):
                raise NativeBuildUnavailable(f"{base} gives no JSON listing (PEP 691)")
            data = json.load(res)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise NativeBuildUnavailable(f"cannot list {name} at {base}: {exc}") from None
    return [
        IndexFile(
            filename=f["filename"],
            url=urllib.parse.urljoin(url, f["url"]),
            sha256=(f.get("hashes") or {}).get("sha256"),
            requires_python=f.get("requires-python"),
            yanked=bool(f.get("yanked")),
            upload_time=f.get("upload-time"),
        )
        for f in data.get("files", [])
    ]


def _admits(requires_python: str | None, target: str) -> bool:
    try:
        return not requires_python or SpecifierSet(requires_python).contains(target, True)
    except InvalidSpecifier:
        return True  # pip ignores an unreadable Requires-Python too


def pick_sdist(
    files: list[IndexFile], wanted: Requirement, python_version: str, before: str | None
) -> IndexFile:
    """The sdist pip would pick for `wanted` on the target, from the listing alone."""
    target = requires_python_version(python_version)
    found: dict[Version, IndexFile] = {}
    for f in files:
        if not f.filename.endswith((".tar.gz", ".zip")) or f.yanked:
            continue
        try:
            name, version = parse_sdist_filename(f.filename)
        except InvalidSdistFilename:
            continue
        if name != canonicalize_name(wanted.name) or not _admits(f.requires_python, target):
            continue
        if not before or (f.upload_time or "") <= before:
            found[version] = f
    # packaging's filter is pip's rule: pre-releases only when no final release matches
    allowed = list(wanted.specifier.filter(found))
    if not allowed:
        raise NativeBuildUnavailable(f"no sdist of {wanted} for Python {python_version}")
    return found[max(allowed)]


def fetch(f: IndexFile, dest: Path) -> Path:
    with urllib.request.urlopen(f.url, timeout=PIP_TIMEOUT_S) as res:
        data = res.read()
    if f.sha256 and hashlib.sha256(data).hexdigest() != f.sha256:
        raise WheelDownloadError(f"{f.filename}: sha256 differs from the index's")
    path = dest / f.filename
    path.write_bytes(data)
    return path


def era(upload_time: str | None, python_version: str) -> str | None:
    """The index date for the build tools: the sdist's upload, or the target's release if later
    (ISO 8601 in UTC, to the second, as pip's --uploaded-prior-to reads it)."""
    released = PYTHON_RELEASED.get(python_version)
    stamps = [s for s in (upload_time, released and f"{released}T00:00:00Z") if s]
    if not stamps:
        return None
    latest = max(stamps)
    return re.sub(r"\.\d+", "", latest[:-1] if latest.endswith("Z") else latest) + "Z"


__all__ = [
    "PYTHON_RELEASED",
    "IndexFile",
    "NativeBuildUnavailable",
    "era",
    "fetch",
    "index_files",
    "pick_sdist",
]
