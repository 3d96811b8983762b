"""SWE-bench rows -> tasks our registry-free images can build, using swebench's own specs, with a
tiny local git repository standing in for the --repo-mirror clone (no network)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from deepswe.data.loaders.swebench import swebench_row_to_task
from deepswe.data.toy import commit_repo, git
from deepswe.env.recipes.swebench.environment import (
    UnsupportedEnv,
    build_from_source,
    directives_of,
    prepare,
)
from deepswe.env.recipes.swebench.install import (
    CONDA_TOOLS_DEFAULT,
    SETUP_COMMIT,
    apt_and_commands,
    conda_to_pip,
    has_c_sources,
    requirements_from_mirror,
)
from deepswe.eval.config import EvalConfig
from deepswe.eval.runner import run_all
from deepswe.eval.store import EpisodeStatus, RunStore

TEST_PATCH = (
    "diff --git a/tests/model_fields/test_decimal.py b/tests/model_fields/test_decimal.py\n"
    "--- a/tests/model_fields/test_decimal.py\n+++ b/tests/model_fields/test_decimal.py\n"
    "@@ -1 +1,2 @@\n x = 1\n+y = 2\n"
    "diff --git a/docs/notes.txt b/docs/notes.txt\n--- a/docs/notes.txt\n+++ b/docs/notes.txt\n"
    "@@ -1 +1,2 @@\n a\n+b\n"
)


def _row(repo: str, version: str, base: str, env_commit: str | None = None, test_patch=TEST_PATCH):
    return {
        "repo": repo,
        "instance_id": f"{repo.replace('/', '__')}-{version.replace('.', '')}1",
        "base_commit": base,
        "environment_setup_commit": env_commit or base,
        "version": version,
        "problem_statement": "it breaks",
        "patch": "",
        "test_patch": test_patch,
        "FAIL_TO_PASS": json.dumps(["test_a (model_fields.test_decimal.T)"]),
        "PASS_TO_PASS": "[]",
    }


@pytest.fixture
def django_mirror(tmp_path) -> tuple[Path, str, str]:
    mirror = tmp_path / "mirror"
    repo = mirror / "django__django"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    base = commit_repo(
        repo,
        {
            "tests/requirements/py3.txt": "old-dep==1\n",
            "tests/model_fields/test_decimal.py": "x = 1\n",
        },
        "base",
    )
    # swebench reads requirements at environment_setup_commit, not base_commit; the include
    # comes first and the lines it drops (editable self, comments) are dropped.
    env = commit_repo(
        repo,
        {
            "tests/requirements/py3.txt": "-e .\n# pinned\nasgiref >= 3.7.0\n-r extra.txt\nsqlparse>=0.3.1\n",
            "tests/requirements/extra.txt": "pytz\n",
        },
        "env setup",
    )
    return mirror, base, env


def test_django_maps_to_bookworm_with_its_specs_and_directives(django_mirror):
    mirror, base, env = django_mirror
    row = swebench_row_to_task(_row("django/django", "5.1", base, env))
    task = build_from_source(row, mirror, probe=False)
    spec = task.environment
    assert task.image is None and spec.base == "bookworm"  # django 5.1: python 3.11
    assert spec.source == str(mirror / "django__django")
    # swebench's order: conda's tools, the requirements file, then (none here) pip_packages
    assert spec.pip == CONDA_TOOLS_DEFAULT
    assert spec.pip_after == [["pytz", "asgiref >= 3.7.0", "sqlparse>=0.3.1"]]
    assert spec.install == ["python -m pip install -e .", SETUP_COMMIT]
    assert spec.apt == ["locales"] or spec.apt == []  # 5.1 has no locale step
    # test_cmd + Django's dotted directive; docs/notes.txt is not a test file
    assert (
        "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 model_fields.test_decimal"
        in task.test_spec.command
    )
    assert task.test_spec.log_parser == "swebench"
    assert directives_of(task) == ["model_fields.test_decimal"]


def test_python_36_without_a_host_interpreter_is_unsupported_not_graded(
    django_mirror, tmp_path, monkeypatch
):
    mirror, base, _ = django_mirror
    monkeypatch.delenv("DEEPSWE_HOST_PYTHONS", raising=False)
    old = swebench_row_to_task(_row("django/django", "3.0", base))  # swebench: python 3.6
    with pytest.raises(UnsupportedEnv, match=r"needs Python 3\.6: .*DEEPSWE_HOST_PYTHONS"):
        prepare(old, mode="build", mirror=mirror)
    # the runner records it per run as unsupported_env, with no episode and no grade
    store = RunStore(tmp_path / "run")
    counts = run_all([old], EvalConfig(runs=2), store, unsupported={old.instance_id: "python 3.6"})
    recs = store.records()
    assert counts == {"unsupported_env": 2}
    assert [(r.status, r.outcome, r.trajectory) for r in recs] == [
        (EpisodeStatus.UNSUPPORTED_ENV, None, None)
    ] * 2


def test_a_conda_environment_yml_is_read_from_the_mirror_and_translated(tmp_path, monkeypatch):
    """xarray's environment.yml (conda-forge names, a pip section) at environment_setup_commit
    becomes pip steps in conda's order, Debian packages for the rest; cdms2, which nothing
    serves, keeps out only the instance whose graded tests name it."""
    monkeypatch.setenv("DEEPSWE_HOST_PYTHONS", str(_fake_host_pythons(tmp_path, "3.10")))
    repo = tmp_path / "mirror" / "pydata__xarray"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    yml = (
        "name: xarray-tests\nchannels:\n  - conda-forge\n  - nodefaults\ndependencies:\n"
        "  - cdms2\n  - cfgrib\n  - dask-core\n  - hdf5\n  - iris\n  - matplotlib-base\n"
        "  - numpy<1.24\n  - python=3.8\n  - pip\n  - pip:\n      - numbagg\n"
    )
    base = commit_repo(repo, {"ci/requirements/environment.yml": yml}, "env")
    row = _row("pydata/xarray", "2022.06", base, test_patch="")
    task = build_from_source(swebench_row_to_task(row), tmp_path / "mirror", probe=False)
    spec = task.environment
    assert spec.python == "3.10" and spec.base == "bookworm"
    assert spec.pip_after[:2] == [
        ["cfgrib", "dask", "scitools-iris", "matplotlib", "numpy<1.24"],
        ["numbagg"],
    ]
    assert spec.pip_after[2][0] == "numpy==1.23.0"  # swebench's pip_packages, one call, last
    assert spec.apt == ["libeccodes0"]  # the library cfgrib loads
    row["PASS_TO_PASS"] = json.dumps(["xarray/tests/test_dataarray.py::T::test_to_and_from_cdms2"])
    with pytest.raises(UnsupportedEnv, match="needs cdms2"):
        build_from_source(swebench_row_to_task(row), tmp_path / "mirror", probe=False)


def _fake_host_pythons(tmp_path: Path, version: str) -> Path:
    prefix = tmp_path / "pythons" / f"{version}.13"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "python3").write_text("")
    return tmp_path / "pythons"


def test_requests_uses_bullseye_and_pytest_directives(tmp_path):
    patch = "diff --git a/tests/test_requests.py b/tests/test_requests.py\n--- a/tests/test_requests.py\n+++ b/tests/test_requests.py\n"
    task = swebench_row_to_task(_row("psf/requests", "2.31", "abc", test_patch=patch))
    built = build_from_source(task, None, probe=False)  # no mirror: the GitHub URL is the source
    assert built.environment.base == "bullseye" and built.environment.pip_after == [["pytest"]]
    assert built.environment.source == "https://github.com/psf/requests.git"
    assert built.test_spec.command.endswith("pytest -rA tests/test_requests.py\n)")


def test_requirements_follow_swebench_includes_and_drop_inline_comments(tmp_path):
    """Regressions: `-r ../x.txt` read nothing (matplotlib 3.4's dev requirements are only
    such includes), and a line with an inline comment reached pip as a requirement
    ("Invalid requirement: 'astroid==2.12.13  # Pinned ...'", pylint)."""
    repo = tmp_path / "matplotlib__matplotlib"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    commit = commit_repo(
        repo,
        {
            "requirements/dev/dev-requirements.txt": "-r ../testing/all.txt\nastroid==2.8.0  # pinned\n",
            "requirements/testing/all.txt": "pytest\n# a comment\n-e .\n",
        },
        "reqs",
    )
    task = swebench_row_to_task(_row("matplotlib/matplotlib", "3.4", commit))
    assert requirements_from_mirror(task, repo) == ["pytest", "astroid==2.8.0"]


def test_apt_lines_become_base_image_packages_and_unknown_downloads_are_unsupported():
    task = swebench_row_to_task(_row("sphinx-doc/sphinx", "7.2", "abc"))
    specs = {
        "pre_install": ["apt-get update && apt-get install -y graphviz", "sed -i 's/a/b/' tox.ini"],
        "eval_commands": ["export LANG=en_US.UTF-8"],
    }
    assert apt_and_commands(task, specs) == (["graphviz", "locales"], ["sed -i 's/a/b/' tox.ini"])
    with pytest.raises(UnsupportedEnv, match="downloads https://x/qhull.tgz"):
        apt_and_commands(task, {"pre_install": ["wget -O /tmp/q.tgz https://x/qhull.tgz"]})


def test_c_sources_outside_tests_ask_for_a_compiler(tmp_path):
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    only_test = commit_repo(repo, {"tests/roots/ext/fixture.pyx": "", "pkg/mod.py": ""}, "a")
    compiled = commit_repo(repo, {"pkg/_speedups.c": "int x;\n"}, "b")
    assert not has_c_sources(repo, only_test) and has_c_sources(repo, compiled)


def test_conda_package_lists_become_pip_requirements():
    """conda's `=0.29` is any 0.29.x (its match-spec rule), not pip's 0.29.0."""
    assert conda_to_pip("'numpy==1.19.2' 'scipy==1.5.2' cython=0.29 pytest", "3.9") == [
        "numpy==1.19.2",
        "scipy==1.5.2",
        "cython==0.29.*",
        "pytest",
    ]


RUNTESTS = '''#!/usr/bin/env python
"""A stand-in for Django's runner: unittest at verbosity 2 over dotted labels under tests/."""
import sys
import unittest

