"""Old sdists built by the image's own interpreter with the build tools of their time
(deepswe.env.images.sdist_native): astropy 1.3's `MarkupSafe==1.0` for Python 3.6 is the real
case; the picking rules are checked on listings made here in the index's JSON shape."""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from deepswe.env.images import WheelDownloadError, download_wheels, manylinux_platforms
from deepswe.env.images.markers import for_target
from deepswe.env.images.sdist_native import (
    DEFAULT_BUILD_REQUIRES,
    IndexFile,
    NativeBuildUnavailable,
    build_requires,
    era,
    pick_sdist,
    pip_for,
)


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DEEPSWE_CACHE", str(tmp_path / "cache"))


def _file(name: str, uploaded: str, requires: str | None = None, yanked=False) -> IndexFile:
    return IndexFile(name, f"https://files.example/{name}", None, requires, yanked, uploaded)


LISTING = [
    _file("MarkupSafe-0.23.tar.gz", "2014-05-08T12:00:00Z"),
    _file("MarkupSafe-1.0.tar.gz", "2017-03-07T08:07:31.775836Z"),
    _file("MarkupSafe-1.1.0.tar.gz", "2018-11-05T00:00:00Z", ">=2.7,!=3.0.*,!=3.1.*,!=3.2.*"),
    _file("MarkupSafe-1.1.1-cp36-cp36m-manylinux1_x86_64.whl", "2019-02-24T00:00:00Z"),
    _file("MarkupSafe-1.1.1.tar.gz", "2019-02-24T00:00:00Z", yanked=True),
    _file("MarkupSafe-2.0.0.tar.gz", "2021-05-11T00:00:00Z", ">=3.6"),
    _file("MarkupSafe-2.1.0.tar.gz", "2022-02-17T00:00:00Z", ">=3.7"),
    _file("MarkupSafe-3.0.0rc1.tar.gz", "2024-09-01T00:00:00Z", ">=3.9"),
]


def test_the_sdist_is_the_newest_the_requirement_and_the_target_allow():
    def pick(req: str, py: str = "3.6", before: str | None = None) -> str:
        return pick_sdist(LISTING, Requirement(req), py, before).filename

    assert pick("MarkupSafe==1.0") == "MarkupSafe-1.0.tar.gz"
    assert pick("markupsafe") == "MarkupSafe-2.0.0.tar.gz"  # 2.1 needs 3.7; wheels, rc skipped
    assert pick("markupsafe", "3.9") == "MarkupSafe-2.1.0.tar.gz"
    assert pick("markupsafe<2") == "MarkupSafe-1.1.0.tar.gz"  # 1.1.1's sdist is yanked
    assert pick("markupsafe", before="2018-01-01T00:00:00Z") == "MarkupSafe-1.0.tar.gz"
    with pytest.raises(NativeBuildUnavailable, match="no sdist of markupsafe>3"):
        pick("markupsafe>3")


def _sdist(tmp_path: Path, name: str, pyproject: str | None) -> Path:
    top = name.removesuffix(".tar.gz").removesuffix(".zip")
    files = {f"{top}/setup.py": "from setuptools import setup\nsetup()\n"}
    if pyproject is not None:
        files[f"{top}/pyproject.toml"] = pyproject
    files[f"{top}/vendor/pyproject.toml"] = '[build-system]\nrequires = ["not-this"]\n'
    path = tmp_path / name
    if name.endswith(".zip"):
        with zipfile.ZipFile(path, "w") as z:
            for n, text in files.items():
                z.writestr(n, text)
        return path
    with tarfile.open(path, "w:gz") as t:
        for n, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(n)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return path


