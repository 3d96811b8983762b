"""R2E-Gym rows on our registry-free images: a row's Task -> the Task with an EnvironmentSpec
that `deepswe.env.images.task.ensure_task_image` builds offline, from the repository's clone.

The recipe per repository is R2E-Gym's own (deepswe.env.recipes.r2e_gym.recipes names each file it
restates); this module maps one onto our stack:

| R2E-Gym (Ubuntu 22.04, uv)                 | ours (EnvironmentSpec)                                 |
|--------------------------------------------|--------------------------------------------------------|
| `uv venv --python X.Y` (uv's CPython)      | 3.9 bullseye, 3.11 bookworm (Debian's); else a host    |
|                                            | CPython X.Y on bookworm ($DEEPSWE_HOST_PYTHONS), also  |
|                                            | when its release is nearer the setup log's X.Y.Z       |
| the attempts an install script tries       | the attempt the row's setup log names (metadata        |
|                                            | `r2e_setup_python`), else the script's first           |
| the venv starts empty                      | /opt/venv holds pip and setuptools: the first step runs |
|                                            | with --upgrade (what it names comes out as from empty) |
| `uv pip install [--upgrade] ...` lines     | `pip` / `pip_after`: one pip call each, in order       |
| `uv pip install -r FILE`                   | FILE read at the base commit (r2e_requirements)        |
| what uv resolved (the setup log's          | the same versions: pip constraints of every step       |
| ` + name==version` lines)                  | (`pins`, metadata `r2e_setup_pins`); a step they do    |
|                                            | not resolve for is resolved without them, said in log  |
| `apt-get install` in the Dockerfile        | `apt`: Debian packages (python3-dev with Debian's Py)  |
| the install's build commands               | `install`, offline, in /testbed                        |
| a later `uv pip install X` keeps what is   | X's pip call repeats the earlier steps' requirements:  |
| installed and fits X to it                 | pip resolves X with them, as uv does                   |
| setup_env: `uv pip install chardet`        | a last pip step (no network in a sandbox)              |
| /testbed/.venv                             | /testbed/.venv, /opt/venv a link to it, `/.venv` in    |
|                                            | .git/info/exclude (EnvironmentSpec.venv_in_testbed)    |
| run_tests.sh, /r2e_tests in the image      | never in the image: the grader writes the hidden tests |
|                                            | to /root/r2e_tests at grading (deepswe.env.r2e_layout) |

Unpinned requirements resolve from the index as R2E-Gym's builds saw it (r2e_recipes
INDEX_DATE says why that date). The task's test command (R2E-Gym's tests_cmd) is kept as is.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

from deepswe.data.task import EnvironmentSpec, Task, TaskSource
from deepswe.env.images.history import lacks_base_tree
from deepswe.env.images.submodules import missing as missing_submodules
from deepswe.env.recipes import UnsupportedEnv
from deepswe.env.recipes.r2e_gym.recipes import (
    EPISODE_PACKAGES,
    Attempt,
    MakefileRequirements,
    Packages,
    PipStep,
    Recipe,
    recipe_for,
)
from deepswe.env.recipes.r2e_gym.requirements import (
    RequirementsError,
    makefile_requirements,
    read_requirements,
)

DEBIAN_PYTHONS = {"3.9": "bullseye", "3.11": "bookworm"}
HOST_PYTHON_BASE = "bookworm"  # the suite the host CPythons are built for (hostpython.py)
INDEX_DATE_VAR = "DEEPSWE_R2E_INDEX_DATE"
SETUP_PYTHON = "r2e_setup_python"  # Task.metadata: the X.Y R2E-Gym's install ended up with
SETUP_RELEASE = "r2e_setup_python_release"  # Task.metadata: its X.Y.Z (uv's CPython)
DEBIAN_RELEASES = {"3.9": "3.9.2", "3.11": "3.11.2"}  # bullseye's and bookworm's python3
# The venv's pip (Debian's 20.3 on bullseye) upgraded to the index date's before anything else.
TOOLS = ("--upgrade", "pip")


class R2EEnvError(ValueError):
    """A row cannot be mapped here as asked (no mirror, commit not in the clone); the message
    says what to do."""


class R2EUnsupported(UnsupportedEnv):
    """No environment of ours serves this row; the message says why."""


def needs_r2e_env(task: Task) -> bool:
    """An R2E-Gym row that has no environment spec yet."""
    return task.source is TaskSource.R2E_GYM and task.environment is None


def repo_name(task: Task) -> str:
    """R2E-Gym's name of the row's repository ("pillow")."""
    return task.metadata.get("repo_name") or task.repo.split("/")[-1].lower()


def mirror_path(mirror: Path, task: Task) -> Path:
    """DIR/<owner>__<name>, the layout --repo-mirror expects."""
    return Path(mirror) / task.repo.replace("/", "__")


def recipe_of(task: Task) -> Recipe:
    recipe = recipe_for(repo_name(task))
    if recipe is None:
        raise R2EUnsupported(
            f"{task.instance_id}: R2E-Gym has no install recipe for {repo_name(task)!r}"
        )
    return recipe


def attempt_for(task: Task, recipe: Recipe) -> Attempt:
    """The attempt R2E-Gym's install script kept for this row: the one of the Python its setup
    log names (`metadata["r2e_setup_python"]`), else the script's first."""
    wanted = task.metadata.get(SETUP_PYTHON)
    if not wanted:
        return recipe.attempts[0]
    for attempt in recipe.attempts:
        if attempt.python == wanted:
            return attempt
    tried = ", ".join(a.python for a in recipe.attempts)
    raise R2EUnsupported(
        f"{task.instance_id}: its setup log names Python {wanted}; {recipe.name}'s install "
        f"script tries {tried}"
    )


