"""SWE-bench tasks on our registry-free images: a SWE-bench Task -> a Task with an
EnvironmentSpec that `deepswe.env.images.task.ensure_task_image` can build.

The install and test recipe comes from the `swebench` package used as a library (4.1.0:
`MAP_REPO_VERSION_TO_SPECS`, `MAP_REPO_TO_REQS_PATHS`, `get_test_directives`,
`clean_requirements`); we translate it from conda to our Debian base images:

- python version -> base suite: 3.11 -> bookworm, 3.9 -> bullseye; anything else (3.5, 3.6,
  3.8, 3.10, ...) is UnsupportedEnv, reported as `unsupported_env` and never graded;
- `packages` -> pip requirements: "requirements.txt" is read from the repository mirror at
  environment_setup_commit (following `-r` includes, dropping the lines swebench drops); a
  conda package list is split and its `pkg=1.2` pins become `pkg==1.2`; "environment.yml"
  needs conda and is UnsupportedEnv; `pip_packages` are added as they are;
- `pre_install` + `install` -> install commands, run offline (no index, no build isolation:
  every dependency is already installed from host-downloaded wheels);
- test command = `eval_commands`, the re-install, then `test_cmd` + the test directives of the
  test patch, in the order swebench's eval script runs them (make_eval_script_list_py).
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

from deepswe.data.task import EnvironmentSpec, Task, TaskSource, TestSpec

BASE_FOR_PYTHON = {"3.11": "bookworm", "3.9": "bullseye"}
# Offline pip for install commands: the env layer holds every requirement already.
OFFLINE_PIP = (
    "export PIP_NO_INDEX=1 PIP_NO_BUILD_ISOLATION=0"  # "0" disables isolation (pip's env-var quirk)
)
REINSTALL_LOG = "/tmp/deepswe-reinstall.log"
CONDA_ACTIVATE = "source /opt/miniconda3/bin/activate && conda activate testbed"


class UnsupportedEnv(Exception):
    """No base image of ours serves this instance's environment; the message says why."""


class SwebenchEnvError(ValueError):
    """The instance cannot be mapped (missing mirror file, unknown repo/version)."""


def specs_for(task: Task) -> dict:
    from swebench.harness.constants import MAP_REPO_VERSION_TO_SPECS

    try:
        return MAP_REPO_VERSION_TO_SPECS[task.repo][str(task.version)]
    except KeyError:
        raise UnsupportedEnv(
            f"{task.instance_id}: swebench 4.1.0 has no specs for {task.repo} version {task.version}"
        ) from None


def base_for(task: Task, specs: dict) -> str:
    python = specs.get("python")
    if python not in BASE_FOR_PYTHON:
        served = ", ".join(f"{v} ({s})" for v, s in BASE_FOR_PYTHON.items())
        raise UnsupportedEnv(
            f"{task.instance_id}: needs Python {python}; our base images serve {served}"
        )
    return BASE_FOR_PYTHON[python]


def mirror_path(mirror: Path, repo: str) -> Path:
    """DIR/<owner>__<name>, the layout --repo-mirror expects."""
    return Path(mirror) / repo.replace("/", "__")


def _git_show(repo_dir: Path, commit: str, path: str) -> str | None:
    res = subprocess.run(
        ["git", "-C", str(repo_dir), "show", f"{commit}:{path}"], capture_output=True, text=True
    )
    return res.stdout if res.returncode == 0 else None


def _keep(line: str) -> bool:
    # swebench's get_requirements_by_commit drops these lines (editable self, comments, extras)
    s = line.strip()
    return bool(s) and not any(s.startswith(x) for x in ("-e .", "#", ".[test"))


def requirements_from_mirror(task: Task, repo_dir: Path) -> list[str]:
    """The requirements file swebench would fetch from GitHub, read from the local clone."""
    from swebench.harness.constants import MAP_REPO_TO_REQS_PATHS
    from swebench.harness.test_spec.python import clean_requirements

    commit = task.environment_setup_commit or task.base_commit
    for req_path in MAP_REPO_TO_REQS_PATHS.get(task.repo, []):
        text = _git_show(repo_dir, commit, req_path)
        if text is not None:
            break
    else:
        raise SwebenchEnvError(
            f"{task.instance_id}: none of {MAP_REPO_TO_REQS_PATHS.get(task.repo)} exists at "
            f"{commit} in {repo_dir}"
        )
    folder = "/".join(req_path.split("/")[:-1])
    # as swebench: the lines of every `-r` include first, in order, then the file's own lines
    included: list[str] = []
    own: list[str] = []
    for line in text.splitlines():
        if line.strip().startswith("-r"):
            inc = line.strip()[2:].strip()
            sub = _git_show(repo_dir, commit, f"{folder}/{inc}" if folder else inc) or ""
            included += [x for x in sub.splitlines() if _keep(x)]
        elif _keep(line):
            own.append(line)
    lines = included + own
    return [x.strip() for x in clean_requirements("\n".join(lines)).splitlines() if x.strip()]


