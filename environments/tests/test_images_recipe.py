"""The base-image recipe and tag: pure functions, no Docker."""

from __future__ import annotations

import io
import os
import re
import shutil
import stat
import time
from pathlib import Path

import pytest

from deepswe.env.images import base, base_image_tag, python_version, recipe


def test_tag_is_repository_suite_and_12_hex_of_the_recipe_hash():
    tag = base_image_tag("bookworm")
    assert re.fullmatch(r"deepswe/base:bookworm-[0-9a-f]{12}", tag)
    assert tag.endswith(recipe.recipe_hash("bookworm")[:12])
    assert base_image_tag("bookworm") == tag  # deterministic
    assert base_image_tag("bullseye") != tag.replace("bookworm", "bullseye")


def test_mirror_does_not_change_the_tag(monkeypatch):
    before = base_image_tag("bullseye")
    monkeypatch.setenv("DEEPSWE_DEBIAN_MIRROR", "http://ftp.de.debian.org/debian")
    assert recipe.mirror() == "http://ftp.de.debian.org/debian"
    assert base_image_tag("bullseye") == before


@pytest.mark.parametrize(
    "change",
    [
        lambda mp: mp.setattr(recipe, "PACKAGES", (*recipe.PACKAGES, "build-essential")),
        lambda mp: mp.setattr(recipe, "RECIPE_VERSION", recipe.RECIPE_VERSION + 1),
        lambda mp, text=recipe.setup_script(): mp.setattr(
            recipe, "setup_script", lambda: text + "\ntrue\n"
        ),
    ],
    ids=["packages", "recipe-version", "setup-script"],
)
def test_every_recipe_input_changes_the_tag(monkeypatch, change):
    before = base_image_tag("bookworm")
    change(monkeypatch)
    assert base_image_tag("bookworm") != before


def test_package_order_does_not_change_the_tag(monkeypatch):
    before = base_image_tag("bookworm")
    monkeypatch.setattr(recipe, "PACKAGES", tuple(reversed(recipe.PACKAGES)))
    assert base_image_tag("bookworm") == before


def test_repository_override_keeps_the_hash(monkeypatch):
    before = base_image_tag("bookworm")
    monkeypatch.setenv("DEEPSWE_BASE_REPOSITORY", "registry.local:5000/deepswe/base")
    tag = base_image_tag("bookworm")
    assert tag == "registry.local:5000/" + before
    assert recipe.latest_tag("bookworm") == "registry.local:5000/deepswe/base:bookworm"


def test_python_versions_and_unknown_suite():
    assert python_version("bookworm") == "3.11"
    assert python_version("bullseye") == "3.9"
    with pytest.raises(ValueError, match="unknown suite 'jessie'; known: bookworm, bullseye"):
        base_image_tag("jessie")


def test_setup_script_ships_with_the_package():
    script = recipe.setup_script()
    assert script.startswith("#!/bin/sh")
    assert "python3 -m venv /opt/venv" in script


def test_missing_debootstrap_says_how_to_install_it(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(base, "SBIN_PATH", str(tmp_path))
    with pytest.raises(base.ImageBuildError, match="apt-get install debootstrap"):
        base._find_debootstrap()


def test_debootstrap_found_outside_path_in_sbin(monkeypatch, tmp_path):
    """make may run with a PATH lacking /usr/sbin; the fallback still finds debootstrap."""
    sbin = tmp_path / "sbin"
    sbin.mkdir()
    fake = sbin / "debootstrap"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(base, "SBIN_PATH", str(sbin))
    assert Path(base._find_debootstrap()) == fake


def test_remove_tree_unmounts_nothing_outside_and_removes(tmp_path):
    tree = tmp_path / "rootfs" / "usr" / "bin"
    tree.mkdir(parents=True)
    (tree / "x").write_text("x")
    base._remove_tree(tmp_path / "rootfs")
    assert not (tmp_path / "rootfs").exists()
    base._remove_tree(tmp_path / "rootfs")  # absent is fine


@pytest.mark.skipif(
    shutil.which("debootstrap", path="/usr/sbin:/sbin:" + os.environ.get("PATH", "")) is None
    or os.geteuid() != 0,
    reason="needs debootstrap and root",
)
def test_failed_debootstrap_names_the_step_and_keeps_its_log(monkeypatch, tmp_path):
    monkeypatch.setenv("DEEPSWE_CACHE", str(tmp_path))
    monkeypatch.setenv("DEEPSWE_DEBIAN_MIRROR", "http://127.0.0.1:9/debian")  # nothing listens
    logged: list[str] = []
    with pytest.raises(
        base.ImageBuildError, match=r"debootstrap failed \(exit \d+\); log: "
    ) as err:
        base.build_base_image("bookworm", log=logged.append)
    logfile = Path(str(err.value).split("log: ")[1].split()[0])
    assert logfile.is_file() and "127.0.0.1:9" in logfile.read_text()
    assert any("FAILED" in line for line in logged)


def test_silent_hung_step_is_killed_at_its_timeout(tmp_path):
    """A step that prints nothing and never ends (a stalled mirror) must still time out;
    the group kill also reaps the background child that holds the output pipe open."""
    started = time.monotonic()
    with pytest.raises(base.ImageBuildError, match="hang timed out after 1s; log: "):
        base._run_logged(
            ["sh", "-c", "sleep 60 & sleep 60"], tmp_path / "log", 1, lambda _: None, "hang"
        )
    assert time.monotonic() - started < 30


def test_progress_shows_phases_and_warnings_not_every_package():
    lines = ["I: Retrieving InRelease\n"]
    lines += [f"I: Retrieving pkg{i} 1.0\n" for i in range(100)]
    lines += ["W: something odd\n", "I: Unpacking the base system...\n", "I: Unpacking sed...\n"]
    out, logged = io.StringIO(), []
    base._echo_progress(lines, out, logged.append, "x")
    assert out.getvalue() == "".join(lines)  # the log file gets everything
    assert logged == [
        "x: I: Retrieving InRelease",
        "x: I: Retrieving pkg39 1.0",
        "x: I: Retrieving pkg79 1.0",
        "x: W: something odd",
        "x: I: Unpacking the base system...",
    ]
