"""Task images built from source, for tasks that carry an `EnvironmentSpec`.

Two layers on top of a base image, each tagged by a hash of what went into it:

  deepswe/env:<hash>    base + the spec's pip requirements, from host-downloaded wheels, and
                        PYTHONDONTWRITEBYTECODE=1 (shared by every task with the same base and
                        requirements)
  deepswe/task:<hash>   env + the repository at base_commit in /testbed + the install commands

The repository in /testbed sits at base_commit on a branch `main`, with no later commit, no
other ref, no tag and no remote: a policy cannot find the fix in the history. The hidden tests
are not added here; they go in at grading time only.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import docker.errors

from deepswe.data.task import EnvironmentSpec, Task
from deepswe.env.images.base import ImageBuildError, ensure_base_image
from deepswe.env.images.recipe import base_image_tag, python_version
from deepswe.env.images.wheels import download_wheels, pip_install_command
from deepswe.env.sandbox.docker import client

RECIPE_VERSION = "2"  # 2: PYTHONDONTWRITEBYTECODE in the env layer
Log = Callable[[str], None]


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
    return f"deepswe/env:{_hash(RECIPE_VERSION, sorted(spec.pip), base_image_tag(spec.base))}"


def task_image_tag(task: Task) -> str:
    """The tag of `task`'s own image (no building)."""
    spec = _spec(task)
    return f"deepswe/task:{_hash(RECIPE_VERSION, env_image_tag(spec), _source_id(spec.source), task.base_commit, spec.install)}"


def _spec(task: Task) -> EnvironmentSpec:
    if task.environment is None:
        raise ImageBuildError(f"{task.instance_id}: no environment spec to build an image from")
    return task.environment


def _source_id(source: str) -> str:
    """A stable name for a repository source: a local path resolved, a URL as given."""
    p = Path(source).expanduser()
    return str(p.resolve()) if p.exists() else source


def image_exists(tag: str) -> bool:
    """Whether the Docker engine has an image tagged `tag` (builds nothing, pulls nothing)."""
    try:
        client().images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


def _build(context: Path, dockerfile: str, tag: str, labels: dict[str, str], log: Log) -> None:
    (context / "Dockerfile").write_text(dockerfile)
    try:
        # pull=False: FROM names a local image; no registry is ever asked.
        _, stream = client().images.build(
            path=str(context), tag=tag, labels=labels, pull=False, rm=True, forcerm=True
        )
        for chunk in stream:
            if "stream" in chunk and chunk["stream"].strip().startswith("Step"):
                log(f"  {chunk['stream'].strip()}")
    except docker.errors.BuildError as exc:
        tail = "".join(c.get("stream", "") for c in exc.build_log if isinstance(c, dict))[-2000:]
        raise ImageBuildError(f"building {tag} failed: {exc.msg}\n{tail}") from exc


def ensure_env_image(spec: EnvironmentSpec, log: Log = print) -> str:
    tag = env_image_tag(spec)
    if image_exists(tag):
        return tag
    base = ensure_base_image(spec.base)
    log(f"building {tag} ({len(spec.pip)} requirements on {base})")
    with tempfile.TemporaryDirectory(prefix="deepswe-env-") as tmp:
        ctx = Path(tmp)
        # No bytecode beside the sources: an agent that runs Python must not find (or submit)
        # __pycache__ files it did not mean to write. The patch excludes them regardless.
        lines = [f"FROM {base}", "ENV PYTHONDONTWRITEBYTECODE=1"]
        if spec.pip:
            download_wheels(spec.pip, ctx / "wheels", python_version(spec.base))
            lines += [
                "COPY wheels /wheels",
                f"RUN {pip_install_command(spec.pip, '/wheels')} && rm -rf /wheels/*",
            ]
        labels = {"deepswe.kind": "env", "deepswe.pip": json.dumps(sorted(spec.pip))}
        _build(ctx, "\n".join(lines) + "\n", tag, labels, log)
    return tag


def prepare_repository(source: str, base_commit: str, dest: Path) -> None:
    """Clone `source` into `dest` at `base_commit`, leaving nothing after it to find."""
    res = subprocess.run(
        ["git", "clone", "-q", "--no-checkout", source, str(dest)], capture_output=True, text=True
    )
    if res.returncode != 0:
        raise ImageBuildError(f"cannot clone {source}: {res.stderr.strip()}")
    _git(dest, "checkout", "-q", "-B", "main", base_commit)
    for ref in _git(dest, "for-each-ref", "--format=%(refname)").split():
        if ref != "refs/heads/main":
            _git(dest, "update-ref", "-d", ref)
    for remote in _git(dest, "remote").split():
        _git(dest, "remote", "remove", remote)
    _git(dest, "reflog", "expire", "--expire=now", "--all")
    _git(dest, "gc", "-q", "--prune=now")


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
    env = ensure_env_image(spec, log)
    log(f"building {tag} for {task.instance_id}")
    with tempfile.TemporaryDirectory(prefix="deepswe-task-") as tmp:
        ctx = Path(tmp)
        prepare_repository(spec.source, task.base_commit, ctx / "testbed")
        lines = [f"FROM {env}", "COPY testbed /testbed", "WORKDIR /testbed"]
        lines += [f"RUN {cmd}" for cmd in spec.install]
        labels = {"deepswe.kind": "task", "deepswe.instance": task.instance_id}
        _build(ctx, "\n".join(lines) + "\n", tag, labels, log)
    return tag


__all__ = [
    "ensure_env_image",
    "ensure_task_image",
    "env_image_tag",
    "image_exists",
    "prepare_repository",
    "task_image_tag",
]
