"""R2E-Gym rows -> tasks our registry-free images can build (R2E-Gym's recipe per repository),
on the five real rows in the shared fixtures, with tiny local git repositories standing in for
the --repo-mirror clones. Nothing is built here: bench/r2e_gym.py builds real rows."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from deepswe.data.loaders.r2e_gym import R2E_REPO_OWNERS, load_r2e_gym, r2e_test_command
from deepswe.data.toy import commit_repo, git
from deepswe.env.recipes.r2e_gym.environment import (
    TOOLS,
    R2EEnvError,
    R2EUnsupported,
    attempt_for,
    build_from_source,
    interpreter_for,
    pip_steps,
    prepare,
)
from deepswe.env.recipes.r2e_gym.recipes import RECIPES, Attempt, Packages, RequirementsFile
from deepswe.env.recipes.r2e_gym.requirements import makefile_requirements, read_requirements

FIXTURES = Path(os.environ["DEEPSWE_R2E_FIXTURES"])

# RepoAnalysisArgs.tests_cmd (R2E-Gym src/r2egym/repo_analysis/repo_analysis_args.py), verbatim.
R2E_TESTS_CMD = (
    "PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' "
    ".venv/bin/python -W ignore -m pytest -rA r2e_tests"
)
R2E_ORANGE3_TESTS_CMD = (
    "QT_QPA_PLATFORM=minimal PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' "
    "xvfb-run --auto-servernum .venv/bin/python -W ignore -m pytest -rA r2e_tests"
)


def _tasks() -> dict:
    if not FIXTURES.is_dir():
        pytest.skip(f"no R2E-Gym fixtures at {FIXTURES} (set DEEPSWE_R2E_FIXTURES)")
    return {t.instance_id: t for t in load_r2e_gym(FIXTURES)}


def _mirror_for(tmp_path: Path, task, files: dict[str, str]) -> Path:
    """A clone at mirror/<owner>__<name> whose HEAD^ is the row's base and HEAD its commit."""
    mirror = tmp_path / "mirror"
    repo = mirror / task.repo.replace("/", "__")
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    commit_repo(repo, files, "base")
    head = commit_repo(repo, {"CHANGES": "fix\n"}, "fix")
    return mirror, task.model_copy(update={"base_commit": f"{head}^"})


@pytest.fixture
def host_pythons(tmp_path, monkeypatch) -> Path:
    """A folder of CPython prefixes as $DEEPSWE_HOST_PYTHONS expects (3.7, 3.8, 3.10)."""
    root = tmp_path / "pythons"
    for version in ("3.7.16", "3.8.18", "3.10.13"):
        (root / version / "bin").mkdir(parents=True)
        (root / version / "bin" / "python3").write_text("")
    monkeypatch.setenv("DEEPSWE_HOST_PYTHONS", str(root))
    return root


def test_every_r2e_repository_has_a_recipe_from_r2e_gym_files():
    assert set(R2E_REPO_OWNERS) == set(RECIPES)
    for name, recipe in RECIPES.items():
        assert recipe.attempts, name
        assert f"install_utils/{name}_install.sh" in recipe.sources, name
        assert any(s.endswith(f"Dockerfile.{name}") for s in recipe.sources), name


def test_each_repository_is_tested_with_r2e_gyms_tests_cmd_verbatim():
    for name in RECIPES:
        want = R2E_ORANGE3_TESTS_CMD if name == "orange3" else R2E_TESTS_CMD
        assert r2e_test_command(name) == want, name


