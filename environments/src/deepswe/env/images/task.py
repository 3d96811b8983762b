"""Task images built from source, for tasks that carry an `EnvironmentSpec`.

Layers on top of a base image, each tagged by a hash of what went into it:

  deepswe/env:<hash>    base (plus the spec's apt packages) + a host interpreter if the spec
                        names one + the wheelhouse /wheels + the spec's pip steps, in order
                        (shared by every task with the same environment)
  deepswe/history:<hash> env + the repository's git objects up to a cut before base_commit,
                        shared by the tasks of one repository and year (images/history.py)
  deepswe/tree:<hash>   history (or env) + the working tree of a reference commit before
                        base_commit, shared by the tasks of one quarter (images/worktree.py)
  deepswe/task:<hash>   tree (or history, or env) + the repository at base_commit in /testbed
                        (only the paths that differ from the tree image's, and .git) + the
                        install commands, less their C objects (BUILD_TEMP)

Both layers install offline (PIP_NO_INDEX, PIP_FIND_LINKS, kept in the image so a sandbox's
own pip works the same way); what pip reports missing is downloaded by the host and the layer
built again (images/offline.py). Bytecode is never written beside the sources
(PYTHONDONTWRITEBYTECODE). The repository in /testbed sits at base_commit on a branch `main`,
with no later commit, no other branch, no remote, and only the tags base_commit already
contains (versioning tools such as setuptools-scm read them; swebench keeps them too): a policy
cannot find the fix in the history. The hidden tests go in at grading time only, never here.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from deepswe.data.task import EnvironmentSpec, Task
from deepswe.env.images.base import IMAGE_ENV, VENV, ImageBuildError, ensure_base_image
from deepswe.env.images.build_record import record_build
from deepswe.env.images.build_stage import BuildStage
from deepswe.env.images.engine import docker_build, image_exists
from deepswe.env.images.files import IMAGE_FOLDER as FILES_FOLDER
from deepswe.env.images.files import fetch_file
from deepswe.env.images.history import (
    cut_incomplete_history,
    history_cut,
    split_history,
    tags_merged,
)
from deepswe.env.images.hostpython import NoHostPython, host_python
from deepswe.env.images.offline import (
    Wheelhouse,
    build_offline,
    project_requirements,
    self_install_extras,
)
from deepswe.env.images.progress import Heartbeat
from deepswe.env.images.recipe import base_image_tag, python_version
from deepswe.env.images.submodules import check_out as check_out_submodules
from deepswe.env.images.wheels import manylinux_platforms, pip_install_command
from deepswe.env.images.worktree import (
    check_out_tree,
    date_back,
    delta_context,
    ensure_tree_image,
    reference_commit,
    tree_delta,
)

# 2: PYTHONDONTWRITEBYTECODE. 3: offline wheelhouses kept, pip steps, apt, host pythons, old
# tags. 4: the venv's packages visible to its base interpreter.
RECIPE_VERSION = "4"
# 2: the host prefix's own path leads to /opt/python too (sysconfig's LIBDIR, -L and rpath).
HOST_PYTHON_LAYOUT = "2"
Log = Callable[[str], None]
# The Debian packages that give an image a C compiler (and Debian's Python headers); a spec that
# lists COMPILER may take sdists of packages without wheels: pip builds them in the image.
COMPILER = "build-essential"
# No bytecode beside the sources: an agent that runs Python must not find (or submit)
# __pycache__ files it did not mean to write (the patch excludes them regardless). pip never
# asks an index: it finds everything in the image's wheelhouses.
OFFLINE_ENV = ["ENV PYTHONDONTWRITEBYTECODE=1 PIP_NO_INDEX=1 PIP_FIND_LINKS=/wheels"]
TASK_FIND_LINKS = 'PIP_FIND_LINKS="/wheels /wheels-task"'
TESTBED_VENV = "/testbed/.venv"  # EnvironmentSpec.venv_in_testbed: R2E-Gym's layout
# R2E-Gym's images and runtime set neither: Python 3.7's stderr to a pipe is then block-buffered
# (a warning printed just before Qt aborts the process is lost, as in its recorded trajectories),
# and code writes __pycache__ (never in the patch). Empty values: both off after the build steps.
R2E_RUNTIME_ENV = "ENV PYTHONUNBUFFERED= PYTHONDONTWRITEBYTECODE="
# The task layer's /testbed as a delta over a shared tree image (images/worktree.py); 3: no
# compiler objects (BUILD_TEMP). Every task tag is new, environments and histories are not.
TASK_LAYOUT = "tree-3"
# C extensions' object files (build/temp.*, never files git tracks), half a compiled install
# (scikit-learn 0.20: 54 of 116 MB), removed as the install's own step exits: a later build_ext
# (the re-install at grading) compiles only an extension whose sources are newer than its .so.
BUILD_TEMP = "trap \"git -C /testbed ls-files -z -- 'build/temp.*' 2>/dev/null | grep -qz . || rm -rf /testbed/build/temp.*\" EXIT"  # noqa: E501
RACY_S = 2  # an index entry whose file is younger than this is "racily clean" (git: 1 s + slack)


def _testbed_venv_lines() -> list[str]:
    """Dockerfile lines that re-create the image's venv as /testbed/.venv, on the interpreter
    /opt/venv was made from, and leave /opt/venv a link to it. The venv is made there, not
    moved: its scripts' shebangs and sys.prefix name /testbed/.venv, as in R2E-Gym's images.
    Its pip steps then write no bytecode (`--no-compile`: uv's default, so `grep -r` finds no
    .pyc there, as in R2E-Gym's)."""
    path = IMAGE_ENV["PATH"].replace(f"{VENV}/bin", f"{TESTBED_VENV}/bin")
    return [
        f"RUN home=$(sed -n 's/^home *= *//p' {VENV}/pyvenv.cfg)"
        f' && mkdir -p /testbed && "$home/python3" -m venv {TESTBED_VENV}'
        f" && rm -rf {VENV} && ln -s {TESTBED_VENV} {VENV}",
        f"ENV VIRTUAL_ENV={TESTBED_VENV} PATH={path}",
    ]


def _hash(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def _git(repo: Path, *args: str) -> str:
    res = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if res.returncode != 0:
        raise ImageBuildError(f"git {' '.join(args)} failed in {repo}: {res.stderr.strip()}")
    return res.stdout


def env_image_tag(spec: EnvironmentSpec) -> str:
    """The tag of the shared dependency layer for `spec` (no building)."""
    # The base image's own tag carries its recipe hash: a new base recipe means new env layers.
    base = base_image_tag(spec.base, spec.apt)
    parts = [RECIPE_VERSION, sorted(spec.pip), spec.pip_after, spec.python, base]
    if spec.python:  # images with a host interpreter: their own recipe revision
        parts.append(HOST_PYTHON_LAYOUT)
    if spec.venv_in_testbed:  # tags of the other specs stay what they were
        parts.append([TESTBED_VENV, "no-compile"])
    if spec.pins:
        parts.append(["pins", sorted(spec.pins)])
    return f"deepswe/env:{_hash(*parts)}"


def target_python(spec: EnvironmentSpec) -> str:
    """The major.minor Python the spec's images run."""
    return spec.python or python_version(spec.base)


def task_image_tag(task: Task) -> str:
    """The tag of `task`'s own image (no building)."""
    spec = _spec(task)
    parts = [RECIPE_VERSION, env_image_tag(spec), _source_id(spec.source), task.base_commit]
    parts += [spec.install, TASK_LAYOUT]
    if spec.files:  # tags of specs without files stay what they were
        parts.append([f.model_dump() for f in spec.files])
    if spec.venv_in_testbed:
        parts.append(R2E_RUNTIME_ENV)
    return f"deepswe/task:{_hash(*parts)}"


def _spec(task: Task) -> EnvironmentSpec:
    if task.environment is None:
        raise ImageBuildError(f"{task.instance_id}: no environment spec to build an image from")
    return task.environment


def _source_id(source: str) -> str:
    """A stable name for a repository source: a local path resolved, a URL as given."""
    p = Path(source).expanduser()
    return str(p.resolve()) if p.exists() else source


def _wheelhouse(spec: EnvironmentSpec, folder: Path, key: str) -> Wheelhouse:
    suite = spec.base if spec.python else None  # a host interpreter runs on the suite's glibc
    python = target_python(spec)
    platforms = manylinux_platforms(python, suite=suite)
    sources = COMPILER in spec.apt
    native = spec.python is not None  # the image runs the host's CPython: it builds sdists
    # Debian's own interpreter builds them in a stage with the image's packages (build_stage.py)
    stage = BuildStage(spec.base, tuple(spec.apt)) if sources and not native else None
    return Wheelhouse(
        folder,
        key,
        python,
        platforms,
        sources,
        spec.index_date,
        native,
        constraints=spec.pins,
        stage=stage,
    )


def _interpreter_lines(spec: EnvironmentSpec, ctx: Path) -> list[str]:
    """Dockerfile lines that put a host CPython at /opt/python and /opt/venv on it."""
    if spec.python is None:
        return []
    try:
        prefix = host_python(spec.python)
    except NoHostPython as exc:
        raise ImageBuildError(str(exc)) from None
    shutil.copytree(prefix, ctx / "python", symlinks=True)
    # The prefix's RUNPATH names the host's path; the linker's cache finds libpython instead.
    # Its sysconfig names the host's path too (LDSHARED's -L, LIBDIR): C extensions built in
    # the image link through it, so that path is a link to /opt/python.
    host = Path(prefix).resolve()
    return [
        "COPY python /opt/python",
        f"RUN mkdir -p {shlex.quote(str(host.parent))} && ln -sfn /opt/python {shlex.quote(str(host))}"
        " && echo /opt/python/lib > /etc/ld.so.conf.d/deepswe-python.conf && ldconfig"
        " && rm -rf /opt/venv && /opt/python/bin/python3 -m venv /opt/venv"
        f" && /opt/venv/bin/python -c 'import sys; assert sys.version.startswith(\"{spec.python}.\")'",
    ]


def _prefetch(wheels: Wheelhouse, requirements: list[str], log: Log) -> None:
    """Add the project's declared requirements; a set pip cannot resolve as a whole here is
    left for the offline build to learn piece by piece."""
    try:
        wheels.add(requirements)
    except ImageBuildError as exc:
        log(f"  project requirements not prefetched ({str(exc).splitlines()[0][:200]})")


def ensure_env_image(spec: EnvironmentSpec, log: Log = print) -> str:
    tag = env_image_tag(spec)
    if image_exists(tag):
        return tag
    base = ensure_base_image(spec.base, extra=spec.apt)
    log(
        f"building {tag} (python {target_python(spec)}, {1 + len(spec.pip_after)} pip steps on {base})"
    )
    with tempfile.TemporaryDirectory(prefix="deepswe-env-") as tmp:
        ctx = Path(tmp)
        wheels = _wheelhouse(spec, ctx / "wheels", tag.replace("/", "_").replace(":", "_"))
        steps = [spec.pip, *spec.pip_after]
        with Heartbeat(log, f"{tag} (env, on the host)") as beat:
            for k, step in enumerate(steps, 1):
                beat.doing(f"fetching the wheels of pip step {k} of {len(steps)}")
                wheels.add(step)  # each step's own closure: conflicting pins across steps coexist
        shutil.copy(Path(__file__).with_name("venv_everywhere.py"), ctx / "venv_everywhere.py")
        lines = [f"FROM {base}", *OFFLINE_ENV, *_interpreter_lines(spec, ctx)]
        if spec.venv_in_testbed:
            lines += _testbed_venv_lines()
        lines += ["COPY venv_everywhere.py /tmp/", "RUN python /tmp/venv_everywhere.py"]
        lines += ["COPY wheels /wheels"]
        lines += [
            f"RUN {pip_install_command(step, '/wheels', compile=not spec.venv_in_testbed)}"
            for step in [spec.pip, *spec.pip_after]
            if step
        ]
        labels = {"deepswe.kind": "env", "deepswe.pip": json.dumps(sorted(spec.pip))}
        dockerfile = "\n".join(lines) + "\n"
        build_offline(lambda: docker_build(ctx, dockerfile, tag, labels, log), wheels, tag, log)
        for line in wheels.unpinned:  # the steps and learned requirements the pins did not fit
            log(f"  {line}")
    return tag


def prepare_repository(source: str, base_commit: str, dest: Path) -> str | None:
    """Clone `source` into `dest` at `base_commit`, leaving nothing after it to find: branch
    `main` only, no remote, and only the tags base_commit already contains. A source lacking
    objects of the history is cut above them (history.cut_incomplete_history): returns a line
    saying where, or None when the whole history is there."""
    res = subprocess.run(
        ["git", "clone", "-q", "--no-checkout", source, str(dest)], capture_output=True, text=True
    )
    if res.returncode != 0:
        raise ImageBuildError(f"cannot clone {source}: {res.stderr.strip()}")
    _git(dest, "checkout", "-q", "-B", "main", base_commit)
    cut = cut_incomplete_history(dest)
    said = None
    if cut is not None:
        said = (
            f"history cut at {cut[0][:12]}: {source} lacks objects further back; "
            f"{cut[1]} first-parent commit(s) kept"
        )
    past = {f"refs/tags/{t}" for t in _git(dest, "tag", "--merged", "HEAD").split()}
    for ref in _git(dest, "for-each-ref", "--format=%(refname)").split():
        if ref != "refs/heads/main" and ref not in past:
            _git(dest, "update-ref", "--no-deref", "-d", ref)
    for remote in _git(dest, "remote").split():
        _git(dest, "remote", "remove", remote)
    _git(dest, "reflog", "expire", "--expire=now", "--all")
    _git(dest, "gc", "-q", "--prune=now")
    return said


def _history_image(
    env: str, spec: EnvironmentSpec, repo: Path, folder: Path, log: Log
) -> tuple[str, tuple[str, Path] | None]:
    """The image a task layer starts FROM: the shared history image of `repo`'s cut (built if
    missing), with those objects moved out of `repo`; `env` when there is no cut (history.py).
    With it the cut and where its objects went (None without)."""
    cut = history_cut(repo)
    if cut is None:
        return env, None
    key = _hash(RECIPE_VERSION, env, _source_id(spec.source), cut, tags_merged(repo, cut))
    tag = f"deepswe/history:{key}"
    split_history(repo, cut, folder / "objects")
    if not image_exists(tag):
        log(f"building {tag} (history up to {cut[:12]})")
        dockerfile = f"FROM {env}\nCOPY objects/pack /testbed/.git/objects/pack/\n"
        failed = docker_build(folder, dockerfile, tag, {"deepswe.kind": "history"}, log)
        if failed:
            raise ImageBuildError(f"{tag}: {failed[-2000:]}")
    return tag, (cut, folder / "objects")


def ensure_task_image(task: Task, log: Log = print) -> str:
    """Build (if missing) and return the image a sandbox for `task` starts from."""
    if task.environment is None:
        if task.image is None:
            raise ImageBuildError(f"{task.instance_id}: neither an image nor an environment spec")
        return task.image
    spec = task.environment
    tag = task_image_tag(task)
    if image_exists(tag):
        return tag
    started = time.monotonic()
    env = ensure_env_image(spec, log)
    log(f"building {tag} for {task.instance_id}")
    with tempfile.TemporaryDirectory(prefix="deepswe-task-") as tmp:
        ctx = Path(tmp) / "context"
        ctx.mkdir()
        with Heartbeat(log, f"{task.instance_id} (task, on the host)") as beat:
            beat.doing(f"checking out {task.base_commit[:12]} from {spec.source}")
            cut = prepare_repository(spec.source, task.base_commit, ctx / "testbed")
            if cut:
                log(f"{task.instance_id}: {cut}")
                beat.logged()
            if Path(spec.source).is_dir():  # submodules from clones beside the source's
                beat.doing("checking out submodules")
                parent = Path(spec.source).absolute().parent
                for line in check_out_submodules(ctx / "testbed", parent):
                    log(f"{task.instance_id}: {line}")
            ref = reference_commit(ctx / "testbed")
            if ref is not None:  # before the split takes the reference's objects away
                beat.doing(f"checking out the shared working tree at {ref[:12]}")
                check_out_tree(ctx / "testbed", ref, Path(tmp) / "tree" / "tree")
                delta = tree_delta(ctx / "testbed", ref)
            beat.doing("splitting the history layer (git repack)")
            start, below = _history_image(env, spec, ctx / "testbed", Path(tmp) / "history", log)
            if ref is not None:
                beat.doing("building the shared working tree's layer")
                if below is None or below[0] != ref:  # the objects up to ref go with its tree
                    split_history(ctx / "testbed", ref, Path(tmp) / "tree" / "objects", below)
                start = ensure_tree_image(start, ref, Path(tmp) / "tree", log)
            # What one task of an environment had to learn, its siblings download up front.
            beat.doing("fetching the project's own requirements")
            wheels = _wheelhouse(spec, ctx / "wheels", env.replace("/", "_").replace(":", "_"))
            extras = self_install_extras(spec.install)
            if extras is not None:
                reqs = project_requirements(ctx / "testbed", extras, wheels.python)
                _prefetch(wheels, reqs, log)
        lines = [f"FROM {start}", "COPY wheels /wheels-task", f"ENV {TASK_FIND_LINKS}"]
        # COPY gives every file a new ctime: refresh the index now (it hashes, writes nothing),
        # or the first `git commit -a` / `add` re-writes every blob, and git "freshens" (utimes)
        # the packs holding them: the whole history pack copied up into this layer. (It reads
        # the tree image's files without writing them: overlayfs copies none of them up.)
        if ref is None:
            lines += ["COPY testbed /testbed"]
        else:  # only what differs from the tree image's /testbed (images/worktree.py)
            (ctx / "testbed").rename(Path(tmp) / "checkout")
            lines += delta_context(Path(tmp) / "checkout", *delta, ctx)
        lines += ["WORKDIR /testbed"]
        if spec.venv_in_testbed:  # never in a snapshot or a patch (deepswe.env.workspace)
            lines += ["RUN mkdir -p .git/info && echo /.venv >> .git/info/exclude"]
        # An index written in the same second as a file's mtime leaves that entry "racily clean"
        # (git smudges it and re-hashes it, writing, at every command). The clone's files were
        # written just now: dated back here (COPY keeps mtimes), so the refresh need not wait
        # out their second; a file still that new in the image (another clock: a remote
        # engine) waits it out. Directories have no index entry.
        date_back(ctx / "testbed", RACY_S + 1)
        lines += [
            'RUN if [ -n "$(find . -path ./.git -prune -o ! -type d -newermt '
            f'"@$(( $(date +%s) - {RACY_S} ))" -print -quit)" ]; then sleep {RACY_S}; fi; '
            "git update-index -q --refresh >/dev/null || true"
        ]
        for f in spec.files:  # what the install would download, fetched here (images/files.py)
            fetch_file(f, ctx / "files")
        if spec.files:
            lines += [f"COPY files {FILES_FOLDER}"]
        lines += [f"RUN {BUILD_TEMP}; {cmd}" for cmd in spec.install]
        if spec.venv_in_testbed:
            lines += [R2E_RUNTIME_ENV]
        labels = {"deepswe.kind": "task", "deepswe.instance": task.instance_id}
        if cut:
            labels["deepswe.history_cut"] = cut
        dockerfile = "\n".join(lines) + "\n"
        build_offline(lambda: docker_build(ctx, dockerfile, tag, labels, log), wheels, tag, log)
        for line in wheels.unpinned:  # the steps and learned requirements the pins did not fit
            log(f"  {line}")
    record_build(tag, time.monotonic() - started)
    return tag


__all__ = [
    "ensure_env_image",
    "ensure_task_image",
    "env_image_tag",
    "image_exists",
    "prepare_repository",
    "task_image_tag",
]
