"""One kept mutant -> one `Task` (the row written to data/swe-mini/tasks.jsonl)."""

from __future__ import annotations

import random
import re
import shlex
from pathlib import Path

from deepswe.data.swemini.attempt import Attempt
from deepswe.data.swemini.failure import Observation, observe
from deepswe.data.swemini.manifest import Manifest, Project
from deepswe.data.swemini.mutate import Mutation
from deepswe.data.swemini.runner import test_command
from deepswe.data.swemini.statement import write_statement
from deepswe.data.task import EnvironmentSpec, HiddenTests, Task, TaskSource, TestSpec

TEST_TIMEOUT_S = 120.0
_RANK = {"compare": 0, "raises": 1, "no_raise": 2, "truth": 3, "other": 4}


def install_commands(project: Project) -> list[str]:
    """Put the import root on the image's sys.path with a .pth file: `python` then imports the
    working tree (as `pip install -e .` would) without a build backend, offline."""
    root = "/testbed" if project.pythonpath in (".", "") else f"/testbed/{project.pythonpath}"
    code = f"import site, pathlib; pathlib.Path(site.getsitepackages()[0], 'testbed.pth').write_text({root + chr(10)!r})"
    return [f"python -c {shlex.quote(code)}"]


def _ranked_observations(
    attempt: Attempt, rng: random.Random, repo: Path
) -> list[tuple[str, Observation]]:
    """Readable failures, best kind first (a wrong value beats a crash), ties shuffled by rng."""

    def sources(nodeid: str) -> str:
        return (repo / nodeid.split("::", 1)[0]).read_text(errors="replace")

    found = [
        (t, o)
        for t, s in sorted(attempt.sections.items())
        if (o := observe(s, sources(t))) is not None
    ]
    rng.shuffle(found)
    return sorted(found, key=lambda to: _RANK[to[1].kind])  # stable: ties keep the shuffle


def forbidden_words(attempt: Attempt) -> set[str]:
    """Names a problem statement must not contain: the failing tests' functions, classes,
    files and modules."""
    words = set()
    for nodeid in attempt.fail_to_pass + attempt.pass_to_pass:
        path, _, rest = nodeid.partition("::")
        words |= {Path(path).name, Path(path).stem}
        words |= {part.split("[")[0] for part in rest.split("::")}
    return {w for w in words if len(w) > 3}


# Machine-specific text (paths, temp names, addresses) would make the statement differ between
# machines and runs, and says nothing about the bug.
_LOCAL_TEXT = re.compile(r"/tmp/|/root/|/home/|site-packages|swe-mini|0x[0-9a-fA-F]{6,}")


def _leaks(text: str, words: set[str]) -> bool:
    return any(w in text for w in words) or _LOCAL_TEXT.search(text) is not None


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
) -> Task | None:
    instance_id = f"{project.name}__{project.name}-{short_id}"
    rng = random.Random(f"{seed}:{instance_id}")
    ranked = _ranked_observations(attempt, rng, repo)
    if not ranked:
        return None
    words, statement = forbidden_words(attempt), None
    for test_id, obs in ranked:
        test_source = (repo / test_id.split("::", 1)[0]).read_text(errors="replace")
        text = write_statement(
            obs, test_source, project.name, project.version, f"{seed}:{instance_id}"
        )
        if not _leaks(text, words):
            statement = text
            break
    if statement is None:
        return None  # every readable failure would name a test (e.g. in a repr): no task
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