def test_pillow_row_maps_to_debians_python_with_its_install(tmp_path, monkeypatch):
    monkeypatch.delenv("DEEPSWE_R2E_INDEX_DATE", raising=False)
    row = _tasks()["pillow_0836e388"]
    mirror, row = _mirror_for(tmp_path, row, {"setup.py": "setup()\n"})
    task = build_from_source(row, mirror)
    spec = task.environment
    assert task.image is None
    assert (spec.base, spec.python) == ("bullseye", None)  # pillow_install.sh: uv venv --python 3.9
    assert spec.source == str(mirror / "python-pillow__Pillow")
    assert {"build-essential", "python3-dev", "libjpeg-dev", "libwebp-dev"} <= set(spec.apt)
    assert spec.pip == list(TOOLS)
    first = ["setuptools", "pytest", "pytest-cov", "PyQt5"]
    assert spec.pip_after == [
        ["--upgrade", *first],  # into uv's empty venv: what it names comes out newest
        [*first, "chardet"],  # setup_env's `uv pip install chardet`, fitted to what is there
    ]
    assert spec.venv_in_testbed and "pip install -e . --no-build-isolation" in spec.install
    assert spec.index_date == "2025-01-20T00:00:00Z"
    assert task.test_spec == row.test_spec  # R2E-Gym's tests_cmd, untouched


def test_a_host_release_nearer_r2e_gyms_is_preferred_to_debians(tmp_path, monkeypatch):
    """R2E-Gym's aiohttp and Pillow rows ran uv's CPython 3.9.21 (their setup logs); bullseye
    ships 3.9.2, whose asyncio names other lines in every traceback. A host 3.9.18 is nearer."""
    row = _tasks()["pillow_0836e388"]
    assert row.metadata["r2e_setup_python_release"] == "3.9.21"
    root = tmp_path / "pythons"
    monkeypatch.setenv("DEEPSWE_HOST_PYTHONS", str(root))
    assert interpreter_for(row, "3.9") == ("bullseye", None)  # no host 3.9: Debian's
    (root / "3.9.18" / "bin").mkdir(parents=True)
    (root / "3.9.18" / "bin" / "python3").write_text("")
    assert interpreter_for(row, "3.9") == ("bookworm", "3.9")
    unknown = row.model_copy(update={"metadata": {**row.metadata, "r2e_setup_python_release": ""}})
    assert interpreter_for(unknown, "3.9") == ("bullseye", None)  # no release named: Debian's
    older = row.model_copy(
        update={"metadata": {**row.metadata, "r2e_setup_python_release": "3.9.1"}}
    )
    assert interpreter_for(older, "3.9") == ("bullseye", None)  # Debian's 3.9.2 is nearer


def test_a_python_debian_lacks_needs_a_host_interpreter(tmp_path, monkeypatch, host_pythons):
    row = _tasks()["orange3_2d9617bd"]
    files = {
        "requirements-core.txt": "numpy>=1.9.0  # arrays\nfuncsigs; python_version < '3.3'\n",
        "requirements-gui.txt": "AnyQt>=0.0.8\n",
        "requirements-sql.txt": "psycopg2\n",
    }
    mirror, row = _mirror_for(tmp_path, row, files)
    spec = build_from_source(row, mirror).environment
    assert (spec.base, spec.python) == ("bookworm", "3.7")  # orange3_install.sh tries 3.7 first
    assert "python3-dev" not in spec.apt and {"xvfb", "xauth", "libpq-dev"} <= set(spec.apt)
    # the files' lines as pip arguments, markers decided for 3.7; no requirements-opt.txt here
    assert spec.pip_after[1:4] == [["numpy>=1.9.0"], ["AnyQt>=0.0.8"], ["psycopg2"]]
    assert spec.pip_after[4][-2:] == ["scipy", "scikit-learn"]
    assert spec.pip_after[4][:-2] == [
        "setuptools<60",
        "numpy<1.18",
        "wheel",
        "cython<0.30",
        "pytest",
        "PyQt5>=5.12,!=5.15.1",
        "PyQtWebEngine>=5.12",
        "numpy>=1.9.0",
        "AnyQt>=0.0.8",
        "psycopg2",
    ]
    assert spec.install[-1] == "ln -s Orange/tests/datasets/ datasets"
    monkeypatch.delenv("DEEPSWE_HOST_PYTHONS")
    with pytest.raises(R2EUnsupported, match="needs Python 3.7"):
        build_from_source(row, mirror)


