"""A deterministic toy dataset: real bugs in a real git repository made on the spot.

`git`, `commit_repo` and `diff_to` are the helpers it is made with; tests that build their own
small repositories use them too.

Used by the tests and the harness benchmark. All tasks share one repository and base commit, so
they share one task image (built once, ~seconds); each task has its own bug, gold patch and
hidden test. A later commit holds every fix, so a sandbox that leaks history would show it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from deepswe.data.task import EnvironmentSpec, HiddenTests, Task, TaskSource, TestSpec

# name -> (correct body, buggy body, hidden test body)
FUNCS: dict[str, tuple[str, str, str]] = {
    "add": ("return a + b", "return a - b", "assert add(2, 3) == 5"),
    "mul": ("return a * b", "return a + b", "assert mul(3, 4) == 12"),
    "sub": ("return a - b", "return b - a", "assert sub(5, 2) == 3"),
    "neg": ("return -a", "return a", "assert neg(4) == -4"),
}


def _module(bugs: set[str]) -> str:
    out = []
    for name, (good, bad, _) in FUNCS.items():
        args = "a" if name == "neg" else "a, b"
        out.append(f"def {name}({args}):\n    {bad if name in bugs else good}\n")
    return "\n\n".join(out)


def git(repo: Path, *args: str) -> str:
    """Run git in `repo` with a fixed identity; its stdout."""
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def commit_repo(repo: Path, files: dict[str, str], message: str = "initial") -> str:
    """A git repository at `repo` (made if absent, branch main) holding `files` (path -> text)
    in one new commit; its id."""
    if not (repo / ".git").exists():
        repo.mkdir(parents=True, exist_ok=True)
        git(repo, "init", "-q", "-b", "main")
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)
    return git(repo, "rev-parse", "HEAD").strip()


def diff_to(repo: Path, path: str, new: str) -> str:
    """The diff turning the committed `path` into `new`, leaving the worktree as it was."""
    target = repo / path
    old = target.read_text() if target.exists() else None
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(new)
    git(repo, "add", "-N", path)
    out = git(repo, "diff", "--", path)
    git(repo, "reset", "-q", "--", path)
    if old is None:
        target.unlink()
    else:
        target.write_text(old)
    return out


def make_toy_tasks(root: Path, n: int = 4) -> list[Task]:
    """`n` (<= 4) tasks over one repository created under `root`."""
    names = list(FUNCS)[:n]
    repo = Path(root) / "toycalc"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "toycalc").mkdir()
    (repo / "toycalc" / "__init__.py").write_text("")
    (repo / "toycalc" / "ops.py").write_text(_module(set(names)))
    (repo / "tests").mkdir()
    (repo / "tests" / "test_smoke.py").write_text(
        "import toycalc.ops\n\n\ndef test_import():\n    assert toycalc.ops\n"
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "toycalc with bugs")
    base = git(repo, "rev-parse", "HEAD").strip()
    tasks = []
    for name in names:
        fixed = _module(set(names) - {name})
        test = f"from toycalc.ops import {name}\n\n\ndef test_{name}():\n    {FUNCS[name][2]}\n"
        tasks.append(
            Task(
                instance_id=f"toycalc__toycalc-{name}",
                repo="toy/toycalc",
                base_commit=base,
                problem_statement=f"`{name}` gives the wrong answer: {FUNCS[name][2]} fails.",
                source=TaskSource.CUSTOM,
                environment=EnvironmentSpec(source=str(repo), pip=["pytest"]),
                test_spec=TestSpec(command="python -m pytest -rA tests", log_parser="pytest"),
                hidden=HiddenTests(
                    fail_to_pass=[f"tests/test_hidden_{name}.py::test_{name}"],
                    pass_to_pass=["tests/test_smoke.py::test_import"],
                    test_patch=diff_to(repo, f"tests/test_hidden_{name}.py", test),
                ),
                gold_patch=diff_to(repo, "toycalc/ops.py", fixed),
            )
        )
    (repo / "toycalc" / "ops.py").write_text(_module(set()))
    git(repo, "commit", "-qam", "every fix")
    return tasks


def pth_install(folder: str = "/testbed") -> str:
    """The install line that puts `folder` on the image's sys.path through a .pth file, as
    swe-mini's rows do (the working tree imported without a build backend, offline)."""
    return (
        "python -c 'import site, pathlib; "
        f'pathlib.Path(site.getsitepackages()[0], "testbed.pth").write_text("{folder}\\n")\''
    )


def write_tasks(tasks: list[Task], path: Path) -> Path:
    """One Task JSON a line, the format `load_tasks` reads."""
    path.write_text("".join(t.model_dump_json() + "\n" for t in tasks))
    return path