sys.path.insert(0, "tests")
labels = [a for a in sys.argv[1:] if not a.startswith("-") and a != "1"]
suite = unittest.defaultTestLoader.loadTestsFromNames(labels)
unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(suite)
'''
FIELD_BUG = "def quantize(x):\n    return round(x, 1)\n"
FIELD_OK = "def quantize(x):\n    return round(x, 2)\n"
TEST_OLD = "import unittest\n\nfrom minidj import quantize\n\n\nclass T(unittest.TestCase):\n    def test_int(self):\n        self.assertEqual(quantize(2), 2)\n"
TEST_NEW = (
    TEST_OLD + "\n    def test_two_places(self):\n        self.assertEqual(quantize(1.234), 1.23)\n"
)


def _diff(repo: Path, path: str, new: str) -> str:
    old = (repo / path).read_text()
    (repo / path).write_text(new)
    out = subprocess.run(
        ["git", "-C", str(repo), "diff", "--", path], capture_output=True, text=True
    ).stdout
    (repo / path).write_text(old)
    return out


@pytest.mark.docker
def test_a_django_style_instance_builds_from_the_mirror_and_grades_with_swebench_rules(tmp_path):
    """End to end with no registry: specs -> our bookworm image -> gold resolved, empty not."""
    from deepswe.env.episode import grade_patch
    from deepswe.env.images.task import ensure_task_image
    from deepswe.env.sandbox import SandboxLimits

    repo = tmp_path / "mirror" / "django__django"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    files = {
        "setup.py": "from setuptools import setup\nsetup(name='minidj', version='5.1', py_modules=['minidj'])\n",
        "minidj.py": FIELD_BUG,
        "tests/runtests.py": RUNTESTS,
        "tests/model_fields/__init__.py": "",
        "tests/model_fields/test_decimal.py": TEST_OLD,
        "tests/requirements/py3.txt": "setuptools>=68\nwheel\n",
    }
    base = commit_repo(repo, files, "base")
    (repo / "tests/runtests.py").chmod(0o755)
    base = commit_repo(repo, {}, "exec bit") if git(repo, "status", "--porcelain") else base
    gold, tpatch = (
        _diff(repo, "minidj.py", FIELD_OK),
        _diff(repo, "tests/model_fields/test_decimal.py", TEST_NEW),
    )
    row = _row("django/django", "5.1", base, test_patch=tpatch)
    row["patch"] = gold
    row["FAIL_TO_PASS"] = json.dumps(
        ["test_two_places (model_fields.test_decimal.T.test_two_places)"]
    )
    row["PASS_TO_PASS"] = json.dumps(["test_int (model_fields.test_decimal.T.test_int)"])
    task = build_from_source(swebench_row_to_task(row), tmp_path / "mirror")
    ensure_task_image(task, log=lambda _: None)
    limits = SandboxLimits(memory="1g", pids=256)
    run = grade_patch(task, gold, sandbox_limits=limits)
    result, log = run.grade, run.log
    assert result.outcome.value == "resolved", log[-2000:]
    assert "re-install failed" not in log
    run = grade_patch(task, "", sandbox_limits=limits)
    result, log = run.grade, run.log
    assert result.outcome.value == "unresolved" and result.f2p_failed, log[-2000:]


def test_official_image_mode_runs_in_its_conda_env(django_mirror):
    mirror, base, env = django_mirror
    task = swebench_row_to_task(_row("django/django", "5.1", base, env))
    on_image = prepare(task, mode="auto", mirror=mirror, image_exists=lambda name: True)
    assert on_image.image == "swebench/sweb.eval.x86_64.django_1776_django-511"
    assert on_image.environment is None
    assert on_image.test_spec.command.startswith(
        "( source /opt/miniconda3/bin/activate && conda activate testbed"
    )
    # no such image in the engine: built from source instead
    built = prepare(task, mode="auto", mirror=mirror, image_exists=lambda name: False, probe=False)
    assert built.image is None and built.environment.base == "bookworm"
