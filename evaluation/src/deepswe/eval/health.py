"""Task health read back: which tasks a manifest calls unhealthy, and why.

`deepswe-eval health --dataset X --rounds N --out DIR` writes DIR/health.json (the audit's
manifest, `deepswe.eval.audit.AuditManifest`, with no attacks): per task, gold's verdict in each
of N runs (flaky when they differ), the empty patch's, the line of gold's log that shows its tests
need the network (deepswe.eval.network), the image, and the reasons a task is unhealthy. An
audit's audit.json is read the same way.

Training leaves unhealthy tasks out by default (`data.health`, deepswe.train.sources.spine);
an evaluation keeps every task and reports the healthy subset beside the whole
(`deepswe-eval report --health`). With `--mutants K` the manifest also says which tasks' tests
are weak (`weak`, deepswe.eval.strength): training keeps them by default and says how many
(`data.weak_tasks: leave_out` leaves them out), the report adds Pass@1 on the strong ones.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from deepswe.data.task import Task
from deepswe.eval.audit import AuditManifest


class HealthError(ValueError):
    """A manifest that cannot be read, named with the reason."""


def load_manifest(path: str | Path) -> AuditManifest:
    """A health.json or audit.json; a folder holding one is read too."""
    path = Path(path)
    if path.is_dir():
        found = [path / n for n in ("health.json", "audit.json") if (path / n).is_file()]
        if not found:
            raise HealthError(f"{path}: no health.json or audit.json in this folder")
        path = found[0]
    try:
        return AuditManifest.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        raise HealthError(
            f"{path}: no such manifest (write one with deepswe-eval health)"
        ) from None
    except (json.JSONDecodeError, ValidationError) as exc:
        raise HealthError(f"{path}: not a health or audit manifest: {exc}") from None


def unhealthy(manifest: AuditManifest) -> dict[str, str]:
    """Instance id -> the reasons the manifest gives, for every task it calls unhealthy."""
    return {
        i: "; ".join(r.reasons) or "unhealthy"
        for i, r in sorted(manifest.tasks.items())
        if not r.healthy
    }


def weak(manifest: AuditManifest) -> dict[str, str]:
    """Instance id -> why, for every task whose tests the manifest measured weak (a wrong fix
    made from gold earns reward 1 there and a wider test proves it wrong: --mutants K)."""
    return {
        i: r.strength.reason()
        for i, r in sorted(manifest.tasks.items())
        if r.strength is not None and r.strength.weak
    }


def quarantine(tasks: list[Task], manifest: AuditManifest) -> tuple[list[Task], dict[str, str]]:
    """(the tasks the manifest does not call unhealthy, {left-out id: reason}). Tasks the
    manifest never measured are kept."""
    bad = unhealthy(manifest)
    kept = [t for t in tasks if t.instance_id not in bad]
    return kept, {t.instance_id: bad[t.instance_id] for t in tasks if t.instance_id in bad}


def summary_lines(left_out: dict[str, str], total: int, source: str) -> list[str]:
    """What was left out and why, a line per task (reasons cut to one line each)."""
    lines = [f"{len(left_out)} of {total} task(s) left out as unhealthy ({source}):"]
    lines += [f"  {i}: {why[:200]}" for i, why in left_out.items()]
    return lines


__all__ = ["HealthError", "load_manifest", "quarantine", "summary_lines", "unhealthy", "weak"]
