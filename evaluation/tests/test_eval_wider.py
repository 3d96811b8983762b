"""The wider run of test strength for SWE-Bench-Verified rows (deepswe.eval.wider), one test per
runner their commands use: pytest, tox's `--` (sphinx), bin/test (sympy) and Django's
runtests.py. The commands are swebench 4.1.0's, as `build_from_source` writes them (the
re-install line before, the parentheses around); the repositories are real git repositories."""

from __future__ import annotations

import shlex

from deepswe.data.task import EnvironmentSpec, HiddenTests, Task, TaskSource, TestSpec
from deepswe.data.toy import commit_repo, diff_to
from deepswe.eval.wider import FOLDER_FILES, wider_paths, wider_task

REINSTALL = "( ( python -m pip install -e . ) > /tmp/deepswe-reinstall.log 2>&1 || true"


def _row(tmp_path, files: dict[str, str], graded: list[str], line: str) -> Task:
    """A Verified row whose test patch touches `graded` and whose test line is `line`."""
    repo = tmp_path / "repo"
    base = commit_repo(repo, files)
    test_patch = "".join(diff_to(repo, p, files.get(p, "") + "\n# changed\n") for p in graded)
    return Task(
        instance_id="o__r-1",
        repo="o/r",
        base_commit=base,
        problem_statement="a bug.",
        source=TaskSource.SWE_BENCH_VERIFIED,
        environment=EnvironmentSpec(source=str(repo)),
        test_spec=TestSpec(command=f"{REINSTALL}\n{line}\n)", log_parser="swebench"),
        hidden=HiddenTests(
            fail_to_pass=["t1"], pass_to_pass=["t2"], test_patch=test_patch, graded_files=[]
        ),
        gold_patch=diff_to(repo, "r/core.py", "x = 2\n"),
    )


def _test_line(task: Task, passing: list[str] | None = None) -> str:
    wide = wider_task(task, passing)
    lines = wide.test_spec.command.splitlines()
    assert lines[0] == REINSTALL and lines[-1] == ")"  # only the test line is rewritten
    return lines[1]


def _many(folder: str, n: int) -> dict[str, str]:
    return {f"{folder}/test_{k}.py": "def test():\n    pass\n" for k in range(n)}


def test_a_pytest_row_takes_a_small_folder_whole_and_a_whole_suites_files_alone(tmp_path) -> None:
    """seaborn's tests/_core (8 files) joins whole; a folder past FOLDER_FILES (matplotlib's
    lib/matplotlib/tests, 75) gives only the graded files, which the command already runs."""
    files = {
        "r/core.py": "x = 1\n",
        **_many("tests/_core", 3),
        "tests/_core/__init__.py": "",
        **_many("lib/tests", FOLDER_FILES + 1),
    }
    graded = ["tests/_core/test_0.py", "lib/tests/test_0.py"]
    task = _row(tmp_path, files, graded, "pytest --no-header -rA " + " ".join(graded))
    assert wider_paths(task) == ["lib/tests/test_0.py", "tests/_core"]
    assert _test_line(task, ["b", "a"]) == "pytest --no-header -rA lib/tests/test_0.py tests/_core"
    wide = wider_task(task, ["b", "a"])
    assert wide.hidden.fail_to_pass == [] and wide.hidden.pass_to_pass == ["a", "b"]


def test_a_sphinx_row_widens_after_toxs_double_dash(tmp_path) -> None:
    files = {"r/core.py": "x = 1\n", **_many("tests", 2), "tests/roots/test-x/conf.py": ""}
    graded = ["tests/test_0.py", "tests/roots/test-x/conf.py"]  # a fixture the command never runs
    task = _row(tmp_path, files, graded, "tox --current-env -epy39 -v -- tests/test_0.py")
    assert _test_line(task) == "tox --current-env -epy39 -v -- tests"


def test_a_sympy_row_keeps_its_environment_assignment(tmp_path) -> None:
    """bin/test takes files and folders; sympy's core/tests (38 files) is too big to take whole.
    An assignment stays one: `'A=b c' bin/test` would run a command named `A=b c`."""
    files = {"r/core.py": "x = 1\n", **_many("sympy/core/tests", FOLDER_FILES + 1)}
    graded = ["sympy/core/tests/test_0.py"]
    line = "PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' bin/test -C --verbose"
    task = _row(tmp_path, files, graded, f"{line} {graded[0]}")
    wide = _test_line(task)
    assert shlex.split(wide) == shlex.split(f"{line} {graded[0]}")
    assert wide.startswith("PYTHONWARNINGS=ignore::UserWarning,ignore::SyntaxWarning bin/test")
    spaced = task.model_copy(
        update={"test_spec": TestSpec(command=f"A='b c' bin/test {graded[0]}", log_parser="x")}
    )
    assert wider_task(spaced).test_spec.command == f"A='b c' bin/test {graded[0]}"
    assert shlex.split(wider_task(spaced).test_spec.command)[0] == "A=b c"


def test_a_django_row_runs_each_graded_modules_app_whole(tmp_path) -> None:
    """runtests.py takes dotted labels (`migrations.test_loader`); the wider run takes their apps
    (`migrations`), a fixture module included in the test patch's labels adding no other app."""
    files = {
        "r/core.py": "x = 1\n",
        "tests/migrations/test_loader.py": "",
        "tests/migrations/test_migrations_namespace_package/0001_initial.py": "",
        "tests/utils_tests/test_autoreload.py": "",
    }
    graded = [p for p in files if p.startswith("tests/")]
    labels = (
        "migrations.test_loader migrations.test_migrations_namespace_package.0001_initial "
        "utils_tests.test_autoreload"
    )
    head = "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1"
    task = _row(tmp_path, files, graded, f"{head} {labels}")
    assert _test_line(task) == f"{head} migrations utils_tests"
    assert wider_paths(task) == ["tests/migrations", "tests/utils_tests"]


def test_without_its_repository_a_row_takes_its_graded_files_alone(tmp_path) -> None:
    files = {"r/core.py": "x = 1\n", **_many("tests", 2)}
    task = _row(tmp_path, files, ["tests/test_0.py"], "pytest -rA tests/test_0.py")
    elsewhere = task.model_copy(update={"environment": EnvironmentSpec(source="")})
    assert _test_line(elsewhere) == "pytest -rA tests/test_0.py"
