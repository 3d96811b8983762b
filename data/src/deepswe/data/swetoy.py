"""swe-toy: the tiny profile's RL curriculum, one bug shape over many small repositories.

Every task is its own git repository (a made-up project with an `ops.py` of four to six small
functions, a README and a smoke test) in which one function that should add returns the
difference: `return a - b` where `return a + b` is right. The function's name, its neighbours,
the project, the numbers in the statement and the statement's wording change from task to task;
the fix's text does not. So a policy that learned the fix on the train split can apply it to
test-split repositories it never saw (other projects, other function names), and the held-out
evaluation measures what RL changed in how often the policy makes the right edit. It does not
measure finding a bug, or writing a fix the policy has not seen: that is what swe-mini and
SWE-Bench-Verified are for (a 10M-parameter model scores ~0 on them).

Deterministic: the same (split, n, seed) gives the same repositories, commits (fixed author
dates) and rows, so the task images built from them are found again on a rerun.
"""

from __future__ import annotations

import os
import random
import subprocess
from pathlib import Path

from deepswe.data.task import EnvironmentSpec, HiddenTests, Task, TaskSource, TestSpec
from deepswe.data.toy import diff_to

BUGGY, FIXED = "return a - b", "return a + b"
# Names of the function that should add: train and test draw from disjoint halves.
ADDERS = [
    "add",
    "plus",
    "total",
    "combine",
    "sum_pair",
    "merge_counts",
    "accumulate",
    "grow_by",
    "extend_by",
    "shift_up",
    "increase",
    "raise_by",
    "credit",
    "deposit",
    "bump",
    "join_totals",
    "add_offset",
    "stack",
    "append_amount",
    "top_up",
    "carry_over",
    "tally_up",
    "sum_two",
    "pile_on",
]
# Neighbours: (name, args, body, a hidden-test-free example call and its value).
NEIGHBOURS = [
    ("product", "a, b", "return a * b"),
    ("larger", "a, b", "return a if a > b else b"),
    ("smaller", "a, b", "return a if a < b else b"),
    ("double", "a", "return a * 2"),
    ("halve", "a", "return a // 2"),
    ("magnitude", "a", "return abs(a)"),
    ("is_even", "a", "return a % 2 == 0"),
    ("clamp", "a, lo, hi", "return max(lo, min(a, hi))"),
    ("square", "a", "return a * a"),
    ("negate", "a", "return -a"),
]
PROJECTS = [
    "ledger",
    "tally",
    "meter",
    "abacus",
    "counter",
    "scales",
    "gauge",
    "crate",
    "parcel",
    "bundle",
    "quota",
    "budget",
    "census",
    "inventory",
    "scorebook",
    "pedometer",
    "odometer",
    "treasury",
    "pantry",
    "cellar",
    "granary",
    "wallet",
    "piggybank",
    "till",
]
STATEMENTS = [
    "`{name}({x}, {y})` returns `{bad}`, but it should return `{good}`.",
    "`{project}.ops.{name}` gives the wrong answer: `{name}({x}, {y})` is `{bad}`, I expected "
    "`{good}`.",
    "I'm using {project} and `{name}({x}, {y})` returns `{bad}` instead of `{good}`.",
    "Wrong result from `{name}`: calling `{name}({x}, {y})` gives `{bad}`; the documented result "
    "is `{good}`.",
]
SPLITS = ("train", "test")
# Fixed commit dates: the same repository content gives the same commit ids on every machine.
_GIT_ENV = {
    "GIT_AUTHOR_NAME": "swe-toy",
    "GIT_AUTHOR_EMAIL": "swe-toy@localhost",
    "GIT_COMMITTER_NAME": "swe-toy",
    "GIT_COMMITTER_EMAIL": "swe-toy@localhost",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00+00:00",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00+00:00",
}


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, **_GIT_ENV, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env
    ).stdout


