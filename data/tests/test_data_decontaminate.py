"""Decontamination: training tasks from evaluation repositories are dropped and counted."""

from __future__ import annotations

from deepswe.data.decontaminate import (
    SWE_BENCH_VERIFIED_REPOS,
    decontaminate,
    eval_repos_of,
    repo_key,
)
from deepswe.data.task import HiddenTests, Task, TaskSource, TestSpec


def task(iid: str, repo: str, source: TaskSource = TaskSource.R2E_GYM) -> Task:
    return Task(
        instance_id=iid,
        repo=repo,
        base_commit="abc1234^",
        problem_statement="p",
        source=source,
        test_spec=TestSpec(command="bash run_tests.sh", log_parser="r2e-gym"),
        hidden=HiddenTests(),
    )


def test_the_builtin_list_is_swe_bench_verifieds_twelve_repos() -> None:
    assert (
        len(SWE_BENCH_VERIFIED_REPOS) == 12 == len({repo_key(r) for r in SWE_BENCH_VERIFIED_REPOS})
    )
    assert "sympy/sympy" in SWE_BENCH_VERIFIED_REPOS and "django/django" in SWE_BENCH_VERIFIED_REPOS


def test_repo_names_match_with_or_without_owner_and_case() -> None:
    assert (
        repo_key("sympy")
        == repo_key("SymPy/sympy")
        == repo_key("https://github.com/sympy/sympy.git")
    )
    assert repo_key("psf/requests") != repo_key("pandas-dev/pandas")


def test_r2e_style_tasks_from_eval_repos_are_dropped_and_counted() -> None:
    train = [
        task("sympy_1", "sympy"),
        task("sympy_2", "sympy/sympy"),
        task("aiohttp_1", "aio-libs/aiohttp"),
        task("requests_1", "Requests"),
        task("pandas_1", "pandas-dev/pandas"),
    ]
    kept, report = decontaminate(train)
    assert [t.instance_id for t in kept] == ["aiohttp_1", "pandas_1"]
    assert report.dropped == {"Requests": 1, "sympy": 1, "sympy/sympy": 1}
    assert (report.total, report.kept, report.n_dropped) == (5, 2, 3)


def test_eval_repos_can_come_from_loaded_eval_tasks() -> None:
    evals = [task("django__django-1", "django/django", TaskSource.SWE_BENCH_VERIFIED)] * 2
    repos = eval_repos_of(evals)
    assert repos == ["django/django"]
    kept, report = decontaminate([task("a", "sympy"), task("b", "django")], repos)
    assert [t.instance_id for t in kept] == ["a"] and report.dropped == {"django": 1}
