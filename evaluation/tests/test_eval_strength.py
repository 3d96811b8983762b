"""Test strength (issue #43): mutants of the gold patch (deepswe.eval.mutants, pure) and, in real
containers, a task whose graded tests are weak (a nearly-right fix passes them and a wider test of
the repository catches it) beside one whose tests are strong, and a mutant equivalent to gold
that nothing kills (undecided, never called wrong)."""

from __future__ import annotations

import pytest

from deepswe.data.task import EnvironmentSpec, HiddenTests, Task, TaskSource, TestSpec
from deepswe.data.toy import commit_repo, diff_to, git, pth_install
from deepswe.env.grading.outcomes import Outcome
from deepswe.env.sandbox import SandboxLimits
from deepswe.eval.mutants import OPERATORS, make_mutants, sites

AGE_BUG = "def is_adult(age):\n    return age > 18\n"
AGE_GOLD = "def is_adult(age):\n    limit = max(18, 0)\n    return age >= limit\n"


def test_every_operator_makes_its_kind_of_wrong_fix() -> None:
    gold = (
        "--- a/m.py\n+++ b/m.py\n@@ -1,4 +1,4 @@\n def f(a, b):\n"
        "-    if a > 2:\n+    if a >= 3 and b:\n"
        "-        return g(b, a)\n+        return g(a, b)\n     return 0\n"
    )
    made = {m.operator: m for m in make_mutants(gold, 50, 1)}
    assert set(made) == set(OPERATORS) - {"partial-fix"}  # one hunk: nothing to leave out
    assert "+    if a < 3 and b:\n" not in made["comparison"].patch  # >= turns into >, not <
    assert "+    if a > 3 and b:\n" in made["comparison"].patch
    assert "+    if not (a >= 3 and b):\n" in made["negate-condition"].patch
    assert "+    if True:\n" in made["drop-condition"].patch
    assert "+        return g(b, a)\n" in made["swap-arguments"].patch
    assert "+    if a > 2:\n" in made["old-value"].patch
    assert {"+    if a >= 4 and b:\n", "+    if a >= 2 and b:\n"} & {
        line for m in make_mutants(gold, 50, 1, ["boundary"]) for line in m.patch.splitlines(True)
    }


def test_mutants_are_seeded_distinct_and_never_gold() -> None:
    gold = "--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-x = f(1, 2) < 3\n+x = f(1, 2) <= 4\n"
    one, two = make_mutants(gold, 4, 7), make_mutants(gold, 4, 7)
    assert [m.patch for m in one] == [m.patch for m in two] and len(one) == 4
    assert len({m.patch for m in one}) == 4 and gold not in {m.patch for m in one}
    assert [m.patch for m in make_mutants(gold, 4, 8)] != [m.patch for m in one]


def test_strings_and_comments_are_never_mutated() -> None:
    gold = "--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-x = 1\n+x = '<= 2'  # a < 3\n"
    tokens = [op for op in OPERATORS if op != "old-value"]  # old-value swaps the whole line
    assert all("'<= 2'  # a < 3" in m.patch for m in make_mutants(gold, 20, 1, tokens))
    assert sites("not a diff") == []


def test_a_docstrings_inner_lines_are_text_not_code() -> None:
    """pylint-6386's survivor was `docs.python.org/3/` -> `/4/` on a docstring's inner line (a
    line alone tokenizes as code): a line inside a triple-quoted string the hunk opens is not a
    site; the code after the string closes is."""
    q = '"' * 3
    s = "'" * 3
    gold = (
        "--- a/m.py\n+++ b/m.py\n@@ -1,2 +1,8 @@\n def f(a):\n"
        f"+    {q}See docs.python.org/3/ for\n"
        "+    x < 2 and 'single' quotes.\n"
        f"+    {s} inside is text too\n"
        f"+    {q}\n"
        f"+    if a < 2:  # {s}\n"
        "+        return 1\n"
        "     return 0\n"
    )
    texts = [site.text for site in sites(gold)]
    # the line that opens the string is a site (its code part); the closing one starts inside
    assert texts == [
        f"    {q}See docs.python.org/3/ for",
        f"    if a < 2:  # {s}",
        "        return 1",
    ]
    made = make_mutants(gold, 50, 1, [op for op in OPERATORS if op != "partial-fix"])
    assert made and all("+    x < 2 and 'single' quotes.\n" in m.patch for m in made)
    assert all("docs.python.org/3/" in m.patch for m in made)


