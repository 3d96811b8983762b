"""swe-mini synthesis end to end on the host, on a small real sdist built here: real git, real
pytest runs, real mutants. Checks determinism (same seed, fresh cache -> same bytes and SHAs) and
that every kept task really is a bug: its FAIL_TO_PASS tests fail at base_commit and pass with
the gold patch."""

from __future__ import annotations

import hashlib
import io
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from deepswe.data.swemini import gitrepo
from deepswe.data.swemini.manifest import Manifest, Project
from deepswe.data.swemini.runner import run_pytest
from deepswe.data.swemini.sources import SourceError, fetch, repo_path
from deepswe.data.swemini.synth import synth_project

pytestmark = pytest.mark.slow  # ~25 s on an idle machine: a few dozen real pytest runs

FILES = {
    "tinycalc/__init__.py": "",
    "tinycalc/ops.py": (
        "def clamp(x, lo=0, hi=10):\n"
        "    if x < lo:\n"
        "        return lo\n"
        "    if x > hi:\n"
        "        return hi\n"
        "    return x\n\n\n"
        "def mean(values):\n"
        "    if not values:\n"
        '        raise ValueError("empty")\n'
        "    return sum(values) / len(values)\n"
    ),
    "tests/test_ops.py": (
        "import pytest\n\nfrom tinycalc import ops\n\n\n"
        "def test_clamp_low():\n    assert ops.clamp(-5) == 0\n\n\n"
        "def test_clamp_high():\n    assert ops.clamp(50) == 10\n\n\n"
        "def test_clamp_inside():\n    assert ops.clamp(5, 0, 10) == 5\n\n\n"
        "def test_clamp_edges():\n    assert ops.clamp(0) == 0 and ops.clamp(10) == 10\n\n\n"
        "def test_mean():\n    assert ops.mean([1, 2, 3]) == 2\n\n\n"
        "def test_mean_empty():\n    with pytest.raises(ValueError):\n        ops.mean([])\n"
    ),
    ".gitignore": "tests/\n",  # an sdist's own ignore rules must not drop files from the repo
    "PKG-INFO": "Name: tinycalc\nVersion: 1.0\n",
}


def _sdist(path: Path) -> str:
    with tarfile.open(path, "w:gz") as tf:
        for rel, text in FILES.items():
            info = tarfile.TarInfo(f"tinycalc-1.0/{rel}")
            data = text.encode()
            info.size, info.mode = len(data), 0o644
            tf.addfile(info, io.BytesIO(data))
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def sdist(tmp_path_factory) -> tuple[Path, str]:
    path = tmp_path_factory.mktemp("sdist") / "tinycalc-1.0.tar.gz"
    return path, _sdist(path)


def _setup(cache: Path, sdist) -> Manifest:
    archive, sha = sdist
    dest = cache / "sdists" / "tinycalc-1.0"
    dest.mkdir(parents=True)
    (dest / archive.name).write_bytes(archive.read_bytes())  # a cache hit: no pip, no network
    project = Project(
        name="tinycalc",
        version="1.0",
        sha256=sha,
        src=["tinycalc"],
        tests=["tests"],
        pythonpath=".",
        split="train",
    )
    return Manifest(seed=0, pytest="pytest", projects=[project])


@pytest.fixture(autouse=True)
def _host_python(monkeypatch):
    # the test venv already has pytest: no venv is created, nothing is downloaded
    monkeypatch.setenv("DEEPSWE_SWE_MINI_PYTHON", sys.executable)


def _synth(cache: Path, manifest: Manifest, seed: int = 7):
    return synth_project(
        manifest, manifest.projects[0], seed=seed, quota=2, max_tries=5, cache=cache
    )


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory, sdist):
    cache = tmp_path_factory.mktemp("synth")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DEEPSWE_SWE_MINI_PYTHON", sys.executable)
        manifest = _setup(cache, sdist)
        return cache, manifest, _synth(cache, manifest)


