"""An evaluation run folder -> candidate pools with the scores its stored verdicts give.

Candidates are the run's graded episodes (`candidates_from_run`); each verifier's score is its
stored Verdict (`VerdictStore(run).load(verifier)`) when that verdict is SCORED, else None:
an unreachable judge, a reply without an answer token, a task without a kept reproduction test
leave the score missing, and selection says so, never a 0. What is missing is counted in notes.
The baselines' scores are read from each candidate's patch (deepswe.verify.baselines).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from pydantic import ValidationError

from deepswe.verify.baselines import baseline_scores
from deepswe.verify.recorded import Recorded, RecordedError, Skipped
from deepswe.verify.store import VerdictStore, candidates_from_run
from deepswe.verify.types import VERIFIERS, Scores, Verdict, VerdictStatus


def load_run_pools(run_dir: Path | str) -> Recorded:
    """The run's candidates and Scores, task by task, runs in order."""
    run_dir = Path(run_dir)
    if not (run_dir / "episodes").is_dir():
        raise FileNotFoundError(f"{run_dir}: not an evaluation run folder (no episodes/ in it)")
    pools, skipped = {}, []
    for iid, pool in candidates_from_run(run_dir).items():
        for c in pool:
            if c.resolved is None:  # never counted as unresolved
                skipped.append(Skipped(where=c.origin, instance_id=iid, reason="no grade"))
        pools[iid] = [c for c in pool if c.resolved is not None]
    store = VerdictStore(run_dir)
    verdicts = {v: _load(store, v) for v in VERIFIERS}
    out = Recorded(candidates=pools, skipped=skipped, records=sum(map(len, pools.values())))
    for verifier, found in verdicts.items():
        statuses = Counter(
            found[(c.instance_id, c.run)].status.value
            if (c.instance_id, c.run) in found
            else "absent"
            for pool in pools.values()
            for c in pool
        )
        statuses.pop(VerdictStatus.SCORED.value, None)
        if statuses:
            counts = ", ".join(f"{n} {s}" for s, n in sorted(statuses.items()))
            out.notes.append(f"{verifier}: no score for {counts} candidate(s)")
    for iid, pool in pools.items():
        out.scores[iid] = [
            Scores(
                run=c.run,
                resolved=c.resolved,
                **{v: _score(verdicts[v], iid, c.run) for v in VERIFIERS},
                **baseline_scores(c.patch),
            )
            for c in pool
        ]
    return out


def _score(found: dict, iid: str, run: int) -> float | None:
    verdict = found.get((iid, run))
    return verdict.score if verdict is not None else None


def _load(store: VerdictStore, verifier: str) -> dict:
    """store.load, or a RecordedError naming the verdict file that does not validate."""
    try:
        return store.load(verifier)
    except ValidationError:
        for path in sorted((store.root / verifier).glob("*/run-*.json")):
            try:
                Verdict.model_validate_json(path.read_text(encoding="utf-8"))
            except ValidationError as e:
                err = e.errors()[0]
                field = ".".join(str(x) for x in err["loc"]) or "(file)"
                raise RecordedError(f"{path}: field {field}: {err['msg']}") from e
        raise
