"""The tasks training runs on (`training_tasks`): `data.path`'s, each with its image, less those
strict rules refuse and those the health manifest calls unhealthy, each said on stderr. The spine
source and `deepswe-train train`'s preflight read the list from here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deepswe.data.task import Task


def with_images(tasks: list[Task], data: Any) -> list[Task]:
    """`tasks` with the image each will use: R2E-Gym rows get R2E-Gym's image when the engine
    has it, else their environment from `data.repo_mirror` (the plan is printed). Rows that
    cannot run here are left out, said on stderr; a row with neither image nor mirror stops the
    run (ValueError naming what to do)."""
    import sys

    from deepswe.data.task import TaskSource
    from deepswe.env.recipes.r2e_gym.plan import plan_images

    if not any(t.source is TaskSource.R2E_GYM for t in tasks):
        return tasks
    mirror = Path(data.repo_mirror) if data.repo_mirror else None
    plan = plan_images(tasks, mode=data.r2e_env, mirror=mirror)
    for line in plan.lines(mirror):
        print(f"data: {line}", file=sys.stderr)
    if plan.missing:
        raise ValueError(
            f"data.path: {len(plan.missing)} R2E-Gym row(s) have no image and cannot be built: "
            f"{next(iter(plan.missing.values()))} (set data.repo_mirror)"
        )
    return plan.usable


def without_refused(tasks: list[Task]) -> list[Task]:
    """`tasks` less those whose rules refuse them (a runner strict rules cannot own: its
    reward would be read from what the tests print), each said on stderr."""
    import sys

    from deepswe.env.grading.owned import strict_refusal

    kept = []
    for t in tasks:
        why = strict_refusal(t.test_spec)
        if why:
            print(f"data: {t.instance_id} left out: {why}", file=sys.stderr)
        else:
            kept.append(t)
    return kept


def health_manifest(data: Any) -> Path | None:
    """The health manifest training reads: `data.health`, else a health.json beside a task
    file (`deepswe-eval health` writes one), else None."""
    if data.health:
        return Path(data.health)
    if data.path and Path(data.path).is_file():
        beside = Path(data.path).parent / "health.json"
        return beside if beside.is_file() else None
    return None


def healthy(tasks: list[Task], data: Any) -> list[Task]:
    """`tasks` less those the health manifest calls unhealthy (gold fails or flakes, the empty
    patch passes, the tests need the network), each said on stderr with its reason; all of them
    with `data.include_unhealthy`. ValueError (naming data.health) for a manifest that cannot be
    read, or one measured on other tasks."""
    import sys

    from deepswe.eval.audit import dataset_sha256
    from deepswe.eval.health import HealthError, load_manifest, quarantine, summary_lines, weak

    path = health_manifest(data)
    if path is None:
        print("data: no health manifest (data.health): every task kept", file=sys.stderr)
        return tasks
    try:
        manifest = load_manifest(path)
    except HealthError as exc:
        raise ValueError(f"data.health: {exc}") from None
    unknown = [t.instance_id for t in tasks if t.instance_id not in manifest.tasks]
    if unknown and len(unknown) == len(tasks):
        raise ValueError(f"data.health {str(path)!r}: measured none of these tasks")
    if manifest.dataset_sha256 not in (None, dataset_sha256(tasks)):
        print(
            f"data: {path} was measured on a task set that differs from data.path's "
            f"({len(unknown)} task(s) unmeasured, kept)",
            file=sys.stderr,
        )
    kept, left_out = quarantine(tasks, manifest)
    if not left_out:
        print(f"data: {path}: every task healthy", file=sys.stderr)
    else:
        lines = summary_lines(left_out, len(tasks), str(path))
        if data.include_unhealthy:
            lines[0] = lines[0].replace("left out", "KEPT (data.include_unhealthy)")
        print("\n".join(f"data: {line}" for line in lines), file=sys.stderr)
    chosen = tasks if data.include_unhealthy else kept
    feeble = {i: why for i, why in weak(manifest).items() if i in {t.instance_id for t in chosen}}
    if feeble:
        leave = data.weak_tasks == "leave_out"
        verb = "left out (data.weak_tasks: leave_out)" if leave else "KEPT (data.weak_tasks: keep)"
        print(
            f"data: {len(feeble)} of {len(chosen)} task(s) have weak tests, {verb}: "
            + "; ".join(f"{i}: {why[:120]}" for i, why in list(feeble.items())[:3]),
            file=sys.stderr,
        )
        if leave:
            chosen = [t for t in chosen if t.instance_id not in feeble]
    return chosen


def training_tasks(data: Any) -> list[Task]:
    """The tasks training runs on: `data.path`'s, each with its image, less those strict rules
    refuse and those the health manifest calls unhealthy (each said on stderr). ValueError
    naming what to do when none is left or a row cannot run here."""
    from deepswe.data.datasets import load_tasks

    tasks = healthy(without_refused(with_images(load_tasks(data.path), data)), data)
    if not tasks:
        raise ValueError(f"data.path {data.path!r}: no task left to train on (see above)")
    return tasks


__all__ = ["health_manifest", "healthy", "training_tasks", "with_images", "without_refused"]