def test_kept_mutants_are_real_bugs_fixed_by_their_gold_patch(tmp_path, synthesized):
    cache, manifest, result = synthesized
    assert len(result.tasks) == 2 and result.tests == 6
    repo = repo_path(manifest.projects[0], cache)
    for task in result.tasks:
        assert task.hidden.fail_to_pass and set(task.hidden.fail_to_pass).isdisjoint(
            task.hidden.pass_to_pass
        )
        assert (
            gitrepo.git(repo, "log", "-1", "--format=%B", task.base_commit).strip()
            == "swe-mini base"
        )
        assert "tests/" not in task.gold_patch and task.environment.source == "repos/tinycalc-1.0"
        checkout = tmp_path / task.instance_id
        subprocess.run(
            ["git", "worktree", "add", "-q", str(checkout), task.base_commit], cwd=repo, check=True
        )
        files = task.test_spec.command.split()[-1:]
        before = run_pytest(Path(sys.executable), checkout, ".", files).statuses
        assert {before[t] for t in task.hidden.fail_to_pass} <= {"FAILED", "ERROR"}
        assert {before[t] for t in task.hidden.pass_to_pass} <= {"PASSED"}
        subprocess.run(["git", "apply"], input=task.gold_patch.encode(), cwd=checkout, check=True)
        after = run_pytest(Path(sys.executable), checkout, ".", files).statuses
        assert all(
            after[t] == "PASSED" for t in task.hidden.fail_to_pass + task.hidden.pass_to_pass
        )
        for name in ("test_ops", "test_clamp", "test_mean"):
            assert name not in task.problem_statement


def test_same_seed_in_a_fresh_cache_gives_identical_tasks_and_shas(tmp_path, sdist, synthesized):
    cache, manifest, first = synthesized
    second = _synth(tmp_path / "b", _setup(tmp_path / "b", sdist))
    assert [t.model_dump_json() for t in first.tasks] == [t.model_dump_json() for t in second.tasks]
    other = _synth(cache, manifest, seed=8)
    assert [t.instance_id for t in other.tasks] != [t.instance_id for t in first.tasks]


def test_fetch_recreates_every_base_commit_from_the_stored_gold_patch(tmp_path, sdist, synthesized):
    tasks = synthesized[2].tasks
    fresh = tmp_path / "fresh"
    manifest = _setup(fresh, sdist)
    fetch(manifest, tasks, cache=fresh, log=lambda _: None)
    repo = repo_path(manifest.projects[0], fresh)
    for task in tasks:
        ref = gitrepo.git(repo, "rev-parse", f"refs/heads/swe-mini/{task.instance_id}").strip()
        assert ref == task.base_commit
    tampered = tasks[0].model_copy(update={"gold_patch": tasks[1].gold_patch})
    with pytest.raises(SourceError, match="rebuilt base commit"):
        fetch(manifest, [tampered], cache=fresh, log=lambda _: None)


def test_a_sdist_with_another_hash_is_refused(tmp_path, sdist):
    manifest = _setup(tmp_path / "cache", sdist)
    bad = manifest.projects[0].model_copy(update={"sha256": "0" * 64, "version": "0.0.0-none"})
    with pytest.raises(SourceError):
        fetch(
            Manifest(pytest="pytest", projects=[bad]), cache=tmp_path / "cache", log=lambda _: None
        )


def test_repository_sha_depends_only_on_the_sdist(tmp_path, sdist):
    archive, _ = sdist
    a = gitrepo.init_from_sdist(archive, tmp_path / "a", "tinycalc", "1.0")
    b = gitrepo.init_from_sdist(archive, tmp_path / "b", "tinycalc", "1.0")
    assert a == b
    assert (tmp_path / "a" / "tests" / "test_ops.py").exists()
    assert "tests/test_ops.py" in gitrepo.git(tmp_path / "a", "ls-files")


def test_two_workers_on_a_cold_cache_share_one_venv(tmp_path, monkeypatch):
    """Regression: `synth` on an empty cache crashed with "OSError: Directory not empty:
    'setuptools'": its two worker processes both cleared and created the shared venv."""
    from concurrent.futures import ProcessPoolExecutor

    from deepswe.data.swemini.runner import ensure_venv

    monkeypatch.delenv("DEEPSWE_SWE_MINI_PYTHON", raising=False)
    path = tmp_path / "venv"
    with ProcessPoolExecutor(max_workers=2) as pool:
        pythons = list(pool.map(ensure_venv, [path, path], ["six==1.16.0"] * 2))
    assert pythons == [path / "bin" / "python"] * 2
    done = subprocess.run(
        [str(pythons[0]), "-c", "import six; print(six.__version__)"],
        capture_output=True,
        text=True,
    )
    assert done.stdout.strip() == "1.16.0", done.stderr
