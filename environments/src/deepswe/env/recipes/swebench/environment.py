"""SWE-bench tasks on our registry-free images: a SWE-bench Task -> a Task with an
EnvironmentSpec that `deepswe.env.images.task.ensure_task_image` can build, offline.

The install and test recipe comes from the `swebench` package used as a library (4.1.0:
`MAP_REPO_VERSION_TO_SPECS`, `MAP_REPO_TO_REQS_PATHS`, `get_test_directives`,
`clean_requirements`); `swebench_install` translates the install sequence step for step (its
docstring has the table). The test command is `eval_commands`, the re-install, then
`test_cmd` + the test directives of the test patch, in the order swebench's eval script runs
them (make_eval_script_list_py).
"""

from __future__ import annotations

import functools
from pathlib import Path

from deepswe.data.task import EnvironmentSpec, Task, TaskSource, TestSpec
from deepswe.env.images.grading_wheels import GRADING_WHEELS
from deepswe.env.images.history import lacks_base_tree
from deepswe.env.images.submodules import missing as missing_submodules
from deepswe.env.recipes.swebench.conda import needs_left_out
from deepswe.env.recipes.swebench.downloads import UnservedDownload, build_downloads
from deepswe.env.recipes.swebench.install import (
    COMPILER,
    SETUP_COMMIT,
    SwebenchEnvError,
    UnsupportedEnv,
    conda_tools,
    conda_translation,
    has_c_sources,
    index_date,
    one_script,
    pre_install,
    requirement_steps,
)

BASE_FOR_PYTHON = {"3.11": "bookworm", "3.9": "bullseye"}
HOST_PYTHON_BASE = "bookworm"  # a host-built CPython runs on the suite it was built for
REINSTALL_LOG = "/tmp/deepswe-reinstall.log"
CONDA_ACTIVATE = "source /opt/miniconda3/bin/activate && conda activate testbed"


def specs_for(task: Task) -> dict:
    from swebench.harness.constants import MAP_REPO_VERSION_TO_SPECS

    try:
        return MAP_REPO_VERSION_TO_SPECS[task.repo][str(task.version)]
    except KeyError:
        raise UnsupportedEnv(
            f"{task.instance_id}: swebench 4.1.0 has no specs for {task.repo} version {task.version}"
        ) from None


def interpreter_for(task: Task, specs: dict) -> tuple[str, str | None]:
    """(Debian suite, host Python version or None) for the spec's Python."""
    python = str(specs.get("python"))
    if python in BASE_FOR_PYTHON:
        return BASE_FOR_PYTHON[python], None
    from deepswe.env.images.hostpython import NoHostPython, host_python

    try:
        host_python(python)
    except NoHostPython as exc:
        raise UnsupportedEnv(f"{task.instance_id}: needs Python {python}: {exc}") from None
    return HOST_PYTHON_BASE, python


def mirror_path(mirror: Path, repo: str) -> Path:
    """DIR/<owner>__<name>, the layout --repo-mirror expects."""
    return Path(mirror) / repo.replace("/", "__")


@functools.lru_cache(maxsize=256)
def wheel_gap(
    steps: tuple[tuple[str, ...], ...], python: str, suite: str | None, before: str | None
) -> str | None:
    """The first package of `steps` that has no wheel for the target and no pure-Python build
    (so the image needs a compiler), or None. Downloads into the wheel cache the build reuses."""
    import tempfile

    from deepswe.env.images import WheelDownloadError, download_wheels, manylinux_platforms

    platforms = manylinux_platforms(python, suite=suite)
    native = suite is not None  # a host CPython: the one the image runs (images/task.py)
    with tempfile.TemporaryDirectory(prefix="deepswe-probe-") as tmp:
        for step in steps:
            try:
                download_wheels(
                    list(step), Path(tmp), python, platforms, before=before, native=native
                )
            except WheelDownloadError as exc:
                if "would need a compiler" in str(exc):
                    return str(exc).split(" has no wheel", 1)[0].split()[-1]
                raise SwebenchEnvError(f"wheels for {list(step)}: {exc}") from exc
    return None


def environment_for(
    task: Task,
    specs: dict,
    repo_dir: Path | None,
    source: str,
    probe: bool = True,
    mirror: Path | None = None,
) -> EnvironmentSpec:
    """The EnvironmentSpec that installs `task` as swebench's images do, offline.

    The image gets a compiler when the repository has C sources, or (`probe`: asks PyPI, the
    answer cached in the wheel cache) when a requirement has no wheel for the Python. Files the
    install downloads are fetched by the host (swebench_downloads)."""
    suite, host = interpreter_for(task, specs)
    python = host or str(specs["python"])
    pre = pre_install(task, specs)
    conda = conda_translation(task, specs, repo_dir)
    try:
        built = build_downloads(task, repo_dir, mirror)
    except UnservedDownload as exc:
        raise UnsupportedEnv(f"{task.instance_id}: {exc}") from None
    if repo_dir is not None and (gap := lacks_base_tree(repo_dir, task.base_commit)):
        raise UnsupportedEnv(f"{task.instance_id}: {gap}")
    if repo_dir is not None:  # checked out from clones beside repo_dir (images/submodules.py)
        lacking = missing_submodules(repo_dir, task.base_commit, repo_dir.absolute().parent)
        if lacking:
            raise UnsupportedEnv(
                f"{task.instance_id}: its build checks out submodules no clone here holds: "
                + "; ".join(lacking)
            )
    apt = pre.apt + (conda.apt if conda else []) + built.apt
    steps = requirement_steps(task, specs, repo_dir)
    commit = task.environment_setup_commit or task.base_commit
    compiled = has_c_sources(repo_dir, commit)
    if not compiled and probe:
        steps_key = tuple(tuple(s) for s in steps)
        compiled = wheel_gap(steps_key, python, suite if host else None, index_date())
    if compiled:
        apt += COMPILER + ([] if host else ["python3-dev"])
    install = [*one_script(pre.commands + built.commands), specs.get("install", ""), SETUP_COMMIT]
    return EnvironmentSpec(
        base=suite,
        python=host,
        source=source,
        apt=sorted(set(apt)),
        pip=conda_tools(python),
        pip_after=steps,
        install=[cmd for cmd in install if cmd],
        files=pre.files + built.files,
        index_date=index_date(),
        test_cmd=specs["test_cmd"],
        log_parser="swebench",
    )


