"""One kept mutant -> one `Task` (the row written to data/swe-mini/tasks.jsonl)."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path

from deepswe.data.swemini.attempt import Attempt
from deepswe.data.swemini.issue import Runner, write_issue
from deepswe.data.swemini.manifest import Manifest, Project
from deepswe.data.swemini.mutate import Mutation
from deepswe.data.swemini.runner import test_command
from deepswe.data.task import EnvironmentSpec, HiddenTests, Task, TaskSource, TestSpec

TEST_TIMEOUT_S = 120.0


def install_commands(project: Project) -> list[str]:
    """Put the import root on the image's sys.path with a .pth file: `python` then imports the
    working tree (as `pip install -e .` would) without a build backend, offline."""
    root = "/testbed" if project.pythonpath in (".", "") else f"/testbed/{project.pythonpath}"
    code = f"import site, pathlib; pathlib.Path(site.getsitepackages()[0], 'testbed.pth').write_text({root + chr(10)!r})"
    return [f"python -c {shlex.quote(code)}"]


def reader(repo: Path) -> Callable[[str], str | None]:
    """The repository's files by relative path (the tests are never mutated)."""

    def read(rel: str) -> str | None:
        path = (repo / rel).resolve()
        if not path.is_file() or repo.resolve() not in path.parents:
            return None
        return path.read_text(errors="replace")

    return read


def make_task(
    manifest: Manifest,
    project: Project,
    mutation: Mutation,
    attempt: Attempt,
    base_commit: str,
    gold_patch: str,
    short_id: str,
    seed: int,
    repo: Path,
    run: Runner,
) -> Task | str:
    """The task, or why the kept mutant has no actionable problem statement."""
    instance_id = f"{project.name}__{project.name}-{short_id}"
    written = write_issue(
        attempt,
        reader(repo),
        project.api_modules,
        run,
        project.name,
        project.version,
        f"{seed}:{instance_id}",
    )
    if written.statement is None:
        return written.reason
    statement = written.statement
    command = test_command(attempt.files)
    return Task(
        instance_id=instance_id,
        repo=f"pypi/{project.name}",
        base_commit=base_commit,
        problem_statement=statement,
        source=TaskSource.SWE_MINI,
        environment=EnvironmentSpec(
            base="bookworm",
            source=project.repo_rel,
            pip=[manifest.pytest],
            install=install_commands(project),
            test_cmd=command,
            log_parser="pytest",
        ),
        test_spec=TestSpec(command=command, log_parser="pytest", timeout_s=TEST_TIMEOUT_S),
        hidden=HiddenTests(
            fail_to_pass=attempt.fail_to_pass,
            pass_to_pass=attempt.pass_to_pass,
            graded_files=attempt.files,  # restored before grading: the tests live in the repo
            reproduction=written.reproduction,  # run as a plain script under strict rules
        ),
        gold_patch=gold_patch,
        version=project.version,
        metadata={
            "split": project.split,
            "project": project.key,
            "mutation": mutation.kind,
            "file": mutation.path,
            "line": str(mutation.line),
            "function": mutation.function,
            "seed": str(seed),
        },
    )