def test_a_partial_fix_leaves_one_hunk_out() -> None:
    gold = "--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-a = 1\n+a = 2\n@@ -9 +9 @@\n-b = 1\n+b = 2\n"
    partial = [m for m in make_mutants(gold, 20, 1) if m.operator == "partial-fix"]
    assert len(partial) == 2
    assert all(("+a = 2" in m.patch) != ("+b = 2" in m.patch) for m in partial)


def test_a_partial_fix_never_leaves_out_only_docs() -> None:
    """aiohttp_0fdcc291's gold edits docs/web_advanced.rst beside the code: a mutant without that
    hunk behaves as gold does, so it is never made."""
    code = "--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-a = 1\n+a = 2\n"
    docs = "--- a/docs/m.rst\n+++ b/docs/m.rst\n@@ -3 +3 @@\n-old words\n+new words\n"
    partial = [m for m in make_mutants(code + docs, 20, 1) if m.operator == "partial-fix"]
    assert (
        len(partial) == 1 and "+new words" in partial[0].patch and "+a = 2" not in partial[0].patch
    )


# --- in containers --------------------------------------------------------------------------


def test_an_r2e_gym_tasks_wider_run_takes_the_repositorys_tests_of_the_changed_module(
    tmp_path,
) -> None:
    """R2E-Gym's hidden tests are one file cut from the repository's; the repository's own test
    files that name a changed module join its wider run (most mentions first, at most 5); a
    unittest runner script takes no files, and a task without its repository takes none."""
    from deepswe.eval.strength import repository_tests, wider_paths, wider_task

    mentions = "from pkg import core\n\n\ndef test_a():\n    assert core.f() and core.g()\n"
    files = {
        "pkg/__init__.py": "",
        "pkg/core.py": "def f():\n    return 0\n",
        "tests/test_core.py": mentions,  # three mentions
        "Tests/test_more.py": "import pkg.core\n",  # Pillow's folder, one
        "tests/test_other.py": "def test_b():\n    assert 'score' != 'cored'\n",  # none
        "docs/core.py": "import pkg.core\n",  # not a test file
    }
    repo = tmp_path / "repo"
    base = commit_repo(repo, files)
    task = Task(
        instance_id="pkg_1",
        repo="o/pkg",
        base_commit=base,
        problem_statement="f() is 0.",
        source=TaskSource.R2E_GYM,
        environment=EnvironmentSpec(source=str(repo)),
        test_spec=TestSpec(
            command=".venv/bin/python -m pytest -rA r2e_tests", log_parser="r2e-gym"
        ),
        hidden=HiddenTests(test_files={"test_1.py": "def test_x():\n    pass\n"}),
        gold_patch=diff_to(repo, "pkg/core.py", "def f():\n    return 1\n"),
    )
    assert repository_tests(task) == ["tests/test_core.py", "Tests/test_more.py"]
    assert repository_tests(task, limit=1) == ["tests/test_core.py"]
    assert wider_task(task).test_spec.command.endswith(
        "pytest -rA Tests/test_more.py r2e_tests tests/test_core.py"
    )
    runner = task.model_copy(
        update={"test_spec": TestSpec(command="python r2e_tests/runner.py", log_parser="r2e-gym")}
    )
    assert wider_paths(runner) == ["r2e_tests"]
    elsewhere = task.model_copy(update={"environment": EnvironmentSpec(source="")})
    assert repository_tests(elsewhere) == []


