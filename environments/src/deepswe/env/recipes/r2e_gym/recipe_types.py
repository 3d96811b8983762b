"""The shapes of an R2E-Gym environment recipe (deepswe.env.recipes.r2e_gym.recipes holds the recipes):
an install script's pip steps, its attempts (one per Python it tries), and the recipe of one
repository. Pure data."""

from __future__ import annotations

from dataclasses import dataclass

# The package index as R2E-Gym's builds saw it. The setup logs in the rows'
# execution_result_content list what `uv pip install` resolved: setuptools 75.8.0 (uploaded
# 2025-01-12, pillow rows), tzdata 2024.2 (2025.1 came 2025-01-20..25, pandas rows), pip 24.3.1
# and certifi 2024.12.14 (pip 25.0 and certifi 2025.1.31 came later). Unpinned packages
# resolved then, not at the row's commit date: an aiohttp row of 2014 got pytest 8.3.4 and
# Cython 3.0.11, so the commit date would rebuild another environment (and Pythons that did not
# exist then). $DEEPSWE_R2E_INDEX_DATE overrides.
INDEX_DATE = "2025-01-20T00:00:00Z"


@dataclass(frozen=True)
class Packages:
    """One `uv pip install [--upgrade] NAME...` line of an install script."""

    names: tuple[str, ...]
    upgrade: bool = False


@dataclass(frozen=True)
class RequirementsFile:
    """One `uv pip install -r PATH` of the repository's own file, read at the row's base
    commit (`optional`: the script runs it only `if [ -f PATH ]`)."""

    path: str
    optional: bool = False


@dataclass(frozen=True)
class MakefileRequirements:
    """The requirement files that the `pip install` lines of these Makefile targets name, with
    their `-c` constraints: what aiohttp's `make .develop` installs, read up front so the
    image's offline pip finds them installed when make runs."""

    targets: tuple[str, ...]


PipStep = Packages | RequirementsFile | MakefileRequirements


@dataclass(frozen=True)
class Attempt:
    """One `uv venv --python X.Y` branch of an install script: pip steps, then commands run in
    /testbed (offline; `python` is the image's venv, which /testbed/.venv links to)."""

    python: str
    steps: tuple[PipStep, ...]
    install: tuple[str, ...]


@dataclass(frozen=True)
class Recipe:
    """How R2E-Gym builds one repository's images, restated."""

    name: str  # R2E-Gym's repo_name
    sources: tuple[str, ...]  # the R2E-Gym files restated (paths under src/r2egym/)
    apt: tuple[str, ...]
    attempts: tuple[Attempt, ...]
    index_date: str = INDEX_DATE
    needs_submodules: bool = False  # the Dockerfile runs `git submodule update --init`
    differences: tuple[str, ...] = ()  # what ours does otherwise, and why


__all__ = [
    "INDEX_DATE",
    "Attempt",
    "MakefileRequirements",
    "Packages",
    "PipStep",
    "Recipe",
    "RequirementsFile",
]
