"""Wheels for offline sandboxes: pip download for the image's Python, install with no network.

Downloads go through the host's pip configuration (its constraint file and find-links
included), to PyPI or its local mirror; the install tests need the Docker engine.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import docker
import pytest

from deepswe.env.images import (
    WheelDownloadError,
    download_wheels,
    ensure_base_image,
    manylinux_platforms,
    pip_install_command,
    python_version,
)


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DEEPSWE_CACHE", str(tmp_path / "cache"))


def test_platforms_cover_the_suites_glibc_down_to_manylinux2014():
    tags = manylinux_platforms("3.9", arch="amd64")
    assert tags[0] == "manylinux_2_31_x86_64"  # bullseye's glibc
    assert tags[-2:] == ["manylinux_2_17_x86_64", "manylinux2014_x86_64"]
    assert "manylinux_2_32_x86_64" not in tags  # would not load on glibc 2.31
    assert manylinux_platforms("3.11", arch="arm64")[0] == "manylinux_2_36_aarch64"
    with pytest.raises(ValueError, match="no base image runs python '3.12'"):
        manylinux_platforms("3.12")


def test_install_command_uses_the_venv_python_offline():
    cmd = pip_install_command(["pyyaml==6.0.2", "pkg with space"])
    assert cmd == (
        "python -m pip install --no-index --find-links /wheels pyyaml==6.0.2 'pkg with space'"
    )


@pytest.mark.parametrize("py", ["3.9", "3.11"])
def test_download_targets_another_python_despite_host_pip_config(tmp_path, py):
    """The host pip config sets a constraint file and find-links; cross-version download
    must still give cp39 wheels on a 3.11 host."""
    wheels = download_wheels(["iniconfig", "pyyaml"], tmp_path / "w", py)
    names = sorted(w.name for w in wheels)
    assert len(names) == 2 and all(w.exists() for w in wheels)
    assert names[0].startswith("iniconfig-") and names[0].endswith("-py3-none-any.whl")
    cp = "cp" + py.replace(".", "")
    assert names[1].startswith("pyyaml-") and f"-{cp}-{cp}-" in names[1] and "x86_64" in names[1]


def test_second_download_is_served_from_the_cache(tmp_path, monkeypatch):
    first = download_wheels(["iniconfig"], tmp_path / "a", "3.11")
    monkeypatch.setenv("PATH", "")  # any pip run now would fail: it must not happen
    monkeypatch.setattr("deepswe.env.images.wheels.sys.executable", "/nonexistent/python")
    second = download_wheels(["iniconfig"], tmp_path / "b", "3.11")
    assert [w.name for w in second] == [w.name for w in first]


def _sdist(folder: Path, name: str, setup_py: str, version: str = "1.0") -> None:
    """Write name-<version>.tar.gz, an sdist with only a setup.py and one module."""
    files = {
        "setup.py": textwrap.dedent(setup_py),
        f"{name.replace('-', '_')}.py": "VALUE = 42\n",
        "PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
    }
    with tarfile.open(folder / f"{name}-{version}.tar.gz", "w:gz") as tar:
        for rel, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{name}-{version}/{rel}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_sdist_only_pure_package_is_built_and_its_deps_resolved(tmp_path, monkeypatch):
    src = tmp_path / "src"
    src.mkdir()
    _sdist(
        src,
        "deepswe-fixture-pure",
        """\
        from setuptools import setup
        setup(name="deepswe-fixture-pure", version="1.0", py_modules=["deepswe_fixture_pure"],
              install_requires=["iniconfig"])
        """,
    )
    monkeypatch.setenv("PIP_FIND_LINKS", f"{src} /opt/wheels")
    wheels = download_wheels(["deepswe-fixture-pure==1.0"], tmp_path / "w", "3.9")
    names = sorted(w.name for w in wheels)
    assert names[0].startswith("deepswe_fixture_pure-1.0-py3-none-any")
    assert names[1].startswith("iniconfig-")  # the built wheel's dependency, for cp39


def test_sdist_only_compiled_package_is_refused(tmp_path, monkeypatch):
    src = tmp_path / "src"
    src.mkdir()
    # has_ext_modules=True makes setuptools tag the wheel for the *host* interpreter, as a
    # real C extension would: useless in a 3.9 image, so it must be refused by name.
    _sdist(
        src,
        "deepswe-fixture-native",
        """\
        from setuptools import Distribution, setup
        class Native(Distribution):
            def has_ext_modules(self):
                return True
        setup(name="deepswe-fixture-native", version="1.0", distclass=Native,
              py_modules=["deepswe_fixture_native"])
        """,
    )
    monkeypatch.setenv("PIP_FIND_LINKS", str(src))
    with pytest.raises(WheelDownloadError, match="deepswe-fixture-native has no wheel .* not pure"):
        download_wheels(["deepswe-fixture-native"], tmp_path / "w", "3.9")


def test_sdist_only_compiled_package_goes_in_as_its_sdist_for_an_image_with_a_compiler(
    tmp_path, monkeypatch
):
    """With sources=True (the image has gcc) the sdist itself is kept, pip builds it in the image;
    its dependencies are still resolved for the target, through a metadata-only stub wheel that
    is gone once the closure settles."""
    src = tmp_path / "src"
    src.mkdir()
    _sdist(
        src,
        "deepswe-fixture-native",
        """\
        from setuptools import Distribution, setup
        class Native(Distribution):
            def has_ext_modules(self):
                return True
        setup(name="deepswe-fixture-native", version="1.0", distclass=Native,
              py_modules=["deepswe_fixture_native"], install_requires=["iniconfig"])
        """,
    )
    monkeypatch.setenv("PIP_FIND_LINKS", f"{src} /opt/wheels")
    dists = download_wheels(["deepswe-fixture-native"], tmp_path / "w", "3.9", sources=True)
    names = sorted(d.name for d in dists)
    assert names[0] == "deepswe-fixture-native-1.0.tar.gz" and names[1].startswith("iniconfig-")
    assert len(names) == 2  # no stub left


def test_an_sdist_that_cannot_build_on_the_host_goes_in_for_an_image_with_a_compiler(
    tmp_path, monkeypatch
):
    """pymssql 2.3.2 (an R2E-Gym row's pinned release) needs FreeTDS's headers: the image's apt
    list has them, the host may not. With sources=True such an sdist goes in all the same, its
    stub made from its PKG-INFO; without a compiler the failure is said as before."""
    src = tmp_path / "src"
    src.mkdir()
    _sdist(
        src,
        "deepswe-fixture-needs-lib",
        """\
        import sys
        from setuptools import setup
        if "bdist_wheel" in sys.argv:
            sys.exit("fatal error: sqlfront.h: No such file or directory")
        setup(name="deepswe-fixture-needs-lib", version="1.0",
              py_modules=["deepswe_fixture_needs_lib"])
        """,
    )
    monkeypatch.setenv("PIP_FIND_LINKS", f"{src} /opt/wheels")
    dists = download_wheels(["deepswe-fixture-needs-lib"], tmp_path / "w", "3.9", sources=True)
    assert [d.name for d in dists] == ["deepswe-fixture-needs-lib-1.0.tar.gz"]
    with pytest.raises(WheelDownloadError, match="did not build"):
        download_wheels(["deepswe-fixture-needs-lib"], tmp_path / "x", "3.9")


def test_a_source_package_is_taken_in_the_newest_release_the_target_python_accepts(
    tmp_path, monkeypatch
):
    """Django 3.0's requirements on Python 3.6 (Verified): the newest sdist of a source-only
    package required a newer Python; its stub made pip backtrack until "resolution too deep".
    The sdist is now chosen for the target: 1.0 here, since 2.0 needs Python >= 3.10."""
    src = tmp_path / "src"
    src.mkdir()
    for version, needs in (("1.0", ">=3.6"), ("2.0", ">=3.10")):
        _sdist(
            src,
            "deepswe-fixture-native",
            f"""\
            from setuptools import Distribution, setup
            class Native(Distribution):
                def has_ext_modules(self):
                    return True
            setup(name="deepswe-fixture-native", version="{version}", distclass=Native,
                  py_modules=["deepswe_fixture_native"], python_requires="{needs}")
            """,
            version,
        )
    monkeypatch.setenv("PIP_FIND_LINKS", str(src))
    dists = download_wheels(["deepswe-fixture-native"], tmp_path / "w", "3.9", sources=True)
    assert [d.name for d in dists] == ["deepswe-fixture-native-1.0.tar.gz"]


def test_unknown_requirement_reports_pips_error(tmp_path):
    with pytest.raises(WheelDownloadError, match="No matching distribution"):
        download_wheels(["iniconfig==0.0.0.404"], tmp_path / "w", "3.11")


@pytest.mark.docker
@pytest.mark.parametrize("suite", ["bookworm", "bullseye"])
def test_wheels_install_and_import_in_a_container_without_network(tmp_path, suite, monkeypatch):
    monkeypatch.delenv("DEEPSWE_CACHE")  # use (or build once) the real base image
    tag = ensure_base_image(suite)
    wheel_dir = tmp_path / "wheels"
    download_wheels(["iniconfig", "pyyaml"], wheel_dir, python_version(suite))
    script = (
        pip_install_command(["iniconfig", "pyyaml"])
        + " -q && cd /tmp && python -c 'import iniconfig, yaml, sys;"
        ' print(sys.prefix, yaml.__with_libyaml__, yaml.safe_load("a: [1, 2]"))\''
    )
    out = docker.from_env().containers.run(
        tag,
        ["sh", "-c", script],
        network_mode="none",
        volumes={str(wheel_dir): {"bind": "/wheels", "mode": "ro"}},
        remove=True,
    )
    assert out.decode().split("\n")[-2] == "/opt/venv True {'a': [1, 2]}"


def test_dependencies_follow_the_target_python_not_the_hosts(tmp_path):
    """Regression: pip evaluates markers with the host's Python even under --python-version, so
    pytest's `tomli; python_version < "3.11"` was left out for a 3.9 image, which then could
    not install pytest offline."""
    names = {
        p.name.split("-")[0].lower() for p in download_wheels(["pytest==8.4.2"], tmp_path, "3.9")
    }
    assert {"pytest", "tomli", "exceptiongroup"} <= names


def test_requires_python_is_checked_for_a_late_patch_release_of_the_target():
    """Regression: `--python-version 3.6` made pip check Requires-Python against 3.6.0, refusing
    pandas 1.1.5 (>=3.6.1), which conda's defaults had for 3.6 (scikit-learn 0.20-0.22)."""
    from packaging.specifiers import SpecifierSet

    from deepswe.env.images.wheels import requires_python_version

    assert requires_python_version("3.6") in SpecifierSet(">=3.6.1")
    assert requires_python_version("3.6") not in SpecifierSet(">=3.7")
    assert requires_python_version("3.9.2") == "3.9.2"


def _iris_like(tmp_path: Path) -> tuple[Path, Path]:
    """The shape of xarray 0.12's environment on Python 3.10 (Verified): fx-top 2.0 needs
    fx-units>=3.1, whose releases have wheels and all pin fx-leaf==0.5; fx-top 1.0 needs
    fx-units~=3.0.1, an sdist only; fx-leaf has sdists only, and 0.9 is the newest."""
    src, whl = tmp_path / "src", tmp_path / "whl"
    src.mkdir()
    whl.mkdir()
    for name, version, requires, folder in (
        ("fx-top", "2.0", ["fx-units>=3.1"], whl),
        ("fx-top", "1.0", ["fx-units~=3.0.1"], whl),
        ("fx-units", "3.1", ["fx-leaf==0.5"], whl),
        ("fx-units", "3.2", ["fx-leaf==0.5"], whl),
        ("fx-units", "3.0.1", [], src),
        ("fx-leaf", "0.5", [], src),
        ("fx-leaf", "0.9", [], src),
    ):
        setup = f"""\
            from setuptools import setup
            setup(name="{name}", version="{version}", py_modules=["{name.replace("-", "_")}"],
                  install_requires={requires!r})
            """
        _sdist(folder, name, setup, version)
    for sdist in list(whl.glob("*.tar.gz")):  # these are wheels only
        _as_wheel(sdist)
    return src, whl


def _as_wheel(sdist: Path) -> None:
    """Replace a pure sdist by its py3-none-any wheel, in the same folder."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(sdist.parent),
            str(sdist),
        ],
        check=True,
        capture_output=True,
        env={**os.environ, "PIP_FIND_LINKS": ""},
    )
    sdist.unlink()


def test_a_conflicts_missing_package_is_built_in_the_version_its_dependents_pin(
    tmp_path, monkeypatch
):
    """pip's conflict names fx-leaf with no range; the range is read from "fx-units 3.2 depends
    on fx-leaf==0.5", so 0.5 is built, not the newest sdist (0.9), which would not resolve."""
    src, whl = _iris_like(tmp_path)
    monkeypatch.setenv("PIP_FIND_LINKS", f"{src} {whl}")
    names = sorted(w.name for w in download_wheels(["fx-top"], tmp_path / "w", "3.9"))
    assert names == [
        "fx_leaf-0.5-py3-none-any.whl",
        "fx_top-2.0-py3-none-any.whl",
        "fx_units-3.2-py3-none-any.whl",
    ]


def test_a_package_with_wheels_named_by_a_conflict_is_looked_beneath(tmp_path, monkeypatch):
    """cf-units, named by pip's conflict over xarray's environment, has cp310 wheels; what has
    none is the antlr4 runtime its releases pin. Resolving the named package alone says so."""
    from deepswe.env.images.wheels import _beneath

    src, whl = _iris_like(tmp_path)
    monkeypatch.setenv("PIP_FIND_LINKS", f"{src} {whl}")
    staging = tmp_path / "staging"
    staging.mkdir()
    platforms = manylinux_platforms("3.9")
    assert _beneath(("fx-units", ""), staging, "3.9", platforms, None) == ("fx-leaf", "==0.5")
    # a package that is itself missing is what to build
    assert _beneath(("fx-leaf", ""), staging, "3.9", platforms, None) == ("fx-leaf", "")
    assert list(staging.iterdir()) == []  # the probes leave nothing behind


def test_markers_are_evaluated_for_the_targets_python_when_the_host_has_one(tmp_path, monkeypatch):
    """pandas 1.5.3 needs numpy>=1.23.2 only on Python 3.11+; resolved by the host's 3.11 for a
    3.10 image, that requirement applied and xarray's numpy==1.23.0 pin conflicted. Here
    fx-marked needs fx-absent (which does not exist) only on 3.11+: for a 3.10 target it resolves
    when a 3.10 interpreter runs pip, and would not under the host's."""
    from deepswe.env.images.pip_runner import _target_interpreter, resolver_python

    # pyenv's prefixes are one documented way to provide host CPythons (evaluation/README.md)
    pythons = os.environ.get("DEEPSWE_HOST_PYTHONS") or str(Path.home() / ".pyenv/versions")
    monkeypatch.setenv("DEEPSWE_HOST_PYTHONS", pythons)
    _target_interpreter.cache_clear()
    if resolver_python("3.10")[0] == sys.executable:
        pytest.skip("no host CPython 3.10 runs this pip (DEEPSWE_HOST_PYTHONS, python3.10)")
    whl = tmp_path / "whl"
    whl.mkdir()
    _sdist(
        whl,
        "fx-marked",
        """\
        from setuptools import setup
        setup(name="fx-marked", version="1.0", py_modules=["fx_marked"],
              install_requires=['fx-absent; python_version >= "3.11"'])
        """,
    )
    _as_wheel(whl / "fx-marked-1.0.tar.gz")
    monkeypatch.setenv("PIP_FIND_LINKS", str(whl))
    platforms = manylinux_platforms("3.10", suite="bookworm")  # a host CPython on bookworm
    names = [w.name for w in download_wheels(["fx-marked"], tmp_path / "w", "3.10", platforms)]
    assert names == ["fx_marked-1.0-py3-none-any.whl"]
    if sys.version_info[:2] >= (3, 11):  # the host's own resolution would have failed
        with pytest.raises(WheelDownloadError, match="fx-absent"):
            download_wheels(["fx-marked"], tmp_path / "w311", "3.11")


def test_finding_the_resolver_leaves_setuptools_distutils_in_place():
    """Importing pip in-process switches off setuptools' distutils shim (its _distutils_hack),
    and megatron's setuptools import then failed in the same test process."""
    code = (
        "from deepswe.env.images.pip_runner import resolver_python\n"
        "resolver_python('3.10'); resolver_python('3.9')\n"
        "import setuptools, distutils.core\n"
        "assert '_distutils' in distutils.core.__file__, distutils.core.__file__\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, timeout=300)


def test_constraints_choose_the_release_and_a_step_they_cannot_resolve_goes_without(tmp_path):
    """The reference's versions (an R2E-Gym row's setup log) as pip constraints: the pinned
    release is what the wheelhouse gets; a step whose own pin contradicts them resolves
    without them, and the wheelhouse says so for the build log."""
    from deepswe.env.images.offline import Wheelhouse

    pinned = download_wheels(
        ["iniconfig"], tmp_path / "a", "3.11", constraints=["iniconfig==1.1.1"]
    )
    assert [w.name for w in pinned] == ["iniconfig-1.1.1-py2.py3-none-any.whl"]
    house = Wheelhouse(
        tmp_path / "h",
        "k",
        "3.11",
        manylinux_platforms("3.11"),
        False,
        None,
        False,
        constraints=["iniconfig==1.1.1"],
    )
    house.add(["iniconfig>=2"])
    assert [p.name for p in (tmp_path / "h").glob("iniconfig-2*.whl")]
    assert (
        len(house.unpinned) == 1
        and "['iniconfig>=2'] resolved without the pins" in house.unpinned[0]
    )


def test_markers_are_the_targets_even_when_pip_runs_on_the_host(tmp_path, monkeypatch):
    """No 3.7 interpreter runs this pip, so the host's 3.11 does: pandas 1.3.5's
    `numpy>=1.21.0; python_version >= "3.10"` must still not apply to a 3.7 image, or it
    contradicts the numpy 1.17.5 an R2E-Gym setup log pins (orange3)."""
    monkeypatch.setattr("deepswe.env.images.pip_runner._target_interpreter", lambda v: None)
    platforms = manylinux_platforms("3.7", suite="bookworm")
    wheels = download_wheels(
        ["pandas==1.3.5"], tmp_path / "w", "3.7", platforms, constraints=["numpy==1.17.5"]
    )
    assert "numpy-1.17.5-cp37-cp37m-manylinux1_x86_64.whl" in [w.name for w in wheels]


@pytest.mark.slow
def test_an_sdist_pip_found_but_could_not_prepare_is_not_called_missing(tmp_path):
    """numpy 1.19.2 (scikit-learn 1.3's pin on Python 3.9, PyPI's real sdist) fails to cythonize
    under today's Cython while pip prepares its metadata: the message says the sdist was found
    and preparing it failed, not that there is no sdist (issue #45)."""
    from deepswe.env.images.sdist_fallback import WheelDownloadError, download_sdist

    with pytest.raises(WheelDownloadError) as err:
        download_sdist("numpy==1.19.2", tmp_path, python_version="3.9")
    said = str(err.value)
    assert said.startswith("the sdist of numpy==1.19.2 was found, but preparing it failed")
    assert "cythonize" in said or "metadata" in said