def left_out_needed(task: Task, specs: dict, repo_dir: Path | None) -> None:
    """UnsupportedEnv when a graded test of `task` needs a conda package nothing stands in for
    (swebench_conda.LEFT_OUT): its environment builds, but that verdict could not be right."""
    conda = conda_translation(task, specs, repo_dir)
    if conda and conda.left_out:
        tests = [*task.hidden.fail_to_pass, *task.hidden.pass_to_pass]
        why = needs_left_out(tests, conda.left_out)
        if why:
            raise UnsupportedEnv(f"{task.instance_id}: {why}")


def directives_of(task: Task) -> list[str]:
    """swebench's rules: files the test patch touches, non-test extensions dropped, Django's
    as dotted modules without "tests/"."""
    from swebench.harness.test_spec.python import get_test_directives

    return get_test_directives({"repo": task.repo, "test_patch": task.hidden.test_patch})


def reinstall_command(install: str) -> str:
    """swebench's re-install after the patch, offline: what the patch adds to the declared
    requirements is in the grading sandbox's own wheelhouse (deepswe.env.images.grading_wheels);
    the output goes to REINSTALL_LOG, and pip's reason is said in the test log when it fails."""
    return (
        f'( export PIP_FIND_LINKS="$PIP_FIND_LINKS {GRADING_WHEELS}"; {install} ) '
        f"> {REINSTALL_LOG} 2>&1 "
        f"|| {{ echo 'deepswe: re-install failed offline, see {REINSTALL_LOG}'; "
        f"grep -m3 -E 'No matching distribution|Could not find a version' {REINSTALL_LOG} "
        "| sed 's/^/deepswe: /'; }"
    )


def eval_test_command(task: Task, specs: dict, *, conda: bool = False) -> str:
    """What runs in /testbed at grading, after our grader applied patch and test patch."""
    parts = [CONDA_ACTIVATE] if conda else []
    parts += list(specs.get("eval_commands", []))
    if "install" in specs:
        # swebench re-installs before testing (a patch may touch compiled code); a failure
        # there does not stop its script (no `set -e`), nor ours. Output kept out of the log;
        # offline like every pip run in our images (their PIP_NO_INDEX, PIP_FIND_LINKS).
        parts.append(reinstall_command(specs["install"]))
    parts.append(" ".join([specs["test_cmd"], *directives_of(task)]))
    return "( " + "\n".join(parts) + "\n)"


def build_from_source(
    task: Task, mirror: Path | None, *, timeout_s: float = 1800.0, probe: bool = True
) -> Task:
    """`task` with an EnvironmentSpec built on our base images. Raises UnsupportedEnv."""
    specs = specs_for(task)
    interpreter_for(task, specs)  # an unsupported environment says so before any mirror check
    pre_install(task, specs)  # and so does a download nothing of ours serves
    repo_dir = mirror_path(mirror, task.repo) if mirror else None
    if repo_dir is not None and not repo_dir.is_dir():
        raise SwebenchEnvError(f"{task.instance_id}: no clone of {task.repo} at {repo_dir}")
    left_out_needed(task, specs, repo_dir)
    source = str(repo_dir) if repo_dir else f"https://github.com/{task.repo}.git"
    env = environment_for(task, specs, repo_dir, source, probe, mirror)
    if "install" in specs:  # swebench re-installs after the patch (grading_wheels)
        env = env.model_copy(update={"reinstall_after_patch": True})
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
    tasks: list[Task], *, mode: str, mirror: Path | None, probe: bool = True
) -> tuple[list[Task], dict[str, str]]:
    """Every task prepared (`prepare`), and {instance_id: why} for those no environment of ours
    serves (they stay as they were and are recorded unsupported_env, never run)."""
    from deepswe.env.images.task import image_exists

    out, unsupported = [], {}
    for t in tasks:
        try:
            out.append(prepare(t, mode=mode, mirror=mirror, image_exists=image_exists, probe=probe))
        except UnsupportedEnv as exc:
            out.append(t)
            unsupported[t.instance_id] = str(exc)
    return out, unsupported


def prepare(
    task: Task, *, mode: str, mirror: Path | None, image_exists=None, probe: bool = True
) -> Task:
    """Fill a SWE-bench task in: mode "build" (from source), "image" (official image) or "auto"
    (the official image when the engine already has it, else build). Other tasks pass through."""
    if not needs_swebench_env(task):
        return task
    if mode == "image" or (
        mode == "auto" and task.image and image_exists and image_exists(task.image)
    ):
        return with_official_image(task)
    return build_from_source(task, mirror, probe=probe)


__all__ = [
    "SwebenchEnvError",
    "UnsupportedEnv",
    "build_from_source",
    "directives_of",
    "environment_for",
    "eval_test_command",
    "interpreter_for",
    "left_out_needed",
    "mirror_path",
    "needs_swebench_env",
    "prepare",
    "prepare_all",
    "specs_for",
    "with_official_image",
]