def conda_to_pip(packages: str) -> list[str]:
    """A conda package list ("numpy scipy 'cython=0.29'") as pip requirements."""
    out = []
    for spec in shlex.split(packages):
        name, op, ver = spec.partition("=")
        out.append(spec if not op or ver.startswith("=") else f"{name}=={ver}")
    return out


def pip_requirements(task: Task, specs: dict, repo_dir: Path | None) -> list[str]:
    pkgs = specs.get("packages", "")
    if pkgs == "environment.yml":
        raise UnsupportedEnv(f"{task.instance_id}: its environment is a conda environment.yml")
    if pkgs == "requirements.txt":
        if repo_dir is None:
            raise SwebenchEnvError(
                f"{task.instance_id}: reading requirements.txt needs --repo-mirror with "
                f"{task.repo.replace('/', '__')}"
            )
        reqs = requirements_from_mirror(task, repo_dir)
    else:
        reqs = conda_to_pip(pkgs) if pkgs else []
    return reqs + list(specs.get("pip_packages", []))


def directives_of(task: Task) -> list[str]:
    """swebench's rules: files the test patch touches, non-test extensions dropped, Django's
    as dotted modules without "tests/"."""
    from swebench.harness.test_spec.python import get_test_directives

    return get_test_directives({"repo": task.repo, "test_patch": task.hidden.test_patch})


def eval_test_command(task: Task, specs: dict, *, conda: bool = False) -> str:
    """What runs in /testbed at grading, after our grader applied patch and test patch."""
    parts = [CONDA_ACTIVATE] if conda else []
    parts += list(specs.get("eval_commands", []))
    if "install" in specs:
        # swebench re-installs before testing (a patch may touch compiled code); a failure
        # there does not stop its script (no `set -e`), nor ours. Output kept out of the log.
        pip_env = "" if conda else f"{OFFLINE_PIP}; "
        parts.append(
            f"( {pip_env}{specs['install']} ) > {REINSTALL_LOG} 2>&1 "
            f"|| echo 'deepswe: re-install failed, see {REINSTALL_LOG}'"
        )
    parts.append(" ".join([specs["test_cmd"], *directives_of(task)]))
    return "( " + "\n".join(parts) + "\n)"


def build_from_source(task: Task, mirror: Path | None, *, timeout_s: float = 1800.0) -> Task:
    """`task` with an EnvironmentSpec built from our base images. Raises UnsupportedEnv."""
    specs = specs_for(task)
    base = base_for(task, specs)
    repo_dir = mirror_path(mirror, task.repo) if mirror else None
    if repo_dir is not None and not repo_dir.is_dir():
        raise SwebenchEnvError(f"{task.instance_id}: no clone of {task.repo} at {repo_dir}")
    source = str(repo_dir) if repo_dir else f"https://github.com/{task.repo}.git"
    install = [
        f"{OFFLINE_PIP}; {cmd}"
        for cmd in [*specs.get("pre_install", []), specs.get("install", "")]
        if cmd
    ]
    env = EnvironmentSpec(
        base=base,
        source=source,
        pip=pip_requirements(task, specs, repo_dir),
        install=install,
        test_cmd=specs["test_cmd"],
        log_parser="swebench",
    )
    spec = TestSpec(
        command=eval_test_command(task, specs), log_parser="swebench", timeout_s=timeout_s
    )
    return task.model_copy(update={"environment": env, "test_spec": spec, "image": None})


def with_official_image(task: Task, *, timeout_s: float = 1800.0) -> Task:
    """`task` on swebench's own image (conda env `testbed`), for hosts that have it."""
    specs = specs_for(task)
    spec = TestSpec(
        command=eval_test_command(task, specs, conda=True),
        log_parser="swebench",
        timeout_s=timeout_s,
    )
    return task.model_copy(update={"test_spec": spec})


def needs_swebench_env(task: Task) -> bool:
    """A SWE-bench task whose test command has not been filled in yet."""
    return task.source is TaskSource.SWE_BENCH_VERIFIED and not task.test_spec.command


def prepare_all(
    tasks: list[Task], *, mode: str, mirror: Path | None
) -> tuple[list[Task], dict[str, str]]:
    """Every task prepared (`prepare`), and {instance_id: why} for those no environment of ours
    serves (they stay as they were and are recorded unsupported_env, never run)."""
    from deepswe.env.images.task import image_exists

    out, unsupported = [], {}
    for t in tasks:
        try:
            out.append(prepare(t, mode=mode, mirror=mirror, image_exists=image_exists))
        except UnsupportedEnv as exc:
            out.append(t)
            unsupported[t.instance_id] = str(exc)
    return out, unsupported


def prepare(task: Task, *, mode: str, mirror: Path | None, image_exists=None) -> Task:
    """Fill a SWE-bench task in: mode "build" (from source), "image" (official image) or "auto"
    (the official image when the engine already has it, else build). Other tasks pass through."""
    if not needs_swebench_env(task):
        return task
    if mode == "image" or (
        mode == "auto" and task.image and image_exists and image_exists(task.image)
    ):
        return with_official_image(task)
    return build_from_source(task, mirror)