def _task(repo, base: str, tests: list[str], name: str) -> Task:
    pth = pth_install()
    return Task(
        instance_id=f"age__{name}-1",
        repo="age/age",
        base_commit=base,
        problem_statement="is_adult(18) is False.",
        source=TaskSource.SWE_MINI,
        environment=EnvironmentSpec(source=str(repo), pip=["pytest"], install=[pth]),
        test_spec=TestSpec(
            command="python -m pytest -rA -p no:cacheprovider -o addopts= tests/test_age.py",
            log_parser="pytest",
            timeout_s=120,
        ),
        hidden=HiddenTests(
            fail_to_pass=["tests/test_age.py::test_eighteen"],
            pass_to_pass=[f"tests/test_age.py::{t}" for t in tests],
            graded_files=["tests/test_age.py"],
        ),
        gold_patch=diff_to(repo, "age/core.py", AGE_GOLD),
    )


def _repo(root, strong: bool):
    graded = (
        "from age.core import is_adult\n\n\ndef test_eighteen():\n    assert is_adult(18)\n\n\n"
    )
    graded += "def test_thirty():\n    assert is_adult(30)\n"
    if strong:
        graded += "\n\ndef test_seventeen():\n    assert not is_adult(17)\n"
    more = "from age.core import is_adult\n\n\ndef test_not_at_seventeen():\n    assert not is_adult(17)\n"
    files = {
        "age/__init__.py": "",
        "age/core.py": AGE_BUG,
        "tests/test_age.py": graded,
        "tests/test_more.py": more,
    }
    repo = root / ("strong" if strong else "weak")
    return repo, commit_repo(repo, files, "age with a bug")


@pytest.mark.docker
@pytest.mark.parametrize("strong", [False, True], ids=["weak", "strong"])
def test_weak_tests_are_found_and_proven_strong_ones_are_not(strong, tmp_path) -> None:
    from deepswe.env.episode import grade_patch
    from deepswe.env.images.task import ensure_task_image
    from deepswe.eval.strength import harden, measure

    repo, base = _repo(tmp_path, strong)
    tests = ["test_thirty"] + (["test_seventeen"] if strong else [])
    task = _task(repo, base, tests, "strong" if strong else "weak")
    image = ensure_task_image(task, log=lambda _: None)
    limits = SandboxLimits(memory="1g", pids=256)

    def grade(t, patch):
        return grade_patch(t, patch, image=image, sandbox_limits=limits)

    result = measure(task, 8, seed=1, grade=grade)
    boundary_17 = [s for s in result.proven_wrong + result.undecided if "18 -> 17" in s.change]
    equivalent = [s for s in result.undecided if s.operator == "swap-arguments"]
    assert equivalent, result  # max(0, 18) is max(18, 0): nothing kills it, never called wrong
    assert all(s.killed_by is None for s in result.undecided)
    if strong:
        assert not result.weak and not boundary_17, result
        return
    assert result.weak, result
    (wrong,) = [s for s in result.proven_wrong if "18 -> 17" in s.change]
    assert wrong.killed_by == "tests/test_more.py::test_not_at_seventeen"
    assert "weak tests" in result.reason() and "test_not_at_seventeen" in result.reason()
    # hardened: the killing test joins the graded ones; gold still resolves, the wrong fix not
    hard = harden(task, result)
    assert "tests/test_more.py" in hard.test_spec.command
    hard_image = ensure_task_image(hard, log=lambda _: None)
    assert grade_patch(hard, hard.gold_patch, image=hard_image).grade.outcome is Outcome.RESOLVED
    again = grade_patch(hard, wrong.patch, image=hard_image).grade
    assert again.outcome is Outcome.UNRESOLVED and again.p2p_failed == [wrong.killed_by]
    assert git(repo, "status", "--porcelain") == ""


