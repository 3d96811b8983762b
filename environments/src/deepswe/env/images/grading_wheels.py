"""What grading re-installs, there offline, for the grader only.

SWE-bench's eval script re-installs the project after the patch (`pip install -e .`), online. A
gold patch that declares a new dependency (pylint-4661 adds `appdirs` to setup.cfg, and its test
patch imports it) then needs a distribution no image of ours holds: offline, the re-install
fails, the tests' imports fail, and gold is unresolved on a row swebench resolves.

So for a task whose test command re-installs (`EnvironmentSpec.reinstall_after_patch`), the
requirements its gold and test patches add to what the project declares are found on the host
when it is first graded (`added_requirements`: the project's metadata built by pip before and
after the patches, from the environment's source clone; cached), joined to any the spec names
(`grading_pip`), and their wheels written into the grading sandbox alone (`put_grading_wheels`,
at `GRADING_WHEELS`), never into the image the agent works in, which would tell it something of
the fix. A model patch that
adds a dependency nobody fetched fails its re-install with pip's own line in the test log.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import tempfile
from pathlib import Path

from deepswe.data.task import EnvironmentSpec, Task

GRADING_WHEELS = "/wheels-grading"
"""Where the grading sandbox finds them; the re-install's PIP_FIND_LINKS names it."""


def _canonical(requirement: str) -> str:
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    return canonicalize_name(Requirement(requirement).name)


def added_requirements(source: str, base_commit: str, patches: list[str], python: str) -> list[str]:
    """Requirements the project at `base_commit` of `source` (a git clone) declares once
    `patches` are applied and not before, for `python` ("3.9"). [] when a patch does not apply
    or the metadata cannot be built here. Cached under $DEEPSWE_CACHE/grading-requirements."""
    from deepswe.env.images.offline import project_requirements
    from deepswe.env.images.recipe import cache_root

    patches = [p for p in patches if p.strip()]
    if not patches:
        return []
    key = hashlib.sha256(json.dumps([source, base_commit, patches, python]).encode()).hexdigest()
    cached = cache_root() / "grading-requirements" / f"{key[:24]}.json"
    if cached.is_file():
        return json.loads(cached.read_text())
    with tempfile.TemporaryDirectory(prefix="deepswe-grading-reqs-") as tmp:
        tree = Path(tmp) / "tree"
        git = ["git", "-c", "core.hooksPath=/dev/null", "-C", str(tree)]
        clone = ["git", "clone", "-q", "--shared", "--no-checkout", source, str(tree)]
        if subprocess.run(clone, capture_output=True).returncode != 0:
            return []
        if subprocess.run([*git, "checkout", "-q", base_commit], capture_output=True).returncode:
            return []
        before = project_requirements(tree, [], python)
        for k, patch in enumerate(patches):
            path = Path(tmp) / f"{k}.diff"
            path.write_text(patch if patch.endswith("\n") else patch + "\n")
            if subprocess.run([*git, "apply", str(path)], capture_output=True).returncode != 0:
                return []
        after = project_requirements(tree, [], python)
    known = {_canonical(r) for r in before}
    added = sorted(r for r in after if _canonical(r) not in known)
    cached.parent.mkdir(parents=True, exist_ok=True)
    cached.write_text(json.dumps(added))
    return added


def grading_requirements(task: Task) -> list[str]:
    """What the grading sandbox of `task` gets wheels for: its environment's `grading_pip`, and,
    for a test command that re-installs after the patch, what its gold and test patches add."""
    spec = task.environment
    if spec is None:
        return []
    found = list(spec.grading_pip)
    if spec.reinstall_after_patch:
        from deepswe.env.images.task import target_python

        patches = [task.gold_patch or "", task.hidden.test_patch]
        found += added_requirements(spec.source, task.base_commit, patches, target_python(spec))
    return list(dict.fromkeys(found))


def grading_wheel_files(spec: EnvironmentSpec, requirements: list[str], dest: Path) -> list[Path]:
    """The wheels (and their dependencies) of `requirements` for the image's Python, in `dest`:
    downloaded once by the host, then from its cache (images/wheels.py)."""
    from deepswe.env.images.task import target_python
    from deepswe.env.images.wheels import download_wheels, manylinux_platforms

    python = target_python(spec)
    platforms = manylinux_platforms(python, suite=spec.base if spec.python else None)
    native = spec.python is not None
    return download_wheels(
        requirements, dest, python, platforms, before=spec.index_date, native=native
    )


def put_grading_wheels(task: Task, sandbox) -> int:
    """Write the wheels of `grading_requirements(task)` into `sandbox` at GRADING_WHEELS; how
    many (0 when it needs none)."""
    requirements = grading_requirements(task)
    if not requirements or task.environment is None:
        return 0
    with tempfile.TemporaryDirectory(prefix="deepswe-grading-wheels-") as tmp:
        files = grading_wheel_files(task.environment, requirements, Path(tmp))
        for f in files:
            sandbox.write_file(f"{GRADING_WHEELS}/{f.name}", f.read_bytes())
    return len(files)


__all__ = [
    "GRADING_WHEELS",
    "added_requirements",
    "grading_requirements",
    "grading_wheel_files",
    "put_grading_wheels",
]
