"""Which SWE-bench environments this machine can build from source, and why the others not.

One row per (repository, version) spec of swebench 4.1.0's map: its Python, how its packages
are given, whether it needs a compiler or a host interpreter, the instances of the dataset at
hand it serves, and the verdict: `eligible` (nothing known against building it here) or
`unsupported: <reason>`. Nothing is downloaded or
built: "compiler" reads the repository's own C sources only (a requirement without a wheel for
the Python asks for one at build time too), and a spec marked `builds` can still fail at build
time: an eligible spec is not a built one (bench/verified.py is the proof for the rows it runs).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
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

    from deepswe.eval.swebench_env import BASE_FOR_PYTHON, interpreter_for, mirror_path
    from deepswe.eval.swebench_install import (
        UnsupportedEnv,
        apt_and_commands,
        has_c_sources,
        requirement_steps,
    )

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
            python = str(specs.get("python"))
            verdict, interpreter = "eligible", "debian"
            example = (
                mine[0]
                if mine
                else SimpleNamespace(
                    instance_id=f"{repo} {version}", environment_setup_commit=None, base_commit=None
                )
            )
            try:
                if python not in BASE_FOR_PYTHON:
                    interpreter = "host"
                    interpreter_for(example, specs)
                apt_and_commands(example, specs)
                if specs.get("packages") == "environment.yml":
                    requirement_steps(example, specs, None)
            except UnsupportedEnv as exc:
                verdict = f"unsupported: {str(exc).split(': ', 1)[-1]}"
                interpreter = "missing" if "needs Python" in str(exc) else interpreter
            compiler = None
            if mirror is not None and mine:
                repo_dir = mirror_path(mirror, repo)
                commit = example.environment_setup_commit or example.base_commit
                compiler = has_c_sources(repo_dir, commit) if repo_dir.is_dir() else None
            kind = _packages_kind(specs)
            rows.append(
                SpecRow(repo, version, python, kind, len(mine), interpreter, compiler, verdict)
            )
    return rows


def summary(rows: list[SpecRow]) -> dict[str, int]:
    eligible = [r for r in rows if r.verdict == "eligible"]
    return {
        "specs": len(rows),
        "specs_eligible": len(eligible),
        "instances": sum(r.instances for r in rows),
        "instances_eligible": sum(r.instances for r in eligible),
        "instances_needing_a_host_interpreter": sum(
            r.instances for r in eligible if r.interpreter == "host"
        ),
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
            f"{r.interpreter} | {compiler} | {r.verdict.split('; set $')[0][:110]} |"
        )
    return "\n".join(out)


__all__ = ["SpecRow", "markdown", "spec_rows", "summary"]
