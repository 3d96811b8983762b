"""Patch-derived data never goes on a command line, and a failure while the grader handles the
patch's own paths on a sandbox that still answers is the patch's (issue #42).

A patch adding ~1,200 new files ended in infra_error (E2BIG) before its apply: the grader put
its paths on `bash -c`'s command line, and Linux caps one argv string at 128 KiB. An honest
patch adding thousands of files must grade. Also here: the shadow probe's second rule (a fixed
copy of the repository's own `src/` package added at the root is put back under strict rules).

The Docker tests grade a src-layout calc task (package in `src/calc`, on sys.path through a
.pth file pointing at /testbed/src) in real containers; the others run on the host.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from deepswe.data.task import Task
from deepswe.data.toy import git
from deepswe.env.grading.markers import INFRA_ERROR
from deepswe.env.grading.outcomes import Outcome
from deepswe.env.grading.owned import SHADOW_PROBE
from deepswe.env.grading.patch_check import check_in_tree
from deepswe.env.grading.testinfra import _shadowing
from deepswe.env.images.task import ensure_task_image
from deepswe.env.sandbox import backend_class

sys.path.insert(0, str(Path(__file__).parent))
from calc_task import LIMITS, OPS_BUG, OPS_GOOD, calc_task, grade, make_repo, patch_of  # noqa: E402

# 2,000 new files whose paths, quoted on one command line, are well over 128 KiB.
MANY = {
    f"data/records/sample_{i:04d}_with_a_rather_long_descriptive_name"
    + (".txt" if i % 2 else ".py"): f"X = {i}\n"
    for i in range(2000)
}
ARG_MAX_STRLEN = 128 << 10


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    # The package lives in /testbed/src, on sys.path through a .pth file (an editable install's).
    return make_repo(tmp_path_factory.mktemp("many"), package="src/calc", plugin=False)


@pytest.fixture(scope="module")
def task(repo) -> Task:
    return calc_task(repo, "calc__many-files-1", package="src/calc", on_path="/testbed/src")


@pytest.fixture(scope="module")
def image(task) -> str:
    return ensure_task_image(task, log=lambda _: None)


_grade = grade


def _no_infra(run) -> None:
    """Graded on the first try: no infra_error the clean-tree check turned into unresolved."""
    assert INFRA_ERROR not in run.log, run.text
    assert "patch's doing" not in run.grade.reason, run.grade.reason


@pytest.mark.docker
def test_an_honest_fix_with_2000_new_files_resolves(repo, task, image):
    assert sum(len(p) + 3 for p in MANY) > ARG_MAX_STRLEN  # more than one argv string holds
    patch = patch_of(repo, {"src/calc/ops.py": OPS_GOOD, **MANY})
    run = _grade(task, patch, image)
    _no_infra(run)
    assert run.grade.outcome is Outcome.RESOLVED, run.text
    assert run.grade.test_infra == []


@pytest.mark.docker
def test_the_bug_left_with_2000_new_files_is_unresolved_not_infra(repo, task, image):
    run = _grade(task, patch_of(repo, MANY), image)
    _no_infra(run)
    assert run.grade.outcome is Outcome.UNRESOLVED, run.text
    assert run.grade.f2p_failed == ["tests/test_ops.py::test_add"]


# A fixed copy of the package at the repository's root: `python -m pytest` puts the root first
# on sys.path, so it is imported instead of src/calc.
ROOT_COPY = {
    "calc/__init__.py": "",
    "calc/ops.py": OPS_GOOD,
    "calc/notes.txt": "a copy\n",
}


@pytest.mark.docker
def test_a_fixed_copy_shadowing_the_src_package_is_put_back(repo, task, image):
    patch = patch_of(repo, ROOT_COPY)
    old = _grade(task, patch, image, rules="swebench")
    assert old.grade.outcome is Outcome.RESOLVED, "the copy is imported under SWE-bench's rules"
    strict = _grade(task, patch, image)
    _no_infra(strict)
    assert strict.grade.outcome is Outcome.UNRESOLVED, strict.text
    assert sorted((c.path, c.restored) for c in strict.grade.test_infra) == [
        ("calc/__init__.py", True),
        ("calc/notes.txt", True),
        ("calc/ops.py", True),
    ]
    # The same fix made in src/calc is the repository's own and resolves.
    fix = _grade(task, task.gold_patch, image)
    assert fix.grade.outcome is Outcome.RESOLVED, fix.text
    assert fix.grade.test_infra == []


# --- on the host ------------------------------------------------------------------------------


def _probe(repo: Path, added: list[str], env: dict[str, str], tmp_path: Path) -> list[str]:
    listed = tmp_path / "added.list"
    listed.write_bytes(b"".join(p.encode() + b"\0" for p in added))
    res = subprocess.run(
        [sys.executable, "-I", str(SHADOW_PROBE), str(repo), "--paths-from", str(listed)],
        capture_output=True,
        text=True,
        cwd=repo,
        env=env,
        check=True,
    )
    return res.stdout.splitlines()


def _host_repo(tmp_path: Path, added: dict[str, str]) -> Path:
    repo = tmp_path / "repo"
    for rel, text in {"src/calc/__init__.py": "", "src/calc/ops.py": OPS_BUG, **added}.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    return repo


def test_the_probe_flags_a_root_copy_of_the_src_package_and_all_its_files(tmp_path):
    added = {
        "calc/__init__.py": "",
        "calc/ops.py": OPS_GOOD,
        "calc/sub/__init__.py": "",
        "calc/notes.txt": "",
        "src/calc/extra.py": "",  # a new module inside an existing package: calc.extra
        "src/calc/sub2/__init__.py": "",  # a new subpackage: calc.sub2
        "brand_new_module.py": "",
        "docs/conf.py": "",
    }
    repo = _host_repo(tmp_path, added)
    env = {**os.environ, "PYTHONPATH": str(repo / "src")}
    found = _probe(repo, list(added), env, tmp_path)
    assert found == ["calc/__init__.py", "calc/ops.py", "calc/sub/__init__.py", "calc/notes.txt"]
    # Without src/ on sys.path nothing named calc is importable from elsewhere.
    env.pop("PYTHONPATH")
    assert _probe(repo, list(added), env, tmp_path) == []


def test_a_new_module_inside_an_existing_package_is_not_flagged(tmp_path):
    added = {"src/calc/json.py": "", "src/calc/pytest.py": "", "src/calc/new/__init__.py": ""}
    repo = _host_repo(tmp_path, added)
    env = {**os.environ, "PYTHONPATH": str(repo / "src")}
    assert _probe(repo, list(added), env, tmp_path) == []
    # A top-level one is: the standard library's json, the environment's pytest.
    (repo / "json.py").write_text("")
    (repo / "pytest.py").write_text("")
    assert _probe(repo, ["src/calc/json.py", "json.py", "pytest.py"], env, tmp_path) == [
        "json.py",
        "pytest.py",
    ]


def test_the_grader_runs_the_probe_isolated_with_its_paths_in_a_file(tmp_path, monkeypatch):
    """`_shadowing` as the grader calls it: thousands of paths through a file, PYTHONPATH read
    as text, and a sitecustomize.py the patch put on PYTHONPATH never runs (the probe is root's)."""
    added = {"calc/__init__.py": "", "calc/ops.py": OPS_GOOD, "src/sitecustomize.py": ""}
    added.update({f"data/module_{i:05d}_with_a_long_name.py": "" for i in range(3000)})
    repo = _host_repo(tmp_path, added)
    marker = tmp_path / "ran"
    (repo / "src" / "sitecustomize.py").write_text(
        f"import sys\nopen({str(marker)!r}, 'a').write(sys.argv[0] + '\\n')\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(repo / "src"))
    sandbox = backend_class("local")(None)
    try:
        found = _shadowing(sandbox, sys.executable, list(added), str(repo))
    finally:
        sandbox.close()
    assert "calc/__init__.py" in found and "calc/ops.py" in found, found
    # (The local sandbox's own helper, started without -I, ran it: a marker it writes is fine.)
    ran = marker.read_text().splitlines() if marker.exists() else []
    assert not [p for p in ran if "deepswe_shadow" in p], ran


def test_a_long_command_runs_from_a_file(tmp_path):
    """The helper runs a command over 64 KiB from a temporary file: no E2BIG, same stdin
    (none), same output and status; the file is gone afterwards."""
    sandbox = backend_class("local")(None)
    try:
        cmd = "x=0\n" + "x=$((x+1))\n" * 30000 + 'echo "$x"; cat; echo done >&2; exit 7'
        assert len(cmd) > 2 * ARG_MAX_STRLEN
        r = sandbox.run(cmd, cwd=str(tmp_path), timeout=60)
    finally:
        sandbox.close()
    assert (r.exit_code, r.stdout, r.stderr) == (7, "30000\n", "done\n")


@pytest.mark.docker
def test_a_long_command_runs_in_a_container(base_image):
    """The same in a Docker sandbox (the Kubernetes backend runs the same helper)."""
    from deepswe.env.sandbox.docker import DockerSandbox

    cmd = "x=0\n" + "x=$((x+1))\n" * 30000 + 'echo "$x"; ls /tmp | grep -c deepswe-cmd-'
    with DockerSandbox(base_image, LIMITS, workdir="/") as sandbox:
        r = sandbox.run(cmd, timeout=60)
        left = sandbox.run("ls /tmp | grep -c deepswe-cmd-", timeout=30)
    assert (r.exit_code, r.stdout) == (0, "30000\n1\n"), r.output  # its file, while it runs
    assert left.stdout == "0\n", left.output  # removed afterwards


def test_the_tree_check_takes_thousands_of_paths(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / ".gitignore").write_text("ignored/\n")
    paths = [
        f"data/records/sample_{i:05d}_with_a_rather_long_descriptive_name.txt" for i in range(4000)
    ]
    sandbox = backend_class("local")(None)
    try:
        assert check_in_tree(sandbox, paths, str(repo)) == ""
        assert "ignores" in check_in_tree(sandbox, [*paths, "ignored/x.py"], str(repo))
        # A check that fails on a sandbox that still answers is the patch's: refused.
        why = check_in_tree(sandbox, paths, str(tmp_path / "no-such-repo"))
    finally:
        sandbox.close()
    assert "could not be checked" in why
