"""A toy R2E-Gym row made on the spot, in R2E-Gym's own image layout, for tests.

The image built from it is laid out as R2E-Gym's images are (R2E-Gym's
repo_analysis/base_dockerfiles): the repository in /testbed with its virtualenv at
/testbed/.venv, the test script at /testbed/run_tests.sh, the row's hidden tests in /r2e_tests.
The task carries what a loaded R2E-Gym row carries: the hidden test files, expected_output_json
and R2E-Gym's test command (deepswe.data.loaders.r2e_gym).
"""

from __future__ import annotations

import base64
from pathlib import Path

from deepswe.data.loaders.r2e_gym import r2e_test_command
from deepswe.data.task import EnvironmentSpec, HiddenTests, Task, TaskSource, TestSpec
from deepswe.data.toy import diff_to, git

OPS_BUG = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
OPS_GOOD = OPS_BUG.replace("return a - b", "return a + b")
HIDDEN_TEST = (
    "from calc.ops import add, mul\n\n\nclass TestOps:\n    def test_add(self):\n"
    "        assert add(2, 3) == 5\n\n    def test_mul(self):\n        assert mul(2, 3) == 6\n"
)
EXPECTED = {"TestOps.test_add": "PASSED", "TestOps.test_mul": "PASSED"}


def _write(path: str, text: str) -> str:
    """An install command that writes `text` to `path` (as R2E-Gym's Dockerfile COPY does)."""
    data = base64.b64encode(text.encode()).decode()
    return f"mkdir -p $(dirname {path}) && echo {data} | base64 -d > {path}"


HELPER = "def two():\n    return 2\n"
HELPER_FIXED = HELPER + "\n\ndef three():\n    return 3\n"
# Pillow's shape: the hidden test imports the repository's Tests/helper.py as `.helper`, and the
# fix commit adds to that helper (its change is in the row's test patch).
HIDDEN_TEST_WITH_HELPER = (
    "from calc.ops import add, mul\n\nfrom .helper import three, two\n\n\nclass TestOps:\n"
    "    def test_add(self):\n        assert add(two(), three()) == 5\n\n"
    "    def test_mul(self):\n        assert mul(2, 3) == 6\n"
)


# tornado's shape: unittest classes, graded through a runner script shipped among the hidden
# tests that prints pytest-like `PASSED module::Class::method` lines (R2E-Gym's tornado and
# Pillow rows ship one of their own; this one is written here in the same shape).
HIDDEN_UNITTEST = (
    "import unittest\n\nfrom calc.ops import add, mul\n\n\nclass TestOps(unittest.TestCase):\n"
    "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n"
    "    def test_mul(self):\n        self.assertEqual(mul(2, 3), 6)\n"
)
RUNNER = """import sys
import unittest


class Result(unittest.TestResult):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.lines = []

    def _id(self, test):
        cls = test.__class__
        return "%s::%s::%s" % (cls.__module__, cls.__name__, getattr(test, "_testMethodName", ""))

    def addSuccess(self, test):
        super().addSuccess(test)
        self.lines.append("PASSED " + self._id(test))

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self.lines.append("FAILED " + self._id(test))

    def addError(self, test, err):
        super().addError(test, err)
        self.lines.append("ERROR " + self._id(test))


def main():
    suite = unittest.TestLoader().discover("r2e_tests")
    result = Result()
    suite(result)
    print("=" * 20 + " short test summary info " + "=" * 20)
    print("\\n".join(result.lines))
    print("=" * 20 + " %d tests " % result.testsRun + "=" * 20)
    sys.exit(not result.wasSuccessful())


if __name__ == "__main__":
    main()
"""
RUNNER_NAME = "unittest_custom_runner.py"


def make_r2e_layout_task(
    root: Path, expected: dict[str, str] = EXPECTED, helper: bool = False, unittest: bool = False
) -> Task:
    """A one-bug R2E-Gym-style task over a repository made under `root`; with `helper`, the
    hidden test imports Tests/helper.py as R2E-Gym copies it beside the tests (Pillow's); with
    `unittest`, the hidden tests are unittest classes run by a runner script among them
    (tornado's)."""
    repo = Path(root) / "calc"
    (repo / "calc").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "calc" / "__init__.py").write_text("")
    (repo / "calc" / "ops.py").write_text(OPS_BUG)
    if helper:
        (repo / "Tests").mkdir()
        (repo / "Tests" / "helper.py").write_text(HELPER)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "calc with a bug")
    hidden = HIDDEN_TEST_WITH_HELPER if helper else HIDDEN_UNITTEST if unittest else HIDDEN_TEST
    test_patch = diff_to(repo, "Tests/helper.py", HELPER_FIXED) if helper else ""
    test_files = {"test_1.py": hidden, **({RUNNER_NAME: RUNNER} if unittest else {})}
    command = r2e_test_command("calc", test_files)
    on_path = (
        "python -c 'import site, pathlib; pathlib.Path(site.getsitepackages()[0], "
        '"testbed.pth").write_text("/testbed\\n")\''
    )
    return Task(
        instance_id="calc_r2e01",
        repo="calc",
        base_commit=git(repo, "rev-parse", "HEAD").strip(),
        problem_statement="add(2, 3) returns -1.",
        source=TaskSource.R2E_GYM,
        environment=EnvironmentSpec(
            source=str(repo),
            pip=["pytest"],
            install=[
                "ln -s /opt/venv .venv",
                on_path,
                *(_write(f"/r2e_tests/{name}", text) for name, text in test_files.items()),
                _write("/testbed/run_tests.sh", command + "\n"),
            ],
        ),
        test_spec=TestSpec(command=command, log_parser="r2e-gym", timeout_s=120),
        hidden=HiddenTests(
            fail_to_pass=["TestOps.test_add"],
            pass_to_pass=["TestOps.test_mul"],
            expected_statuses=expected,
            test_files=test_files,
            test_patch=test_patch,
        ),
        gold_patch=diff_to(repo, "calc/ops.py", OPS_GOOD),
    )


__all__ = ["EXPECTED", "HIDDEN_TEST", "OPS_BUG", "OPS_GOOD", "RUNNER", "make_r2e_layout_task"]
