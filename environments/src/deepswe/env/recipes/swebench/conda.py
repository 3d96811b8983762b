"""conda environments as what PyPI and Debian serve: what conda would have given, offline.

swebench 4.1.0 builds some environments with conda: a package list (`conda create python=X.Y
numpy scipy cython`) or the repository's own `environment.yml` (matplotlib 3.5-3.9, xarray),
read at environment_setup_commit. Ours has no conda; each conda package becomes one of:

- a PyPI requirement, conda's version constraint kept (`=1.2` means 1.2.*, as in conda's match
  specs; a build string is dropped), under the name PyPI uses where it differs (CONDA_TO_PYPI),
  resolved like every requirement from the index as it stood on the dataset's date;
- Debian packages, for what is not a Python distribution (programs, system libraries, GUI
  toolkits' runtimes: CONDA_TO_DEBIAN), and for the system libraries a PyPI distribution loads
  but does not ship, which conda pulled in beside it (RUNTIME_LIBRARIES);
- nothing, for conda's own plumbing and for libraries PyPI wheels carry inside them (PROVIDED);
- left out, with the reason (LEFT_OUT): neither PyPI nor Debian serves it for the Python. An
  instance whose graded tests name a left-out package is unsupported (swebench_env).

For a Python whose builds conda's defaults channel had stopped making before the dataset's date,
an unpinned package of a conda list gets the last build defaults had for it (DEFAULTS_LAST):
`conda create python=3.6 cython` gave Cython 0.29.24, where PyPI's newest for 3.6 is 3.0.x, which
scikit-learn 0.20-0.22 do not compile with.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

# conda-forge / defaults package names whose PyPI distribution has another name (names equal
# after PEP 503 normalisation need no entry). Sources: each feedstock's recipe (its `url:` on
# pypi.io or its `name:`), conda-forge/<name>-feedstock.
CONDA_TO_PYPI: dict[str, str] = {
    "pytables": "tables",
    "matplotlib-base": "matplotlib",
    "dask-core": "dask",
    "seaborn-base": "seaborn",
    "iris": "scitools-iris",
    "pyqt": "PyQt5",  # conda-forge's pyqt is Qt 5 (pyqt5-sip beside it) up to 5.15
    "python-graphviz": "graphviz",
    "python-eccodes": "eccodes",
    "msgpack-python": "msgpack",
    "brotli-python": "Brotli",
    "pytorch": "torch",
    "py-opencv": "opencv-python",
    "pywin32-on-windows": "pywin32",
}
# conda packages that are not Python distributions: the Debian packages that give the same
# programs or libraries (Debian bookworm / bullseye names).
CONDA_TO_DEBIAN: dict[str, list[str]] = {
    "graphviz": ["graphviz"],  # the `dot` program; PyPI's "graphviz" is python-graphviz
    "ghostscript": ["ghostscript"],
    "ffmpeg": ["ffmpeg"],
    "imagemagick": ["imagemagick"],
    "inkscape": ["inkscape"],
    "pandoc": ["pandoc"],
    "pkg-config": ["pkg-config"],
    "make": ["make"],
    "cmake": ["cmake"],
    "c-compiler": ["build-essential"],
    "cxx-compiler": ["build-essential"],
    "compilers": ["build-essential", "gfortran"],
    "fortran-compiler": ["gfortran"],
    "cairo": ["libcairo2"],
    "eccodes": ["libeccodes0"],
    "udunits2": ["libudunits2-0"],
}
# PyPI distributions that load a system library conda installed beside them (cffi / ctypes),
# and the Debian package holding it.
RUNTIME_LIBRARIES: dict[str, list[str]] = {
    "cairocffi": ["libcairo2"],
    "cfgrib": ["libeccodes0"],
    "eccodes": ["libeccodes0"],
}
# Nothing to install: conda's interpreter and tools (the image has its own, CONDA_TOOLS), and C
# libraries that the PyPI wheels of their users ship inside them (h5py, netCDF4, rasterio,
# cartopy, pyproj and shapely wheels carry hdf5, netcdf, gdal, proj and geos).
PROVIDED: frozenset[str] = frozenset(
    {"python", "pip", "setuptools-conda", "conda", "hdf5", "libnetcdf", "netcdf-c", "gdal"}
    | {"libgdal", "proj", "geos", "zlib", "tk", "nodefaults"}
)
# Neither PyPI nor Debian serves these for the spec's Python (checked 2026-12-02).
LEFT_OUT: dict[str, str] = {
    "cdms2": "CDAT's cdms2 is on conda-forge only: no PyPI release, no Debian package",
    "wxpython": "PyPI has only sources for Linux (hours of C++); matplotlib's wx tests need a "
    "display, which swebench's images lack too",
    "pygobject": "PyPI has only sources (GObject introspection headers); matplotlib's GTK "
    "tests need a display, which swebench's images lack too",
    "gtk3": "GTK's runtime serves only PyGObject, left out",
    "gtk4": "GTK's runtime serves only PyGObject, left out",
}
# The import names tests use for a left-out package (a graded test naming one needs it).
LEFT_OUT_MARKERS: dict[str, tuple[str, ...]] = {
    "cdms2": ("cdms2",),
    "wxpython": ("wxagg", "wxcairo", "_wx"),
    "pygobject": ("gtk3", "gtk4"),
    "gtk3": ("gtk3",),
    "gtk4": ("gtk4",),
}
# The last builds conda's defaults channel made for Pythons it had stopped building for before
# swebench's images were made: what an unpinned name of a conda list resolved to. Source: the
# exports of swebench's own environments (SWE-bench/SWE-bench, swebench/resources/swebench-og,
# commit c7a956c: scikit-learn__scikit-learn-14894 and -11578, Python 3.6).
DEFAULTS_LAST: dict[str, dict[str, str]] = {
    "3.6": {
        "cython": "0.29.24",
        "numpy": "1.19.2",
        "scipy": "1.5.2",
        "pandas": "1.1.5",
        "matplotlib": "3.3.4",
        "pytest": "6.2.4",
        "setuptools": "58.0.4",
    },
}

# What conda's solver put beside those builds, where PyPI's newest differs in a way the image's
# pip cannot take: pytest 6.2.4 needs pluggy<1.0.0a1, which today's pip meets with the
# pre-release 1.0.0.dev0 and the image's pip 21.2.2 refuses. Same source as DEFAULTS_LAST.
DEFAULTS_LAST_WITH: dict[str, dict[str, list[str]]] = {
    "3.6": {"pytest": ["pluggy==0.13.1", "py==1.11.0"]},
}

_NAME = re.compile(r"^\s*([A-Za-z0-9_.\-]+)(\[[^\]]*\])?\s*(.*)$")


@dataclass
class CondaTranslation:
    """What stands in for a conda environment: pip steps (in conda's order), Debian packages,
    and the conda packages nothing stands in for, with why."""

    pip: list[list[str]] = field(default_factory=list)
    apt: list[str] = field(default_factory=list)
    left_out: dict[str, str] = field(default_factory=dict)


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pip_constraint(constraint: str) -> str:
    """A conda match spec's version part as pip's: `=1.2` -> `==1.2.*`, `1.2.*` -> `==1.2.*`,
    `==1.2=py36_0` -> `==1.2` (build string dropped); `>=`, `<`, `!=` and commas as they are."""
    c = constraint.strip().replace(" ", "")
    if not c:
        return ""
    if c.startswith("=") and not c.startswith("=="):
        version = c[1:].split("=")[0]
        return f"=={version}" if version.endswith("*") else f"=={version}.*"
    if c.startswith("=="):
        return "==" + c[2:].split("=")[0]
    if c[0].isdigit():  # "1.2.*" or "1.2" (conda: fuzzy) or "1.2 build"
        version = c.split("=")[0]
        return f"=={version}" if version.endswith("*") else f"=={version}.*"
    return c


def translate_package(spec: str, python: str, pinned_defaults: bool) -> tuple[str, object]:
    """One conda package spec -> ("pip", requirement) | ("apt", [packages]) | ("none", why) |
    ("out", why). `pinned_defaults`: a conda list's unpinned names get DEFAULTS_LAST's build."""
    m = _NAME.match(spec.split("#", 1)[0])
    if not m:
        raise ValueError(f"not a conda package spec: {spec!r}")
    name, extras, constraint = m.group(1), m.group(2) or "", m.group(3)
    key = _norm(name)
    if key in LEFT_OUT:
        return "out", LEFT_OUT[key]
    if key in PROVIDED:
        return "none", "provided by the interpreter, the image or the wheels that use it"
    if key in CONDA_TO_DEBIAN:
        return "apt", CONDA_TO_DEBIAN[key]
    pypi = CONDA_TO_PYPI.get(key, name)
    version = pip_constraint(constraint)
    if not version and pinned_defaults and key in DEFAULTS_LAST.get(python, {}):
        version = f"=={DEFAULTS_LAST[python][key]}"
        return "pip", " ".join(
            [f"{pypi}{extras}{version}", *DEFAULTS_LAST_WITH.get(python, {}).get(key, [])]
        )
    return "pip", f"{pypi}{extras}{version}"


def _add(out: CondaTranslation, step: list[str], spec: str, python: str, pinned: bool) -> None:
    kind, what = translate_package(spec, python, pinned)
    name = _norm(_NAME.match(spec).group(1))
    if kind == "pip":
        step += str(what).split(" ")  # a defaults build may bring the pins conda put beside it
        out.apt += RUNTIME_LIBRARIES.get(_norm(CONDA_TO_PYPI.get(name, name)), [])
    elif kind == "apt":
        out.apt += list(what)
    elif kind == "out":
        out.left_out[name] = str(what)


def from_conda_list(packages: str, python: str) -> CondaTranslation:
    """A spec's conda package list ("numpy scipy 'cython==3.0.10'") -> one pip step."""
    out, step = CondaTranslation(), []
    for spec in shlex.split(packages):
        _add(out, step, spec, python, pinned=True)
    out.pip = [step] if step else []
    out.apt = sorted(set(out.apt))
    return out


def from_environment_yml(text: str, python: str) -> CondaTranslation:
    """A conda environment.yml -> its conda dependencies as one pip step, then its `pip:`
    section as another (the order `conda env create` installs them in). The file's own python
    pin is dropped: swebench installs the spec's Python over it (`conda install python=X.Y`)."""
    import yaml

    doc = yaml.safe_load(text) or {}
    out, conda_step, pip_step = CondaTranslation(), [], []
    for dep in doc.get("dependencies") or []:
        if isinstance(dep, dict):
            pip_step += [str(x) for x in dep.get("pip") or []]
        elif _norm(_NAME.match(str(dep)).group(1)) != "python":
            _add(out, conda_step, str(dep), python, pinned=False)
    out.pip = [s for s in (conda_step, pip_step) if s]
    out.apt = sorted(set(out.apt))
    return out


def needs_left_out(tests: list[str], left_out: dict[str, str]) -> str | None:
    """The first left-out package a graded test's id names, with why it is out; else None."""
    for name, why in left_out.items():
        markers = LEFT_OUT_MARKERS.get(name, (name,))
        for test in tests:
            if any(mark in test.lower() for mark in markers):
                return f"its graded test {test} needs {name}: {why}"
    return None


__all__ = [
    "CONDA_TO_DEBIAN",
    "CONDA_TO_PYPI",
    "DEFAULTS_LAST",
    "LEFT_OUT",
    "PROVIDED",
    "RUNTIME_LIBRARIES",
    "CondaTranslation",
    "from_conda_list",
    "from_environment_yml",
    "needs_left_out",
    "pip_constraint",
    "translate_package",
]
