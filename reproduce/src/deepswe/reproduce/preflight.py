"""The first stage of `make reproduce`: everything missing before hours of work, each with what
to do (tiny: git, a Docker engine, disk, vLLM's CPU build, a valid profile; deepswe-32b: those
and GPUs and the served endpoints)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from deepswe.reproduce.pipeline import Context, StageFailed, StageResult


def _free_gb(path: Path) -> float:
    path = Path(path)
    while not path.exists():
        path = path.parent
    return shutil.disk_usage(path).free / 2**30


def preflight_problems(ctx: Context) -> tuple[list[str], dict]:
    """Everything missing before hours of work, each with what to do; and what was found."""
    problems, found = [], {"cores": os.cpu_count()}
    try:
        with open("/proc/meminfo") as fh:
            kb = int(next(ln for ln in fh if ln.startswith("MemTotal")).split()[1])
        found["memory_gb"] = round(kb / 2**20, 1)
    except (OSError, StopIteration, ValueError):
        pass
    if shutil.which("git") is None:
        problems.append("git: not on PATH (apt-get install git)")
    try:
        r = subprocess.run(
            ["docker", "info", "-f", "{{.ServerVersion}} {{.DockerRootDir}}"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        if r.returncode != 0:
            raise OSError(r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "no answer")
        version, root = r.stdout.split()
        found["docker"] = version
        free = _free_gb(Path(root))
        found["docker_free_gb"] = round(free, 1)
        if free < ctx.cfg.preflight.min_free_gb:
            problems.append(
                f"disk: {free:.1f} GB free under Docker's {root}, want "
                f"{ctx.cfg.preflight.min_free_gb:g} (reproduce.preflight.min_free_gb)"
            )
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        problems.append(f"docker: the engine does not answer ({exc}); `make engine` starts one")
    free = _free_gb(ctx.out)
    found["runs_free_gb"] = round(free, 1)
    if free < ctx.cfg.preflight.min_free_gb:
        problems.append(
            f"disk: {free:.1f} GB free under {ctx.out}, want "
            f"{ctx.cfg.preflight.min_free_gb:g} (reproduce.preflight.min_free_gb)"
        )
    if ctx.cfg.preflight.vllm:
        from deepswe.train.engines.vllm_server import find_python

        try:
            found["vllm_python"] = str(find_python())
        except FileNotFoundError as exc:
            problems.append(f"vllm: {exc}")
    from deepswe.train.config import load_config

    try:
        load_config(ctx.profile)
    except Exception as exc:  # a ConfigError naming the field
        problems.append(f"profile: {exc}")
    return problems, found


def preflight(ctx: Context) -> StageResult:
    problems, found = preflight_problems(ctx)
    for k, v in found.items():
        ctx.echo(f"  {k}: {v}")
    if problems:
        raise StageFailed("preflight: cannot run the pipeline here:\n  " + "\n  ".join(problems))
    return StageResult(numbers=found)


def cluster_preflight(ctx: Context) -> StageResult:
    problems, found = preflight_problems(ctx)
    if shutil.which("nvidia-smi") is None:
        problems.append(
            "gpu: no nvidia-smi; deepswe-32b trains on a GPU cluster (README, GPU path)"
        )
    for var in ("BASE_URL", "JUDGE_URL"):
        if not os.environ.get(var):
            problems.append(
                f"{var}: unset; the 32B policy and the judge are served by vLLM "
                "(evaluation/README.md, verifiers/README.md)"
            )
    for k, v in found.items():
        ctx.echo(f"  {k}: {v}")
    if problems:
        raise StageFailed("preflight: cannot run deepswe-32b here:\n  " + "\n  ".join(problems))
    return StageResult(numbers=found)


__all__ = ["cluster_preflight", "preflight", "preflight_problems"]