def interpreter_for(task: Task, python: str) -> tuple[str, str | None]:
    """(Debian suite, host Python version or None) for `python`. Debian's, unless a host
    CPython of that X.Y is a release nearer the one R2E-Gym's install used (its setup log's
    "Using CPython 3.9.21"; bullseye ships 3.9.2): tracebacks then name the same lines."""
    from deepswe.env.images.hostpython import NoHostPython, host_python

    if python in DEBIAN_PYTHONS:
        wanted = _patch(task.metadata.get(SETUP_RELEASE))
        try:
            host = _patch(host_python(python).name) if wanted is not None else None
        except NoHostPython:
            host = None
        debian = _patch(DEBIAN_RELEASES[python])
        if host is None or abs(host - wanted) >= abs(debian - wanted):
            return DEBIAN_PYTHONS[python], None
        return HOST_PYTHON_BASE, python

    try:
        host_python(python)
    except NoHostPython as exc:
        raise R2EUnsupported(f"{task.instance_id}: needs Python {python}: {exc}") from None
    return HOST_PYTHON_BASE, python


def _patch(release: str | None) -> int | None:
    """3.9.21 -> 21; None for anything else."""
    m = re.fullmatch(r"\d+\.\d+\.(\d+)", release or "")
    return int(m.group(1)) if m else None


def index_date(recipe: Recipe) -> str | None:
    return os.environ.get(INDEX_DATE_VAR, recipe.index_date) or None


def _step_args(step: PipStep, repo_dir: Path, commit: str, python: str) -> list[str] | None:
    """One pip call's arguments; None when the step does not apply at this commit."""
    if isinstance(step, Packages):
        return list(step.names)
    if isinstance(step, MakefileRequirements):
        return makefile_requirements(repo_dir, commit, step.targets, python) or None
    found = read_requirements(repo_dir, commit, step.path, python)
    if found is None:
        if step.optional:
            return None
        raise R2EEnvError(f"{step.path} does not exist at {commit} in {repo_dir}")
    return found.pinned() or None


def pip_steps(attempt: Attempt, repo_dir: Path, commit: str) -> list[list[str]]:
    """The attempt's pip calls in order: our pip upgraded first (the tool that installs, as
    uv is R2E-Gym's), then the script's steps, chardet last; see the module doc for
    --upgrade."""
    calls: list[list[str]] = []
    earlier: list[str] = []
    for step in attempt.steps:
        args = _step_args(step, repo_dir, commit, attempt.python)
        if args is None:
            continue
        if not calls or (isinstance(step, Packages) and step.upgrade):
            calls.append(["--upgrade", *args])
        elif isinstance(step, Packages):
            # `uv pip install X` keeps what is installed and picks an X that fits it (aiohttp's
            # test packages after make: pytest-asyncio 0.23.8 for the pinned pytest 8.1.1);
            # pip would upgrade the installed instead. Resolving X with what came before does
            # as uv does, on the host and in the image alike.
            calls.append([*earlier, *(a for a in args if a not in earlier)])
        else:
            calls.append(args)
        earlier += [a for a in args if a not in earlier]
    return [list(TOOLS), *calls, [*earlier, *EPISODE_PACKAGES]]


def _check_commit(task: Task, repo_dir: Path) -> None:
    res = subprocess.run(
        [
            "git",
            "-C",
            str(repo_dir),
            "rev-parse",
            "--verify",
            "-q",
            f"{task.base_commit}^{{commit}}",
        ],
        capture_output=True,
        text=True,
    )
    if res.returncode != 0:
        raise R2EEnvError(
            f"{task.instance_id}: {task.base_commit} is not in {repo_dir}; update the clone"
        )


