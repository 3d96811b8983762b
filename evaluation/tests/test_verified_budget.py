"""bench/verified_budget.py's arithmetic (issue #45): a Debian base shared by environments is
counted once, an environment counts what it adds to its base, and a table it prints can be
carried into a later one. The real budget runs on built Verified rows (the bench itself); here
the rows are made up, in the shape bench/verified.py writes them."""

from __future__ import annotations

import importlib.util
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _budget():
    spec = importlib.util.spec_from_file_location(
        "verified_budget", ROOT / "bench" / "verified_budget.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _row(instance_id: str, env_mb: int, **more) -> dict:
    return {"instance_id": instance_id, "repo": "o/r", "version": "1", "env_mb": env_mb, **more}


def test_an_environment_counts_what_it_adds_to_its_base():
    vb = _budget()
    built = [
        _row("o__r-1", 700, base="deepswe/base:b-1", base_mb=200),  # measured with its base
        _row("o__r-2", 650),  # an older row: its base's size in the engine now
        _row("o__r-3", 300),  # a base the engine does not hold: counted whole, and said
    ]
    base_of = {"o__r-2": "deepswe/base:b-1", "o__r-3": "deepswe/base:b-2"}
    unknown = vb._env_own(built, base_of, {"deepswe/base:b-1": 210.0})
    assert [r["env_own_mb"] for r in built] == [500, 440.0, 300]
    assert unknown == {"deepswe/base:b-2"}


def test_bases_are_one_line_and_in_the_total_once():
    vb = _budget()
    per_repo = defaultdict(lambda: defaultdict(float))
    for repo, envs in (("a/a", 2), ("b/b", 3)):
        acc = per_repo[repo]
        acc.update(rows=10, bases=1, envs=envs, histories=1, trees=0, task_s=100.0)
        acc.update(env_mb=1000.0 * envs, history_mb=100.0, tree_mb=0.0, task_mb=500.0)
    shared = {"bases": 1, "base_mb": 400.0}
    table = vb._table(per_repo, shared, set(), 60.0, 4, 2, set(), set())
    lines = table.splitlines()
    assert "| Debian bases, each once | - | 1 | - | - | - | 0.4 | - | - | - | - | 0.4 |" in lines
    # 2 + 3 GB of environments, 0.2 of histories, 1.0 of tasks, 0.4 of the base, once
    assert "| all | 20 | 1 | 5 | 2 | 0 | 0.4 | 5.0 | 0.2 | 0.0 | 1.0 | 6.6 |" in lines
    assert "6.6 GB against Epoch's 30 GiB (32.2 GB): 0.20x" in table
    carried = vb.carried_lines(table, set())
    assert set(carried) == {"a/a", "b/b"}  # the bases' line is not a repository's
    assert carried["b/b"]["env_mb"] == 3000 and carried["b/b"]["envs"] == 3
    assert "base_mb" not in carried["b/b"]  # counted once, on the shared line
