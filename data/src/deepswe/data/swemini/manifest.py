"""The pinned swe-mini sources (data/swe-mini/manifest.yaml) and where their files live.

Paths: the manifest and the released tasks.jsonl sit in the repository (`data/swe-mini/`); the
downloaded sdists, the git repositories built from them and the synthesis cache sit under
`$DEEPSWE_CACHE/swe-mini` (default `~/.cache/deepswe/swe-mini`), which is machine-local and
rebuilt by `deepswe-data swe-mini fetch`. A task's `environment.source` is stored relative to
that cache (`repos/<name>-<version>`) so the committed tasks.jsonl works on every machine.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from deepswe.data.errors import DataError

# data/src/deepswe/data/swemini/manifest.py -> data/swe-mini
DATA_DIR = Path(__file__).resolve().parents[4] / "swe-mini"
MANIFEST = DATA_DIR / "manifest.yaml"
TASKS = DATA_DIR / "tasks.jsonl"


class Project(BaseModel):
    """One pinned PyPI project."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    version: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    src: list[str]
    """Files or directories (relative to the sdist root) whose code may be mutated."""
    tests: list[str]
    """Test paths of the whole suite, as given to pytest for the baseline run."""
    pythonpath: str = "."
    """The import root inside the repository ("." or "src")."""
    split: Literal["train", "test"]
    exclude: list[str] = []
    """Node-id prefixes never listed as FAIL_TO_PASS/PASS_TO_PASS: tests whose outcome depends
    on the machine (they pass on the host and are skipped in the image)."""
    commit: str | None = None
    """The clean commit's SHA when built from this sdist (fetch checks it: same bytes anywhere)."""

    @property
    def key(self) -> str:
        """`<name>-<version>`: the directory name of its sdist and git repository."""
        return f"{self.name}-{self.version}"

    @property
    def api_modules(self) -> set[str]:
        """The package's top-level import names (`src/cachetools` -> cachetools, `six.py` ->
        six): what a reproduction may import besides the standard library."""
        root = PurePosixPath(self.pythonpath)
        return {
            PurePosixPath(entry).relative_to(root).parts[0].removesuffix(".py")
            for entry in self.src
        }

    @property
    def repo_rel(self) -> str:
        """The task's `environment.source`, relative to the swe-mini cache."""
        return f"repos/{self.key}"


class Manifest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    seed: int = 0
    pytest: str
    """The one test requirement every environment installs (one shared env image)."""
    projects: list[Project]

    def project(self, name: str) -> Project:
        for p in self.projects:
            if p.name == name:
                return p
        raise DataError.at(str(MANIFEST), f"no project named {name!r}")


def load_manifest(path: Path = MANIFEST) -> Manifest:
    """Read and validate the manifest; errors name the file and the field."""
    try:
        raw = yaml.safe_load(path.read_text())
        return Manifest.model_validate(raw)
    except OSError as exc:
        raise DataError.at(str(path), f"cannot read: {exc.strerror or exc}") from None
    except Exception as exc:  # pydantic ValidationError or yaml.YAMLError: one message
        raise DataError.at(str(path), str(exc)) from None


def cache_dir() -> Path:
    """$DEEPSWE_CACHE/swe-mini (default ~/.cache/deepswe/swe-mini), the same root the image
    builder in deepswe.env uses for its own caches."""
    env = os.environ.get("DEEPSWE_CACHE")
    root = Path(env).expanduser() if env else Path.home() / ".cache" / "deepswe"
    return root / "swe-mini"