def environment_for(
    task: Task, recipe: Recipe, attempt: Attempt, repo_dir: Path
) -> EnvironmentSpec:
    """The EnvironmentSpec that installs the row as R2E-Gym's image does, offline."""
    suite, host = interpreter_for(task, attempt.python)
    try:
        steps = pip_steps(attempt, repo_dir, task.base_commit)
    except RequirementsError as exc:
        raise R2EEnvError(f"{task.instance_id}: {exc}") from None
    apt = set(recipe.apt) | ({"python3-dev"} if host is None else set())
    return EnvironmentSpec(
        base=suite,  # type: ignore[arg-type]
        python=host,
        source=str(repo_dir),
        apt=sorted(apt),
        pip=steps[0],
        pip_after=steps[1:],
        install=list(attempt.install),
        venv_in_testbed=True,
        index_date=index_date(recipe),
        pins=json.loads(task.metadata.get("r2e_setup_pins", "[]")),  # the setup log's versions
        test_cmd=task.test_spec.command,
        log_parser=task.test_spec.log_parser,
    )


def build_from_source(task: Task, mirror: Path | None) -> Task:
    """`task` with an EnvironmentSpec on our base images and no image. Raises R2EUnsupported
    (no environment of ours serves the row) or R2EEnvError (the mirror cannot serve it)."""
    recipe = recipe_of(task)
    attempt = attempt_for(task, recipe)
    interpreter_for(task, attempt.python)  # unsupported says so before any mirror check
    if mirror is None:
        raise R2EEnvError(
            f"{task.instance_id}: building {task.repo} from source needs --repo-mirror DIR "
            f"with a clone at DIR/{task.repo.replace('/', '__')}"
        )
    repo_dir = mirror_path(mirror, task)
    if not repo_dir.is_dir():
        raise R2EEnvError(f"{task.instance_id}: no clone of {task.repo} at {repo_dir}")
    _check_commit(task, repo_dir)
    if gap := lacks_base_tree(repo_dir, task.base_commit):
        raise R2EUnsupported(f"{task.instance_id}: {gap}")
    if recipe.needs_submodules:
        subs = missing_submodules(repo_dir, task.base_commit, repo_dir.absolute().parent)
        if subs:
            raise R2EUnsupported(
                f"{task.instance_id}: R2E-Gym's build checks out submodules no clone here "
                f"holds: {'; '.join(subs)}"
            )
    env = environment_for(task, recipe, attempt, repo_dir)
    return task.model_copy(update={"environment": env, "image": None})


def prepare(task: Task, *, mode: str, mirror: Path | None, image_exists=None) -> Task:
    """Fill an R2E-Gym row in: mode "build" (from source), "image" (R2E-Gym's image as named),
    or "auto" (the image when the engine has it, else build). Other tasks pass through."""
    if not needs_r2e_env(task):
        return task
    if mode == "image" or (
        mode == "auto" and task.image and image_exists is not None and image_exists(task.image)
    ):
        return task
    if mirror is None:
        interpreter_for(task, attempt_for(task, recipe_of(task)).python)  # unsupported first
        raise R2EEnvError(
            f"{task.instance_id}: R2E-Gym's image {task.image} is not on this Docker engine "
            f"and nothing can pull it; build it from source with --repo-mirror DIR (a git clone "
            f"of {task.repo} at DIR/{task.repo.replace('/', '__')}), or load the image"
        )
    return build_from_source(task, mirror)


def prepare_all(
    tasks: list[Task], *, mode: str, mirror: Path | None
) -> tuple[list[Task], dict[str, str]]:
    """Every task prepared, and {instance_id: why} for the rows no environment of ours serves
    (they stay as they were and are recorded unsupported_env, never run)."""
    from deepswe.env.images.task import image_exists

    out, unsupported = [], {}
    for t in tasks:
        try:
            out.append(prepare(t, mode=mode, mirror=mirror, image_exists=image_exists))
        except R2EUnsupported as exc:
            out.append(t)
            unsupported[t.instance_id] = str(exc)
    return out, unsupported


__all__ = [
    "R2EEnvError",
    "R2EUnsupported",
    "attempt_for",
    "build_from_source",
    "environment_for",
    "interpreter_for",
    "mirror_path",
    "needs_r2e_env",
    "pip_steps",
    "prepare",
    "prepare_all",
    "recipe_of",
    "repo_name",
]