def test_the_attempt_is_the_one_the_rows_setup_log_names(host_pythons):
    row = _tasks()["orange3_56706b60"]
    recipe = RECIPES["orange3"]
    assert attempt_for(row, recipe).python == "3.7"
    later = row.model_copy(update={"metadata": {**row.metadata, "r2e_setup_python": "3.10"}})
    assert attempt_for(later, recipe).python == "3.10"
    odd = row.model_copy(update={"metadata": {**row.metadata, "r2e_setup_python": "3.6"}})
    with pytest.raises(R2EUnsupported, match="tries 3.7, 3.8, 3.10"):
        attempt_for(odd, recipe)


def test_requirement_files_follow_includes_constraints_and_hash_blocks(tmp_path):
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    head = commit_repo(
        repo,
        {
            "requirements/dev.txt": "-r base.txt\n-c ../constraints.txt\n-e .\npytest \\\n"
            "    --hash=sha256:abc\nuvloop; sys_platform == 'win32'\n",
            "requirements/base.txt": "attrs\n",
            "constraints.txt": "attrs==23.1.0\npytest==8.1.1\n",
        },
        "reqs",
    )
    found = read_requirements(repo, head, "requirements/dev.txt", "3.9")
    assert found.lines == ["attrs", "pytest"]
    assert found.pinned() == ["attrs==23.1.0", "pytest==8.1.1"]
    assert read_requirements(repo, head, "missing.txt", "3.9") is None


def test_a_makefile_target_installs_the_lock_of_its_requirements(tmp_path):
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    head = commit_repo(
        repo,
        {
            "Makefile": ".install-deps: .install-cython\n"
            "\t@python -m pip install -r requirements/dev.in -c requirements/dev.txt\n"
            "\t@touch .install-deps\n\ndoc:\n\tpip install -r requirements/doc.txt\n",
            "requirements/dev.in": "pytest\n",
            "requirements/dev.txt": "pytest==8.1.1\npluggy==1.5.0\n",
            "requirements/doc.txt": "sphinx\n",
        },
        "make",
    )
    got = makefile_requirements(repo, head, (".install-cython", ".install-deps"), "3.9")
    assert got == ["pytest==8.1.1", "pluggy==1.5.0"]  # doc's line is not .develop's


def test_pip_steps_skip_an_absent_optional_file_and_refuse_an_absent_one(tmp_path):
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    head = commit_repo(repo, {"requirements.txt": "six\n"}, "reqs")
    attempt = Attempt(
        "3.9",
        (
            RequirementsFile("requirements.txt"),
            RequirementsFile("opt.txt", optional=True),
            Packages(("pytest",)),
            Packages(("wheel",), upgrade=True),
        ),
        (),
    )
    assert pip_steps(attempt, repo, head) == [
        list(TOOLS),
        ["--upgrade", "six"],
        ["six", "pytest"],
        ["--upgrade", "wheel"],
        ["six", "pytest", "wheel", "chardet"],
    ]
    missing = Attempt("3.9", (RequirementsFile("nope.txt"),), ())
    with pytest.raises(R2EEnvError, match="nope.txt does not exist"):
        pip_steps(missing, repo, head)


def test_a_row_needing_submodules_takes_them_from_the_mirror_else_is_unsupported(
    tmp_path, host_pythons
):
    row = _tasks()["orange3_2d9617bd"]
    url = "https://github.com/example/svml.git"
    gitmodules = (
        '[submodule "doc/theme"]\n\tpath = doc/theme\n\turl = https://example.org/t.git\n'
        f'[submodule "svml"]\n\tpath = Orange/svml\n\turl = {url}\n'
    )
    files = {
        ".gitmodules": gitmodules,
        "requirements-core.txt": "",
        "requirements-gui.txt": "",
        "requirements-sql.txt": "",
    }
    mirror, row = _mirror_for(tmp_path, row, files)
    repo = mirror / row.repo.replace("/", "__")
    svml = commit_repo(mirror / "example__svml", {"svml.c": "int x;\n"}, "svml")
    for path, sha in (("Orange/svml", svml), ("doc/theme", "1" * 40)):  # gitlinks, as recorded
        git(repo, "update-index", "--add", "--cacheinfo", f"160000,{sha},{path}")
    git(repo, "commit", "-q", "-m", "submodules")
    row = row.model_copy(update={"base_commit": git(repo, "rev-parse", "HEAD").strip()})
    assert build_from_source(row, mirror).environment is not None  # the theme is not needed
    shutil.rmtree(mirror / "example__svml")
    with pytest.raises(R2EUnsupported, match=r"submodules no clone here holds: Orange/svml"):
        build_from_source(row, mirror)


