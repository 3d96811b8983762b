"""Verdicts on disk, beside the eval run whose episodes they judge.

    runs/<ID>/verdicts/<verifier>/<instance_id>/run-<k>.json   one Verdict, written atomically

Written like the eval store (temp file, fsync, `os.replace`): a killed scorer leaves whole
verdicts or none. A resumed scorer skips what `done()` lists; UNREACHABLE verdicts are not done,
so a resume asks again, as the eval runner does with infra errors.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from deepswe.data.task import Task
from deepswe.eval.store import EpisodeStatus, RunStore, atomic_write_json
from deepswe.verify.types import Candidate, Verdict, VerdictStatus


class VerdictStore:
    def __init__(self, run_root: Path | str) -> None:
        self.root = Path(run_root) / "verdicts"

    def path(self, verifier: str, instance_id: str, run: int) -> Path:
        if "/" in instance_id or instance_id in {"", ".", ".."}:
            raise ValueError(f"instance_id {instance_id!r} cannot name a folder")
        return self.root / verifier / instance_id / f"run-{run}.json"

    def save(self, verdict: Verdict) -> Path:
        path = self.path(verdict.verifier, verdict.instance_id, verdict.run)
        atomic_write_json(path, verdict.model_dump(mode="json"))
        return path

    def load(self, verifier: str) -> dict[tuple[str, int], Verdict]:
        """Every stored verdict of one verifier, keyed by (instance_id, run)."""
        out: dict[tuple[str, int], Verdict] = {}
        base = self.root / verifier
        if not base.is_dir():
            return out
        for p in sorted(base.glob("*/run-*.json")):
            v = Verdict.model_validate_json(p.read_text(encoding="utf-8"))
            out[(v.instance_id, v.run)] = v
        return out

    def done(self, verifier: str) -> set[tuple[str, int]]:
        return {
            k for k, v in self.load(verifier).items() if v.status is not VerdictStatus.UNREACHABLE
        }


def candidates_from_run(
    run_root: Path | str, tasks: Iterable[Task] = ()
) -> dict[str, list[Candidate]]:
    """The graded episodes of an eval run as candidate pools, one per task, runs in order.
    Episodes without a grade (infra errors, unsupported environments) are not candidates.
    Episodes carry no problem statement; a candidate of one of `tasks` gets its task's (the
    judge reads it)."""
    statements = {t.instance_id: t.problem_statement for t in tasks}
    pools: dict[str, list[Candidate]] = {}
    for rec in RunStore(run_root).records():
        if rec.status is not EpisodeStatus.GRADED or rec.trajectory is None:
            continue
        pools.setdefault(rec.instance_id, []).append(
            Candidate(
                instance_id=rec.instance_id,
                run=rec.run,
                patch=rec.trajectory.patch,
                resolved=rec.resolved,
                trajectory=rec.trajectory,
                problem_statement=statements.get(rec.instance_id, ""),
                origin=f"eval:{Path(run_root).name}",
            )
        )
    return pools
