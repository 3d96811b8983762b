"""swebench's conda environments and downloads translated onto PyPI, Debian and the mirror, on
swebench 4.1.0's real specs, offline (nothing is downloaded here)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from swebench.harness.constants import MAP_REPO_VERSION_TO_SPECS

from deepswe.data.loaders.swebench import swebench_row_to_task
from deepswe.data.toy import git
from deepswe.env.recipes.swebench.conda import (
    from_conda_list,
    from_environment_yml,
    needs_left_out,
    pip_constraint,
    translate_package,
)
from deepswe.env.recipes.swebench.coverage import markdown, spec_rows, summary
from deepswe.env.recipes.swebench.downloads import (
    UnservedDownload,
    build_downloads,
    pre_install,
)
from deepswe.env.recipes.swebench.install import one_script

SPECS = MAP_REPO_VERSION_TO_SPECS


def test_conda_version_constraints_read_as_conda_means_them():
    assert pip_constraint("=1.2") == "==1.2.*"  # conda: 1.2, 1.2.1, ... (pip's ==1.2 is 1.2.0)
    assert pip_constraint("1.2.*") == "==1.2.*"
    assert pip_constraint("==1.19.2=py36h6163131_0") == "==1.19.2"  # build string dropped
    assert pip_constraint(">=1.0.1") == ">=1.0.1"
    assert pip_constraint("!=6.0.0,!=6.0.1") == "!=6.0.0,!=6.0.1"
    assert pip_constraint("") == ""


@pytest.mark.parametrize(
    ("conda", "expected"),
    [
        ("pytables", ("pip", "tables")),
        ("matplotlib-base>=3.4", ("pip", "matplotlib>=3.4")),
        ("dask-core", ("pip", "dask")),
        ("iris", ("pip", "scitools-iris")),
        ("pyqt", ("pip", "PyQt5")),
        ("nbconvert[execute]!=6.0.0", ("pip", "nbconvert[execute]!=6.0.0")),
        ("graphviz", ("apt", ["graphviz"])),  # conda's graphviz is the program, not the binding
        ("python-graphviz", ("pip", "graphviz")),
        ("ghostscript", ("apt", ["ghostscript"])),
    ],
)
def test_conda_names_map_to_pypi_or_debian(conda, expected):
    assert translate_package(conda, "3.11", False) == expected


def test_what_wheels_carry_is_dropped_and_what_nothing_serves_is_named():
    assert translate_package("hdf5", "3.10", False)[0] == "none"
    assert translate_package("pip", "3.10", False)[0] == "none"
    kind, why = translate_package("cdms2", "3.10", False)
    assert kind == "out" and "conda-forge only" in why


def test_scikit_learn_on_python_36_gets_the_toolchain_conda_defaults_had():
    """Regression: scikit-learn 0.20-0.22 (Python 3.6) did not compile with the Cython 3 that
    PyPI serves for 3.6; `conda create python=3.6 cython` gave 0.29.24 (swebench's own image)."""
    spec = SPECS["scikit-learn/scikit-learn"]["0.22"]
    out = from_conda_list(spec["packages"], str(spec["python"]))
    assert out.pip == [
        [
            "numpy==1.19.2",
            "scipy==1.5.2",
            "cython==0.29.24",
            "pytest==6.2.4",
            "pluggy==0.13.1",  # not today's 1.0.0.dev0, which the image's pip 21.2.2 refuses
            "py==1.11.0",
            "pandas==1.1.5",
            "matplotlib==3.3.4",
        ]
    ]
    assert out.apt == [] and out.left_out == {}


def test_explicit_pins_are_kept_and_current_pythons_resolve_by_the_index_date():
    spec = SPECS["scikit-learn/scikit-learn"]["1.3"]
    step = from_conda_list(spec["packages"], "3.9").pip[0]
    assert step[:3] == ["numpy==1.19.2", "scipy==1.5.2", "cython==3.0.10"]
    assert "pandas<2.0.0" in step and "joblib" in step
    assert from_conda_list(SPECS["sympy/sympy"]["1.12"]["packages"], "3.9").pip == [
        ["mpmath", "flake8"]
    ]


MPL_YML = """\
# To set up a development environment using conda run:
name: mpl-dev
channels:
  - conda-forge
dependencies:
  - cairocffi
  - contourpy>=1.0.1
  - pygobject
  - pyqt
  - python=3.9  # swebench installs the spec's Python over it
  - wxpython
  - graphviz
  - pip
  - pip:
      - mpl-sphinx-theme
      - pikepdf
  - gtk4
  - pytest!=4.6.0,!=5.4.0
"""


def test_an_environment_yml_becomes_two_pip_steps_debian_packages_and_named_gaps():
    out = from_environment_yml(MPL_YML, "3.11")
    assert out.pip == [
        ["cairocffi", "contourpy>=1.0.1", "PyQt5", "pytest!=4.6.0,!=5.4.0"],
        ["mpl-sphinx-theme", "pikepdf"],
    ]
    assert out.apt == ["graphviz", "libcairo2"]  # libcairo2: what cairocffi loads
    assert sorted(out.left_out) == ["gtk4", "pygobject", "wxpython"]


def test_a_left_out_package_keeps_out_only_instances_whose_graded_tests_name_it():
    left = {"cdms2": "conda-forge only"}
    tests = ["xarray/tests/test_dataarray.py::TestDataArray::test_to_and_from_cdms2_classic"]
    assert "needs cdms2" in needs_left_out(tests, left)
    assert needs_left_out(["xarray/tests/test_dataarray.py::test_repr"], left) is None


def test_matplotlibs_qhull_download_is_debians_copy_of_the_same_tarball():
    """matplotlib 3.5's real pre_install: the wget becomes a copy of the file the host fetches
    from Debian's qhull 2020.2 source package (sha256 = matplotlib's LOCAL_QHULL_HASH)."""
    commands = [c for c in SPECS["matplotlib/matplotlib"]["3.5"]["pre_install"] if "apt" not in c]
    out = pre_install(commands, "http://mirror.example/debian")
    [f] = out.files
    assert f.url == "http://mirror.example/debian/pool/main/q/qhull/qhull_2020.2.orig.tar.gz"
    assert f.sha256 == "b5c2d7eb833278881b952c8a52d20179eab87766b00b865000469a45c1838b7e"
    assert 'cp /deepswe-files/qhull-2020-src-8.0.2.tgz "$QHULL_TAR"' in out.commands
    assert not any("wget" in c for c in out.commands)
    with pytest.raises(UnservedDownload, match="https://example.org/x.tgz"):
        pre_install(['U="https://example.org/x.tgz"', 'wget -O /tmp/x "$U"'], "http://m")


def test_one_bash_script_keeps_variables_and_swebenchs_set_e_rules(tmp_path):
    script = one_script(
        ['A="from one line"', "grep -q absent /dev/null && echo never", f'echo "$A" > {tmp_path}/o']
    )
    assert len(script) == 1 and "\n" not in script[0]  # one Dockerfile RUN line
    subprocess.run(script[0], shell=True, check=True)
    assert (tmp_path / "o").read_text() == "from one line\n"
    assert one_script(["python -m pip install -e ."]) == ["python -m pip install -e ."]


def _repo(path: Path, files: dict[str, str], tag: str | None = None) -> str:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    git(path, "add", "-A")
    git(path, "commit", "-qm", "c")
    if tag:
        git(path, "tag", tag)
    return git(path, "rev-parse", "HEAD").strip()


SETUPEXT_31 = "options = {'system_freetype': False}\nLOCAL_FREETYPE_VERSION = '2.6.1'\n"


def test_matplotlibs_own_freetype_download_comes_from_the_mirror(tmp_path):
    mirror = tmp_path / "mirror"
    base = _repo(mirror / "matplotlib__matplotlib", {"setupext.py": SETUPEXT_31})
    task = swebench_row_to_task(_row("matplotlib/matplotlib", "3.4", base))
    with pytest.raises(UnservedDownload, match="freetype__freetype"):
        build_downloads(task, mirror / "matplotlib__matplotlib", mirror)
    _repo(mirror / "freetype__freetype", {"autogen.sh": "true\n"}, tag="VER-2-6-1")
    out = build_downloads(task, mirror / "matplotlib__matplotlib", mirror)
    [f] = out.files
    assert f.git.endswith("freetype__freetype@VER-2-6-1") and f.prefix == "freetype-2.6.1"
    assert out.apt == ["autoconf", "automake", "libtool"]
    assert "build/freetype-2.6.1 && sh autogen.sh" in out.commands[0]
    # matplotlib 3.0 builds against the system's FreeType: nothing to fetch
    old = _repo(tmp_path / "m30", {"setupext.py": "options['local_freetype'] = False\n"})
    task30 = swebench_row_to_task(_row("matplotlib/matplotlib", "3.0", old))
    assert build_downloads(task30, tmp_path / "m30", mirror).files == []
    # matplotlib 3.0-3.1's `develop` also downloads jquery-ui: taken from matplotlib's sdist,
    # put where `develop` looks before downloading, beside 3.1's FreeType
    jq = _repo(
        tmp_path / "mjq",
        {
            "setup.py": "def _download_jquery_to(dest): pass\n",
            "setupext.py": "options['system_freetype'] = False\nLOCAL_FREETYPE_VERSION = '2.6.1'\n",
        },
    )
    taskjq = swebench_row_to_task(_row("matplotlib/matplotlib", "3.1", jq))
    out = build_downloads(taskjq, tmp_path / "mjq", mirror)
    assert [f.name for f in out.files] == ["matplotlib-3.1.3.tar.gz", "freetype-2.6.1.tar.gz"]
    sdist = out.files[0]
    assert sdist.url.startswith("https://files.pythonhosted.org/") and len(sdist.sha256) == 64
    assert "jquery-ui-1.12.1.zip" in sdist.stands_for
    # the command, run on a tarball in the sdist's layout, leaves the folder and nothing else
    files, testbed = tmp_path / "files", tmp_path / "testbed"
    top = files / "matplotlib-3.1.3" / "lib/matplotlib/backends/web_backend"
    (top / "jquery-ui-1.12.1/images").mkdir(parents=True)
    (top / "jquery-ui-1.12.1/jquery-ui.min.js").write_text("/* jquery-ui */")
    (top / "jquery-ui-1.12.1/images/ui-icons.png").write_bytes(b"png")
    (top / "all_figures.html").write_text("not taken")
    subprocess.run(
        ["tar", "-czf", "matplotlib-3.1.3.tar.gz", "matplotlib-3.1.3"], cwd=files, check=True
    )
    testbed.mkdir()
    cmd = out.commands[0].replace("/deepswe-files", str(files))
    subprocess.run(["bash", "-c", cmd], cwd=testbed, check=True)
    web = testbed / "lib/matplotlib/backends/web_backend"
    assert sorted(p.relative_to(web).as_posix() for p in web.rglob("*")) == [
        "jquery-ui-1.12.1",
        "jquery-ui-1.12.1/images",
        "jquery-ui-1.12.1/images/ui-icons.png",
        "jquery-ui-1.12.1/jquery-ui.min.js",
    ]


def _row(repo: str, version: str, base: str, tests: list[str] | None = None, n: int = 1):
    return {
        "repo": repo,
        "instance_id": f"{repo.replace('/', '__')}-{version.replace('.', '')}{n}",
        "base_commit": base,
        "environment_setup_commit": base,
        "version": version,
        "problem_statement": "-",
        "patch": "",
        "test_patch": "",
        "FAIL_TO_PASS": json.dumps(tests or ["t::a"]),
        "PASS_TO_PASS": "[]",
    }


def test_coverage_counts_instances_specs_and_what_stays_out(tmp_path, monkeypatch):
    """Rows in the dataset's shape: an eligible Debian spec, a Python no host provides, an
    environment.yml spec with one instance a left-out package keeps out."""
    monkeypatch.delenv("DEEPSWE_HOST_PYTHONS", raising=False)
    pythons = tmp_path / "pythons" / "3.10.13" / "bin"
    pythons.mkdir(parents=True)
    (pythons / "python3").write_text("")
    monkeypatch.setenv("DEEPSWE_HOST_PYTHONS", str(tmp_path / "pythons"))
    mirror = tmp_path / "mirror"
    yml = "name: x\ndependencies:\n  - cdms2\n  - numpy\n"
    xbase = _repo(mirror / "pydata__xarray", {"ci/requirements/environment.yml": yml})
    dbase = _repo(mirror / "django__django", {"tests/requirements/py3.txt": "pytz\n"})
    rows = [
        _row("django/django", "5.0", dbase, n=1),
        _row("django/django", "5.0", dbase, n=2),
        _row("django/django", "2.2", dbase),  # Python 3.5: none under $DEEPSWE_HOST_PYTHONS
        _row("pydata/xarray", "2022.06", xbase, n=1),
        _row("pydata/xarray", "2022.06", xbase, ["x::test_to_and_from_cdms2_ugrid"], n=2),
    ]
    tasks = [swebench_row_to_task(r) for r in rows]
    rows_out = spec_rows(tasks, mirror)
    assert summary(rows_out) == {
        "specs": 3,
        "specs_eligible": 2,
        "instances": 5,
        "instances_eligible": 3,
        "instances_needing_a_host_interpreter": 1,
        "instances_out_of_eligible_specs": 1,
    }
    by = {(r.repo, r.version): r for r in rows_out}
    assert by[("django/django", "2.2")].verdict.startswith("unsupported: needs Python 3.5")
    assert list(by[("pydata/xarray", "2022.06")].excluded) == ["pydata__xarray-2022062"]
    # The whole reason, which the table cuts, with what to do (issue #45)
    text = markdown(rows_out)
    line = next(x for x in text.splitlines() if x.startswith("- unsupported: django/django 2.2"))
    assert "needs Python 3.5" in line and "DEEPSWE_HOST_PYTHONS" in line
    assert "warning: no clone" not in text
    # A mirror folder without a repository's clone: said, naming the folder to fill
    subprocess.run(["rm", "-rf", str(mirror / "pydata__xarray")], check=True)
    text = markdown(spec_rows(tasks, mirror))
    assert f"- warning: no clone of pydata/xarray at {mirror}/pydata__xarray (2 instances)" in text


def test_envs_names_a_row_whose_submodule_no_clone_holds(tmp_path, monkeypatch):
    """astropy 1.3's shape: its base commit records astropy_helpers as a gitlink, which its
    build checks out. Without a clone of astropy-helpers in the mirror the row is out, saying
    which clone to add; with it, the row is in."""
    pythons = tmp_path / "pythons" / "3.6.15" / "bin"
    pythons.mkdir(parents=True)
    (pythons / "python3").write_text("")
    monkeypatch.setenv("DEEPSWE_HOST_PYTHONS", str(tmp_path / "pythons"))
    mirror = tmp_path / "mirror"
    helpers = _repo(mirror / "astropy__astropy-helpers", {"ah_bootstrap.py": "\n"})
    url = "https://github.com/astropy/astropy-helpers.git"
    gitmodules = f'[submodule "astropy_helpers"]\n\tpath = astropy_helpers\n\turl = {url}\n'
    repo = mirror / "astropy__astropy"
    _repo(repo, {".gitmodules": gitmodules, "setup.py": "\n"})
    git(repo, "update-index", "--add", "--cacheinfo", f"160000,{helpers},astropy_helpers")
    git(repo, "commit", "-qm", "record the submodule")
    base = git(repo, "rev-parse", "HEAD").strip()
    (task,) = [swebench_row_to_task(_row("astropy/astropy", "1.3", base))]
    (row,) = spec_rows([task], mirror)
    assert row.verdict == "eligible" and row.excluded == {}
    subprocess.run(["rm", "-rf", str(mirror / "astropy__astropy-helpers")], check=True)
    (row,) = spec_rows([task], mirror)
    want = f"a clone at {mirror}/astropy__astropy-helpers"
    assert want in row.excluded[task.instance_id]
    assert summary([row])["instances_eligible"] == 0


def test_envs_counts_out_a_row_whose_build_would_stop_before_building(tmp_path, monkeypatch):
    """Eligible = builds (issue #45): envs asks what the build itself asks before building. A
    row whose commit lacks the requirements file swebench reads stopped its build while envs
    called it eligible; now it is out, with the build's own reason."""
    monkeypatch.delenv("DEEPSWE_HOST_PYTHONS", raising=False)
    mirror = tmp_path / "mirror"
    repo = mirror / "django__django"
    good = _repo(repo, {"tests/requirements/py3.txt": "pytz\n"})
    git(repo, "rm", "-q", "tests/requirements/py3.txt")
    git(repo, "commit", "-qm", "no requirements file")
    bad = git(repo, "rev-parse", "HEAD").strip()
    tasks = [
        swebench_row_to_task(_row("django/django", "5.0", good, n=1)),
        swebench_row_to_task(_row("django/django", "5.0", bad, n=2)),
    ]
    (row,) = spec_rows(tasks, mirror)
    assert row.verdict == "eligible"
    assert list(row.excluded) == ["django__django-502"]
    assert "tests/requirements/py3.txt" in row.excluded["django__django-502"]
    assert summary([row])["instances_eligible"] == 1
