"""The grader's side of owning pytest: commands rewritten onto the launcher, test infrastructure
told apart, and the stand-alone scripts on the oldest Pythons (the report read back:
test_grading_report.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from deepswe.data.datasets import load_tasks
from deepswe.data.loaders.r2e_gym import R2E_TEST_COMMANDS, r2e_test_command
from deepswe.data.task import TestSpec
from deepswe.env.grading.owned import (
    LAUNCHER,
    SEAL,
    SHADOW_PROBE,
    UNITTEST_LAUNCHER,
    own_pytest_command,
    strict_refusal,
)
from deepswe.env.grading.testinfra import infra_by_name, section_changed

L, R = "/g/deepswe_pytest.py", "/g/report"


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (
            "python -m pytest -rA -p no:cacheprovider -o addopts= test_addict.py",
            f"python {L} {R} -rA -p no:cacheprovider -o addopts= test_addict.py",
        ),
        (
            r2e_test_command("numpy"),
            "PYTHONWARNINGS=ignore::UserWarning,ignore::SyntaxWarning .venv/bin/python -W ignore "
            f"{L} {R} -rA r2e_tests",
        ),
        (
            R2E_TEST_COMMANDS["orange3"],
            "QT_QPA_PLATFORM=minimal PYTHONWARNINGS=ignore::UserWarning,ignore::SyntaxWarning "
            f"xvfb-run --auto-servernum .venv/bin/python -W ignore {L} {R} -rA r2e_tests",
        ),
        (  # SWE-bench's composed command: only its pytest line changes
            "( source /opt/x\npytest --no-header -rA tests/t.py\n)",
            f'( source /opt/x\n"$(deepswe_script_python pytest)" {L} {R} --no-header -rA tests/t.py\n)',
        ),
    ],
)
def test_a_pytest_command_is_run_by_the_launcher(command: str, expected: str) -> None:
    owned = own_pytest_command(command, L, R)
    assert owned is not None
    assert owned.command.endswith(expected)


@pytest.mark.parametrize(
    "command",
    [
        "./tests/runtests.py --verbosity 2 admin_views",  # Django's own runner
        "bin/test -C --verbose sympy/core/tests/test_basic.py",  # sympy's
        "python -m pytest tests | tee log",  # a pipe
        "python -m pytest a.py\npython -m pytest b.py",  # two runs
        "python -c 'import pytest; pytest.main()'",
        "tox -e py39 -- pytest",
    ],
)
def test_other_commands_run_as_the_task_wrote_them(command: str) -> None:
    assert own_pytest_command(command, L, R) is None


@pytest.mark.parametrize(
    "command",
    ["./tests/runtests.py --verbosity 2 admin_views", "bin/test -C sympy/core/tests/test_basic.py"],
)
def test_strict_rules_refuse_a_runner_they_cannot_own(command: str) -> None:
    """Its results could only be read from what the code under test prints: refused, with the
    way out named; SWE-bench's rules still run it as written."""
    why = strict_refusal(TestSpec(command=command, log_parser="pytest", rules="strict"))
    assert why and command.split()[0] in why and "grading_rules: swebench" in why
    assert strict_refusal(TestSpec(command=command, log_parser="pytest", rules="swebench")) is None
    assert strict_refusal(TestSpec(command=command, log_parser="swebench")) is None  # its default


def test_strict_rules_take_every_owned_command() -> None:
    for command in ["python -m pytest -rA tests", r2e_test_command("tornado", ["x.py"])]:
        assert strict_refusal(TestSpec(command=command, log_parser="pytest")) is None
    tornado = r2e_test_command("tornado", ["tornado_unittest_runner.py"])
    assert strict_refusal(TestSpec(command=tornado, log_parser="r2e-gym")) is None


def test_every_swe_mini_task_is_graded_by_the_launcher() -> None:
    tasks = load_tasks("swe-mini")
    assert tasks and all(own_pytest_command(t.test_spec.command, L, R) for t in tasks)
    assert {t.test_spec.grading_rules for t in tasks} == {"strict"}


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("conftest.py", "conftest"),
        ("src/pkg/tests/conftest.py", "conftest"),
        ("pytest.ini", "pytest configuration"),
        ("sub/.pytest.ini", "pytest configuration"),
        ("sitecustomize.py", "interpreter start-up"),
        ("usercustomize.py", "interpreter start-up"),
        ("evil.pth", "interpreter start-up"),
        ("pkg.egg-info/entry_points.txt", "package metadata"),
        ("pkg-0.1.DIST-INFO/entry_points.txt", "package metadata"),  # found in any case
        ("pkg/ops.py", None),
        ("setup.cfg", None),  # only its pytest section counts (section_changed)
    ],
)
def test_test_infrastructure_by_name(path: str, why: str | None) -> None:
    assert infra_by_name(path) == why


def test_only_a_changed_pytest_section_counts() -> None:
    cfg = "[metadata]\nname = x\n\n[tool:pytest]\naddopts = -q\n"
    assert not section_changed("setup.cfg", cfg, cfg.replace("name = x", "name = y"))
    assert section_changed("setup.cfg", cfg, cfg.replace("-q", "-p evil"))
    assert section_changed("tox.ini", "[tox]\n", "[tox]\n[pytest]\naddopts = -p evil\n")
    toml = '[project]\nname = "x"\n'
    assert not section_changed("pyproject.toml", toml, toml + "version = '1'\n")
    assert section_changed("pyproject.toml", toml, toml + "[tool.pytest.ini_options]\nx = 1\n")
    assert section_changed("setup.cfg", cfg, "[[broken")  # unparsable: changed


OLD_PYTHONS = [p for p in sorted(Path.home().glob(".pyenv/versions/3.[5-7]*/bin/python3"))]


@pytest.mark.parametrize(
    "script", [LAUNCHER, UNITTEST_LAUNCHER, SEAL, SHADOW_PROBE], ids=lambda p: p.name
)
def test_the_scripts_compile_on_the_oldest_pythons_here(script: Path) -> None:
    """They run inside task images with the image's own interpreter (3.6 and up)."""
    if not OLD_PYTHONS:
        pytest.skip("no pyenv CPython 3.5-3.7 on this machine")
    for python in OLD_PYTHONS:
        res = subprocess.run(
            [str(python), "-c", f"compile(open({str(script)!r}).read(), 's', 'exec')"],
            capture_output=True,
            text=True,
        )
        assert res.returncode == 0, (python, res.stderr)


def test_the_shadow_probe_names_new_modules_the_environment_has(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    for rel in ("pytest.py", "doctest.py", "brand_new_mod.py", "pkg/json.py", "json/__init__.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    args = ["pytest.py", "doctest.py", "brand_new_mod.py", "pkg/json.py", "json/__init__.py"]
    res = subprocess.run(
        [sys.executable, str(SHADOW_PROBE), str(tmp_path), *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        check=True,
    )
    # pkg/json.py is pkg.json: it shadows nothing; a new json/ package would shadow json.
    assert res.stdout.split() == ["pytest.py", "doctest.py", "json/__init__.py"]