def _ops(adder: str, neighbours: list[tuple[str, str, str]], pos: int, body: str) -> str:
    funcs = [f"def {n}({args}):\n    {b}\n" for n, args, b in neighbours]
    funcs.insert(pos, f"def {adder}(a, b):\n    {body}\n")
    return '"""Small arithmetic helpers."""\n\n\n' + "\n\n".join(funcs)


def _split_pool(pool: list[str], split: str) -> list[str]:
    """Train takes the even positions, test the odd ones: the splits share no name."""
    return pool[SPLITS.index(split) :: 2]


def make_task(root: Path, split: str, k: int, seed: int = 0) -> Task:
    """Task `k` of `split`: its repository is created at root/<project>-<k> (must not exist)."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, not {split!r}")
    rng = random.Random(f"swe-toy:{seed}:{split}:{k}")
    projects, adders = _split_pool(PROJECTS, split), _split_pool(ADDERS, split)
    project = f"{projects[k % len(projects)]}{k // len(projects) or ''}"
    adder = adders[rng.randrange(len(adders))]
    neighbours = rng.sample(NEIGHBOURS, rng.randint(3, 5))
    pos = rng.randint(0, len(neighbours))
    x, y = rng.randint(2, 40), rng.randint(1, 30)

    repo = Path(root) / f"{project}-{k}"
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text(f"# {project}\n\nSmall arithmetic helpers for {project}.\n")
    (repo / "ops.py").write_text(_ops(adder, neighbours, pos, BUGGY))
    (repo / "tests").mkdir()
    (repo / "tests" / "test_smoke.py").write_text(
        "import ops\n\n\ndef test_import():\n    assert ops.__doc__\n"
    )
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", f"{project}: arithmetic helpers")
    base = _git(repo, "rev-parse", "HEAD").strip()

    test_path = f"tests/test_{adder}.py"
    test = f"from ops import {adder}\n\n\ndef test_{adder}():\n    assert {adder}({x}, {y}) == {x + y}\n"
    statement = rng.choice(STATEMENTS).format(
        name=adder, x=x, y=y, bad=x - y, good=x + y, project=project
    )
    return Task(
        instance_id=f"swetoy__{project}-{k}",
        repo=f"swe-toy/{project}",
        base_commit=base,
        problem_statement=statement + "\n",
        source=TaskSource.CUSTOM,
        environment=EnvironmentSpec(source=str(repo), pip=["pytest"]),
        test_spec=TestSpec(
            command="python -m pytest -rA -p no:cacheprovider tests", log_parser="pytest"
        ),
        hidden=HiddenTests(
            fail_to_pass=[f"{test_path}::test_{adder}"],
            pass_to_pass=["tests/test_smoke.py::test_import"],
            test_patch=diff_to(repo, test_path, test),
            graded_files=[test_path],
        ),
        gold_patch=diff_to(repo, "ops.py", _ops(adder, neighbours, pos, FIXED)),
    )


def make_split(root: Path, split: str, n: int, seed: int = 0) -> list[Task]:
    """`n` tasks of `split`, their repositories under root/split/."""
    return [make_task(Path(root) / split, split, k, seed) for k in range(n)]


def write_dataset(out: Path, n_train: int, n_test: int, seed: int = 0) -> dict[str, Path]:
    """out/train.jsonl and out/test.jsonl with their repositories beside them. Idempotent: an
    existing complete dataset made with the same sizes and seed is kept as it is."""
    out = Path(out)
    stamp = out / "MADE"
    want = f"swe-toy train={n_train} test={n_test} seed={seed}\n"
    paths = {s: out / f"{s}.jsonl" for s in SPLITS}
    if stamp.exists() and stamp.read_text() == want:
        return paths
    if out.exists():
        import shutil

        shutil.rmtree(out)
    for split, n in (("train", n_train), ("test", n_test)):
        tasks = make_split(out, split, n, seed)
        paths[split].write_text("".join(t.model_dump_json() + "\n" for t in tasks))
    stamp.write_text(want)
    return paths