def test_build_requirements_are_the_sdists_own_else_setuptools_and_wheel(tmp_path):
    numpy_like = '[build-system]\nrequires = ["setuptools", "wheel", "Cython>=0.29.21"]\n'
    assert build_requires(_sdist(tmp_path, "a-1.0.tar.gz", numpy_like))[-1] == "Cython>=0.29.21"
    assert build_requires(_sdist(tmp_path, "b-1.0.zip", numpy_like))[-1] == "Cython>=0.29.21"
    assert build_requires(_sdist(tmp_path, "c-1.0.tar.gz", None)) == list(DEFAULT_BUILD_REQUIRES)
    tool_only = "[tool.black]\nline-length = 99\n"
    assert build_requires(_sdist(tmp_path, "d-1.0.tar.gz", tool_only)) == ["setuptools", "wheel"]


def test_markers_are_decided_for_the_target_not_the_host():
    reqs = [
        'numpy==1.13.3; python_version=="3.6"',
        'numpy==1.21.6; python_version=="3.11"',
        "wheel",
    ]
    assert [for_target(r, "3.6") for r in reqs] == ["numpy==1.13.3", None, "wheel"]


def test_the_tools_date_is_the_uploads_or_the_targets_release_if_later():
    assert era("2017-03-07T08:07:31.775836Z", "3.6") == "2017-03-07T08:07:31Z"
    assert era("2017-03-07T08:07:31.775836Z", "3.9") == "2020-10-05T00:00:00Z"
    assert era(None, "3.6") == "2016-12-23T00:00:00Z"


def _host_python(version: str) -> str:
    root = os.environ.get("DEEPSWE_HOST_PYTHONS") or str(Path.home() / ".pyenv" / "versions")
    found = sorted(Path(root).glob(f"{version}.*/bin/python3"))
    if not found:
        pytest.skip(f"no CPython {version} under {root}: set DEEPSWE_HOST_PYTHONS (hostpython.py)")
    return str(found[-1])


def test_astropy_13s_markupsafe_10_builds_for_python_36_with_the_setuptools_of_2017(
    tmp_path, monkeypatch
):
    """MarkupSafe 1.0 imports setuptools.Feature (gone in setuptools 46) and has no wheel: the
    host's pip cannot even prepare its metadata. Built by the image's CPython 3.6 with the
    setuptools of March 2017, it is a cp36 wheel whose C speedups import there."""
    python = _host_python("3.6")
    monkeypatch.setenv("DEEPSWE_HOST_PYTHONS", str(Path(python).parents[2]))
    platforms = manylinux_platforms("3.6", suite="bookworm")
    with pytest.raises(WheelDownloadError, match="Feature"):
        download_wheels(["MarkupSafe==1.0"], tmp_path / "host", "3.6", platforms, sources=True)
    wheels = download_wheels(
        ["MarkupSafe==1.0"], tmp_path / "native", "3.6", platforms, native=True
    )
    assert [w.name for w in wheels] == ["MarkupSafe-1.0-cp36-cp36m-linux_x86_64.whl"]
    target = tmp_path / "site"
    pip = pip_for("3.6")
    subprocess.run(
        [python, f"{pip}/pip", "install", "-q", "--no-index", "--target", str(target), wheels[0]],
        check=True,
        env={**os.environ, "PIP_CONFIG_FILE": os.devnull},
    )
    code = (
        "import markupsafe._speedups as s, markupsafe; print(markupsafe.__version__, s.escape('<'))"
    )
    out = subprocess.run(
        [python, "-c", code], env={"PYTHONPATH": str(target)}, capture_output=True, text=True
    )
    assert out.stdout.split() == ["1.0", "&lt;"], out.stderr
    # Another step resolving under other constraints (another wheel-cache entry) reuses the
    # build: no venv is made, no build tool downloaded.
    monkeypatch.setattr(
        "deepswe.env.images.sdist_native._host_pip",
        lambda *a, **k: pytest.fail("rebuilt instead of reusing the kept build"),
    )
    again = download_wheels(
        ["MarkupSafe==1.0"],
        tmp_path / "again",
        "3.6",
        platforms,
        native=True,
        constraints=["markupsafe==1.0"],
    )
    assert [w.name for w in again] == [w.name for w in wheels]