def test_no_image_and_no_mirror_says_what_to_do():
    row = _tasks()["aiohttp_0813710e"]
    with pytest.raises(R2EEnvError, match="not on this Docker engine.*--repo-mirror DIR"):
        prepare(row, mode="auto", mirror=None, image_exists=lambda _: False)
    assert prepare(row, mode="auto", mirror=None, image_exists=lambda _: True) == row
    assert prepare(row, mode="image", mirror=None, image_exists=lambda _: False) == row


def test_a_mirror_without_the_clone_or_the_commit_is_named(tmp_path):
    row = _tasks()["aiohttp_216e0828"]
    with pytest.raises(R2EEnvError, match="no clone of aio-libs/aiohttp"):
        build_from_source(row, tmp_path)
    mirror, _ = _mirror_for(tmp_path, row, {"Makefile": "all:\n"})
    with pytest.raises(R2EEnvError, match="is not in .*; update the clone"):
        build_from_source(row, mirror)  # the row's real commit is not in the toy clone


def test_a_later_package_step_is_fitted_to_what_earlier_steps_installed(tmp_path):
    """Regression: aiohttp's test packages came after make's pinned pytest 8.1.1; resolved on
    their own they took pytest-asyncio 0.25.2, pip upgraded pytest for it, and make's pins then
    broke it. uv keeps the installed pytest and picks pytest-asyncio 0.23.8: the step must carry
    the earlier pins so pip and the host's download resolve the same way."""
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    head = commit_repo(
        repo,
        {
            "Makefile": ".install-deps:\n\tpip install -r requirements/dev.txt\n",
            "requirements/dev.txt": "pytest==8.1.1\n",
        },
        "make",
    )
    attempt = RECIPES["aiohttp"].attempts[0]
    steps = pip_steps(attempt, repo, head)
    assert steps[1] == ["--upgrade", "pytest==8.1.1"]
    assert steps[2][0] == "pytest==8.1.1" and "pytest-asyncio" in steps[2]


def test_a_clone_missing_part_of_the_base_tree_is_refused_before_any_build(tmp_path, host_pythons):
    """A snapshot or partial clone without a blob of the base commit's own tree: no cut can
    save that row, so the recipe says so (and `envs` lists it) instead of a build failing
    minutes later. Objects missing only from older commits are the history cut's business."""
    row = _tasks()["orange3_2d9617bd"]
    files = {"requirements-core.txt": "", "requirements-gui.txt": "", "requirements-sql.txt": ""}
    mirror, row = _mirror_for(tmp_path, row, {**files, "data.txt": "only here\n"})
    repo = mirror / row.repo.replace("/", "__")
    blob = git(repo, "rev-parse", f"{row.base_commit}:data.txt").strip()
    assert build_from_source(row, mirror).environment is not None
    (repo / ".git" / "objects" / blob[:2] / blob[2:]).unlink()
    with pytest.raises(
        R2EUnsupported, match=rf"lacks objects of the base commit's own tree \(e.g. {blob}\)"
    ):
        build_from_source(row, mirror)


def test_the_setup_logs_versions_become_the_environments_pins_and_its_tag(tmp_path, host_pythons):
    """orange3's setup log pins psycopg2 2.9.9 (uv built it; a wheel-only resolution picks
    2.7.7): the spec carries the log's versions, and only a spec with pins gets a new env tag."""
    from deepswe.env.images.task import env_image_tag

    row = _tasks()["orange3_56706b60"]
    files = {"requirements-core.txt": "", "requirements-gui.txt": "", "requirements-sql.txt": ""}
    mirror, row = _mirror_for(tmp_path, row, files)
    env = build_from_source(row, mirror).environment
    assert "psycopg2==2.9.9" in env.pins and env.pins == json.loads(row.metadata["r2e_setup_pins"])
    bare = env.model_copy(update={"pins": []})
    assert env_image_tag(env) != env_image_tag(bare)
