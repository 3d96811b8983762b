"""Which SWE-bench environments this machine can build from source, and why the others not.

One row per (repository, version) spec of swebench 4.1.0's map: its Python, how its packages
are given, whether it needs a compiler or a host interpreter, the instances of the dataset at
hand it serves, and the verdict: `eligible` (nothing known against building it here) or
`unsupported: <reason>`, and the instances of an eligible spec that stay out (a graded test
needs a conda package nothing stands in for: swebench_conda.LEFT_OUT). Nothing is downloaded or
built: "compiler" reads the repository's own C sources only (a requirement without a wheel for
the Python asks for one at build time too). With a mirror, each instance goes through what its
build checks before building (`build_refusal`: the build's own translation, without its
network probe), so an instance counted eligible is one the build takes; what only building
shows (a compile error) is for bench/verified.py, which builds and grades them. What needs the
repository's files (environment.yml, requirements files, matplotlib's FreeType) is checked
only with a mirror.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

from deepswe.data.task import Task


@dataclass
class SpecRow:
    repo: str
    version: str
    python: str
    packages: str  # requirements.txt | environment.yml | conda list | none
    instances: int
    interpreter: str  # "debian" | "host" | "missing"
    compiler: bool | None  # None: unknown without a mirror
    verdict: str  # "eligible" | "unsupported: ..."
    excluded: dict[str, str] = field(default_factory=dict)  # instance -> why it stays out
    # the mirror folder's clone of the repository when a mirror was given and lacks it (the
    # checks that read the repository were skipped; building needs it)
    missing_clone: Path | None = None


def _packages_kind(specs: dict) -> str:
    pkgs = specs.get("packages", "")
    return (
        pkgs
        if pkgs in ("requirements.txt", "environment.yml")
        else ("conda list" if pkgs else "none")
    )


def spec_rows(tasks: list[Task], mirror: Path | None, all_specs: bool = False) -> list[SpecRow]:
    """The specs the tasks use (every spec of their repositories with `all_specs`), with the
    instances of `tasks` each serves."""
    from swebench.harness.constants import MAP_REPO_VERSION_TO_SPECS

    served: dict[tuple[str, str], list[Task]] = defaultdict(list)
    for t in tasks:
        served[(t.repo, str(t.version))].append(t)
    repos = sorted({t.repo for t in tasks})
    rows = []
    for repo in repos:
        for version, specs in sorted(MAP_REPO_VERSION_TO_SPECS.get(repo, {}).items()):
            mine = served.get((repo, version), [])
            if not mine and not all_specs:
                continue
            rows.append(_row(repo, version, specs, mine, mirror))
    return rows


def _row(repo: str, version: str, specs: dict, mine: list[Task], mirror: Path | None) -> SpecRow:
    from deepswe.env.recipes.swebench.downloads import UnservedDownload, build_downloads
    from deepswe.env.recipes.swebench.environment import (
        BASE_FOR_PYTHON,
        interpreter_for,
        mirror_path,
    )
    from deepswe.env.recipes.swebench.install import UnsupportedEnv, has_c_sources, pre_install

    python = str(specs.get("python"))
    verdict, interpreter = "eligible", "debian"
    example = (
        mine[0]
        if mine
        else SimpleNamespace(
            instance_id=f"{repo} {version}",
            repo=repo,
            environment_setup_commit=None,
            base_commit=None,
        )
    )
    wanted = mirror_path(mirror, repo) if mirror is not None else None
    repo_dir = wanted if wanted is not None and wanted.is_dir() else None
    missing_clone = wanted if wanted is not None and repo_dir is None else None
    excluded: dict[str, str] = {}
    try:
        if python not in BASE_FOR_PYTHON:
            interpreter = "host"
            interpreter_for(example, specs)
        pre_install(example, specs)
        if repo_dir is not None and mine:
            try:
                build_downloads(example, repo_dir, mirror)
            except UnservedDownload as exc:
                raise UnsupportedEnv(f"{example.instance_id}: {exc}") from None
            for t in mine:  # what a build of t checks before it builds, nothing else
                why = build_refusal(t, mirror, repo_dir)
                if why is not None:
                    excluded[t.instance_id] = why
    except UnsupportedEnv as exc:
        verdict = f"unsupported: {str(exc).split(': ', 1)[-1]}"
        interpreter = "missing" if "needs Python" in str(exc) else interpreter
    compiler = None
    if repo_dir is not None and mine:
        commit = example.environment_setup_commit or example.base_commit
        compiler = has_c_sources(repo_dir, commit)
    kind = _packages_kind(specs)
    return SpecRow(
        repo,
        version,
        python,
        kind,
        len(mine),
        interpreter,
        compiler,
        verdict,
        excluded,
        missing_clone,
    )


def build_refusal(task: Task, mirror: Path, repo_dir: Path) -> str | None:
    """Why a build of `task` from the clone `repo_dir` would stop before building, or None: the
    build's own translation (build_from_source) without its network probe, so that a row
    called eligible is one the build takes. Its reasons: a graded test needs a conda package
    nothing stands in for, the clone lacks the base tree or a submodule's clone, the requirements
    file or environment.yml is not at the commit."""
    from deepswe.env.recipes.swebench.environment import SwebenchEnvError, build_from_source
    from deepswe.env.recipes.swebench.install import UnsupportedEnv

    try:
        build_from_source(task, mirror, probe=False)
    except (UnsupportedEnv, SwebenchEnvError) as exc:
        return str(exc).removeprefix(f"{task.instance_id}: ")
    return None


def summary(rows: list[SpecRow]) -> dict[str, int]:
    eligible = [r for r in rows if r.verdict == "eligible"]
    return {
        "specs": len(rows),
        "specs_eligible": len(eligible),
        "instances": sum(r.instances for r in rows),
        "instances_eligible": sum(r.instances - len(r.excluded) for r in eligible),
        "instances_needing_a_host_interpreter": sum(
            r.instances - len(r.excluded) for r in eligible if r.interpreter == "host"
        ),
        "instances_out_of_eligible_specs": sum(len(r.excluded) for r in eligible),
    }


def markdown(rows: list[SpecRow]) -> str:
    out = [
        "| repository | version | Python | packages | instances | interpreter | compiler | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        compiler = "?" if r.compiler is None else ("yes" if r.compiler else "no")
        out.append(
            f"| {r.repo} | {r.version} | {r.python} | {r.packages} | {r.instances} | "
            f"{r.interpreter} | {compiler} | {r.verdict.split('; set $')[0][:110]}"
            + (f" ({len(r.excluded)} out)" if r.excluded else "")
            + " |"
        )
    out += [f"- out: {iid}: {why[:160]}" for r in rows for iid, why in sorted(r.excluded.items())]
    # the whole reason of each refused spec: the table cuts it, and its end says what to do
    out += [
        f"- unsupported: {r.repo} {r.version}: {r.verdict.removeprefix('unsupported: ')}"
        for r in rows
        if r.verdict != "eligible"
    ]
    clones = {}
    for r in rows:
        if r.missing_clone is not None and r.instances:
            clones.setdefault(r.repo, (r.missing_clone, 0))
            clones[r.repo] = (r.missing_clone, clones[r.repo][1] + r.instances)
    out += [
        f"- warning: no clone of {repo} at {path} ({n} instances): the checks that read the "
        f"repository (downloads, submodules, base trees, compiler) were skipped and nothing of "
        f"it can be built; clone it there (SWE-bench's mirror github.com/swe-bench/{path.name} "
        "holds every Verified commit)"
        for repo, (path, n) in sorted(clones.items())
    ]
    return "\n".join(out)


__all__ = ["SpecRow", "build_refusal", "markdown", "spec_rows", "summary"]
