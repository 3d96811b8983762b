"""Where an sdist with no wheel for the target is built (deepswe.env.images.build_stage): Debian's
own interpreter in a build stage, a container of the image's base with a toolchain. The real
case is scikit-learn 1.3's `numpy==1.19.2` and `scipy==1.5.2` on bullseye's Python 3.9 (issue
#45): no cp39 wheels, and today's Cython does not build them; the `slow` test at the end
builds numpy 1.19.2 so when DEEPSWE_STAGE_BUILDS is set (minutes on two cores)."""

from __future__ import annotations

import os

import pytest

from deepswe.env.images import base_image_tag, download_wheels, manylinux_platforms
from deepswe.env.images.build_stage import TOOLCHAIN, BuildStage, HostInterpreter


def test_a_stage_is_the_images_base_with_its_own_packages_and_the_toolchain():
    """The stage links what the image has (a spec's -dev packages) and builds with a toolchain
    of its own; stages of images with other packages are other stages, kept apart."""
    stage = BuildStage("bullseye", ("libfreetype6-dev", "build-essential"))
    assert set(stage.packages) == {"libfreetype6-dev", *TOOLCHAIN}
    assert stage.image == base_image_tag("bullseye", stage.packages)
    assert stage.key == f"{stage.image}:/usr/bin/python3"
    assert BuildStage("bullseye").key != stage.key
    # a host CPython is named by its path, as builds kept before stages existed were
    assert HostInterpreter("/opt/py/3.6.15/bin/python3").key == "/opt/py/3.6.15/bin/python3"


def _plain(suite: str) -> BuildStage:
    """A stage on the suite's plain base image (CI builds it; a toolchain would take minutes)."""
    stage = BuildStage(suite, toolchain=())
    if stage.image != base_image_tag(suite):
        pytest.fail("a stage without packages is the suite's base image")
    return stage


@pytest.mark.docker
def test_a_stage_runs_offline_as_us_with_the_work_folder_at_its_own_path(tmp_path, base_image):
    """The build's folder is where the host left it (the venv's paths, the wheels' find-links),
    nothing reaches the network, what the build writes is ours, and of our environment only
    pip's settings pass."""
    stage = _plain("bookworm")
    assert stage.image == base_image
    code = (
        "import os, socket; open('made', 'w').write(str(os.getuid()));"
        "print(os.environ.get('PIP_NO_INDEX'), os.environ.get('SECRET'), os.getcwd());"
        "socket.create_connection(('1.1.1.1', 80), timeout=5)"
    )
    env = {"PIP_NO_INDEX": "1", "SECRET": "host-only"}
    res = stage.run([stage.python, "-c", code], env, 120, tmp_path)
    assert res.returncode != 0
    assert f"1 None {tmp_path}" in res.stdout
    assert "unreachable" in res.stdout or "OSError" in res.stdout, res.stdout
    made = tmp_path / "made"
    assert made.read_text() == str(os.getuid()) and made.stat().st_uid == os.getuid()


def test_a_pure_python_wheel_from_a_stage_is_kept_as_it_is(tmp_path):
    """auditwheel refuses a wheel that is not a platform wheel; one that links nothing needs no
    repair (docopt's sdist, say, built in a stage for want of a wheel)."""
    wheel = tmp_path / "docopt-0.6.2-py2.py3-none-any.whl"
    wheel.write_bytes(b"")
    assert BuildStage("bullseye").repair(wheel, tmp_path, {}, 1) == wheel


@pytest.mark.slow
@pytest.mark.docker
def test_numpy_1192_builds_for_bullseyes_python_39_with_the_cython_of_its_time(tmp_path):
    """numpy 1.19.2 has no cp39 wheel and its sources do not cythonize under Cython 3: built
    by bullseye's python3.9 in a stage with the setuptools and Cython of Python 3.9's release,
    repaired to carry the OpenBLAS it links, it imports in the image, which has no OpenBLAS."""
    if not os.environ.get("DEEPSWE_STAGE_BUILDS"):
        pytest.skip("builds numpy from source (minutes): set DEEPSWE_STAGE_BUILDS=1")
    stage = BuildStage("bullseye", ("build-essential", "pkg-config", "python3-dev"))
    wheels = download_wheels(
        ["numpy==1.19.2"],
        tmp_path / "w",
        "3.9",
        manylinux_platforms("3.9"),
        sources=True,
        stage=stage,
    )
    assert [w.name.split("-")[:3] for w in wheels] == [["numpy", "1.19.2", "cp39"]]
    plain = _plain("bullseye")
    site = tmp_path / "w"
    install = [plain.python, "-m", "pip", "install", "-q", "--no-index", "--target", str(site)]
    res = plain.run(["/opt/venv/bin/python", *install[1:], str(wheels[0])], {}, 600, tmp_path)
    assert res.returncode == 0, res.stdout
    code = f"import sys; sys.path.insert(0, {str(site)!r}); import numpy as n; print(n.ones(3) @ n.ones(3))"
    res = plain.run([plain.python, "-c", code], {}, 120, tmp_path)
    assert res.stdout.split()[-1:] == ["3.0"], res.stdout
