"""Submodules checked out from clones in the mirror folder (deepswe.env.images.submodules), in
the shape of astropy 1.3-3.1: the base commit records astropy_helpers as a gitlink, the build
runs `git submodule update --init`, and no network reaches github.com."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from deepswe.data.task import EnvironmentSpec, HiddenTests, Task, TaskSource, TestSpec
from deepswe.data.toy import commit_repo, git
from deepswe.env.images.submodules import check_out, mirror_name, missing, recorded
from deepswe.env.images.task import prepare_repository

URL = "https://github.com/example/helpers.git"


def _mirror(tmp_path: Path, with_clone: bool = True) -> tuple[Path, str, str]:
    """mirror/example__main recording mirror/example__helpers's first commit at `helpers`, and
    docs/theme (a documentation submodule) at a commit no clone holds. Returns (mirror, base
    commit, the submodule's commit)."""
    mirror = tmp_path / "mirror"
    helpers = mirror / "example__helpers"
    pinned = commit_repo(helpers, {"helpers/__init__.py": "VERSION = 1\n"}, "helpers 1")
    commit_repo(helpers, {"helpers/__init__.py": "VERSION = 2\n"}, "helpers 2: after the pin")
    main = mirror / "example__main"
    gitmodules = (
        f'[submodule "helpers"]\n\tpath = helpers\n\turl = {URL}\n'
        '[submodule "docs/theme"]\n\tpath = docs/theme\n\turl = https://github.com/example/theme\n'
    )
    commit_repo(main, {".gitmodules": gitmodules, "setup.py": "print('build')\n"}, "init")
    git(main, "update-index", "--add", "--cacheinfo", f"160000,{pinned},helpers")
    git(main, "update-index", "--add", "--cacheinfo", f"160000,{'1' * 40},docs/theme")
    git(main, "commit", "-q", "-m", "record the submodules")
    if not with_clone:
        shutil.rmtree(helpers)
    return mirror, git(main, "rev-parse", "HEAD").strip(), pinned


def test_the_recorded_submodules_and_the_clone_each_needs(tmp_path):
    assert mirror_name(URL) == "example__helpers"
    assert mirror_name("git@github.com:astropy/astropy-helpers") == "astropy__astropy-helpers"
    assert mirror_name("https://example.org/x.git") is None
    mirror, base, pinned = _mirror(tmp_path, with_clone=False)
    subs = recorded(mirror / "example__main", base)
    assert [(s.path, s.url, s.commit) for s in subs][0] == ("helpers", URL, pinned)
    gaps = missing(mirror / "example__main", base, mirror)
    assert gaps == [f"helpers ({pinned[:12]} of {URL}; a clone at {mirror}/example__helpers)"]


def test_a_submodule_is_checked_out_at_its_commit_as_submodule_update_leaves_it(tmp_path):
    mirror, base, pinned = _mirror(tmp_path)
    assert missing(mirror / "example__main", base, mirror) == []
    dest = tmp_path / "testbed"
    prepare_repository(str(mirror / "example__main"), base, dest)
    lines = check_out(dest, mirror)
    assert lines == [
        f"submodule helpers: {pinned[:12]} from {mirror / 'example__helpers'}",
        f"submodule docs/theme: no clone holding {'1' * 12}; left out",
    ]
    assert (dest / "helpers" / "helpers" / "__init__.py").read_text() == "VERSION = 1\n"
    assert (dest / "helpers" / ".git").read_text().strip() == "gitdir: ../.git/modules/helpers"
    status = git(dest, "submodule", "status", "--", "helpers")
    assert status.split()[:2] == [pinned, "helpers"]  # no "-": initialised, at its commit
    git(dest, "submodule", "update", "--init", "--", "helpers")  # nothing to fetch: offline
    assert git(dest / "helpers", "remote", "get-url", "origin").strip() == URL
    later = git(mirror / "example__helpers", "rev-parse", "HEAD").strip()
    found = subprocess.run(["git", "-C", str(dest / "helpers"), "cat-file", "-e", later])
    assert found.returncode != 0 and git(dest / "helpers", "for-each-ref").strip() == ""
    assert git(dest, "status", "--porcelain").strip() == ""


@pytest.mark.docker
def test_the_image_holds_the_submodule_and_the_builds_update_runs_offline(tmp_path):
    from deepswe.env.images.task import ensure_task_image
    from deepswe.env.sandbox import SandboxLimits
    from deepswe.env.sandbox.docker import DockerSandbox

    mirror, base, pinned = _mirror(tmp_path)
    update = "git submodule update --init -- helpers"  # what astropy's ah_bootstrap runs
    task = Task(
        instance_id="example__main-1",
        repo="example/main",
        base_commit=base,
        problem_statement="-",
        source=TaskSource.CUSTOM,
        environment=EnvironmentSpec(source=str(mirror / "example__main"), install=[update]),
        test_spec=TestSpec(command="true", log_parser="pytest"),
        hidden=HiddenTests(),
    )
    image = ensure_task_image(task, log=lambda _: None)
    with DockerSandbox(image, SandboxLimits(memory="1g", pids=256)) as sb:
        r = sb.run(
            "git submodule status -- helpers && cat helpers/helpers/__init__.py"
            " && git status --porcelain | wc -l",
            timeout=60,
        )
    assert r.exit_code == 0, r.output
    status, source, changed = r.stdout.strip().splitlines()
    assert status.split()[:2] == [pinned, "helpers"] and source == "VERSION = 1"
    assert changed == "0"
