"""Drop training tasks whose repository is also an evaluation repository.

DeepSWE trains on R2E-Gym and evaluates on SWE-Bench-Verified; R2E-Gym-Subset holds sympy
tasks, and sympy is one of SWE-Bench-Verified's repositories, so those must go.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict

from deepswe.data.task import Task

# The 12 repositories of SWE-Bench-Verified (princeton-nlp/SWE-bench_Verified, test split, the
# distinct values of its `repo` column; the same 12 as SWE-bench's test set).
SWE_BENCH_VERIFIED_REPOS: tuple[str, ...] = (
    "astropy/astropy",
    "django/django",
    "matplotlib/matplotlib",
    "mwaskom/seaborn",
    "pallets/flask",
    "psf/requests",
    "pydata/xarray",
    "pylint-dev/pylint",
    "pytest-dev/pytest",
    "scikit-learn/scikit-learn",
    "sphinx-doc/sphinx",
    "sympy/sympy",
)


def repo_key(repo: str) -> str:
    """Normalised repository name for comparison: case-insensitive, owner optional, so
    "sympy", "SymPy/sympy" and "https://github.com/sympy/sympy.git" all give "sympy"."""
    name = repo.strip().rstrip("/").lower()
    name = name.removesuffix(".git")
    return name.rsplit("/", 1)[-1]


def eval_repos_of(tasks: Iterable[Task]) -> list[str]:
    """The distinct repositories of loaded evaluation tasks (e.g. SWE-bench), sorted."""
    return sorted({t.repo for t in tasks})


class DecontaminationReport(BaseModel):
    """What `decontaminate` dropped: counts per training repository, as the tasks named it."""

    model_config = ConfigDict(frozen=True)

    total: int
    kept: int
    dropped: dict[str, int]
    eval_repos: list[str]

    @property
    def n_dropped(self) -> int:
        return sum(self.dropped.values())


def decontaminate(
    train_tasks: Iterable[Task], eval_repos: Iterable[str] = SWE_BENCH_VERIFIED_REPOS
) -> tuple[list[Task], DecontaminationReport]:
    """Keep the training tasks whose repository is not among `eval_repos` (compared by
    `repo_key`: a bare "sympy" matches "sympy/sympy"; two different owners of the same name
    also match, erring on the side of dropping)."""
    eval_list = sorted(set(eval_repos))
    banned = {repo_key(r) for r in eval_list}
    kept: list[Task] = []
    dropped: Counter[str] = Counter()
    total = 0
    for task in train_tasks:
        total += 1
        if repo_key(task.repo) in banned:
            dropped[task.repo] += 1
        else:
            kept.append(task)
    report = DecontaminationReport(
        total=total, kept=len(kept), dropped=dict(sorted(dropped.items())), eval_repos=eval_list
    )
    return kept, report