def test_a_test_missing_from_the_survivors_run_proves_nothing(tmp_path) -> None:
    """isodate's tests/test_date.py numbers its parameters in an order that varies between runs:
    ids that passed with gold twice may simply not come back in a survivor's run. Only a test
    that ran and failed kills; the grader's own results (GradeResult) are what `measure` reads,
    from a grade function given in place of the reward run."""
    from deepswe.env.grading.outcomes import GradeResult, TestStatus
    from deepswe.env.reward import RewardRun
    from deepswe.eval.strength import measure

    repo, base = _repo(tmp_path, strong=False)
    task = _task(repo, base, ["test_thirty"], "logic")
    a, b, c = (f"tests/test_more.py::test_{n}" for n in ("a", "b", "c"))

    def grade(t, patch):
        if not t.hidden.pass_to_pass and not t.hidden.fail_to_pass:  # the wider probe
            statuses = {a: TestStatus.PASSED, b: TestStatus.PASSED, c: TestStatus.PASSED}
            g = GradeResult(
                outcome=Outcome.UNRESOLVED, parser="pytest", reason="probe", statuses=statuses
            )
        elif t.hidden.pass_to_pass == sorted([a, b, c]):  # the survivor's wider run: b missing
            statuses = {a: TestStatus.PASSED, c: TestStatus.PASSED}
            g = GradeResult(
                outcome=Outcome.UNRESOLVED,
                parser="pytest",
                reason="b missing",
                statuses=statuses,
                p2p_failed=[b],
                missing=[b],
            )
        else:  # the task's own grading: every mutant survives
            g = GradeResult(outcome=Outcome.RESOLVED, parser="pytest", reason="resolved")
        return RewardRun(g, "", "")

    result = measure(task, 2, grade=grade)
    assert result.mutants >= 1 and not result.proven_wrong
    assert len(result.undecided) == result.mutants


def test_a_test_that_fails_the_survivor_only_once_proves_nothing(tmp_path) -> None:
    """As gold must pass a wider test twice, a survivor must fail it twice: on aiohttp_0fdcc291
    a test that fails under load (a 0.4 s timeout) once "proved" wrong a mutant that is gold
    itself. A test failing both survivor runs still proves."""
    from deepswe.env.grading.outcomes import GradeResult, TestStatus
    from deepswe.env.reward import RewardRun
    from deepswe.eval.strength import measure

    repo, base = _repo(tmp_path, strong=False)
    task = _task(repo, base, ["test_thirty"], "flaky")
    flaky, real = "tests/test_more.py::test_flaky", "tests/test_more.py::test_real"
    runs: dict[str, int] = {}

    def grade(t, patch):
        if not t.hidden.pass_to_pass and not t.hidden.fail_to_pass:  # the wider probe
            statuses = {flaky: TestStatus.PASSED, real: TestStatus.PASSED}
            g = GradeResult(
                outcome=Outcome.UNRESOLVED, parser="pytest", reason="p", statuses=statuses
            )
        elif t.hidden.pass_to_pass == sorted([flaky, real]):  # a survivor's wider run
            runs[patch] = runs.get(patch, 0) + 1
            bad = [flaky] if runs[patch] == 1 else []  # fails once, passes the rerun
            bad += [real] if "+    return age > limit" in patch else []  # the real kill
            statuses = {
                n: TestStatus.FAILED if n in bad else TestStatus.PASSED for n in (flaky, real)
            }
            outcome = Outcome.UNRESOLVED if bad else Outcome.RESOLVED
            g = GradeResult(
                outcome=outcome, parser="pytest", reason="w", statuses=statuses, p2p_failed=bad
            )
        else:  # the task's own grading: every mutant survives
            g = GradeResult(outcome=Outcome.RESOLVED, parser="pytest", reason="resolved")
        return RewardRun(g, "", "")

    result = measure(task, 6, grade=grade)
    proven = {m.change: m.killed_by for m in result.proven_wrong}
    assert list(proven.values()) == [real], proven  # the comparison mutant, killed twice
    assert result.undecided and all(r.killed_by is None for r in result.undecided)


def test_a_keywords_tuple_is_not_a_call_to_swap() -> None:
    """`except (A, B)` catches the same in either order: not a wrong fix (aiohttp_0fdcc291)."""
    gold = (
        "--- a/m.py\n+++ b/m.py\n@@ -1,2 +1,2 @@\n try:\n"
        "-    pass\n+    return (a, b) if f(a, b) else g()\n"
        "@@ -4 +4 @@\n-except Exception as e:\n+except (Exception, KeyError) as e:\n"
    )
    swaps = make_mutants(gold, 50, 1, ["swap-arguments"])
    assert [m.change for m in swaps] == ["m.py: 'a' and 'b' swapped"]
    assert "f(b, a)" in swaps[0].patch
