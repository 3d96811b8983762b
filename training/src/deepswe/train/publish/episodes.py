"""One parquet row per stored (task, run) episode of an evaluation run folder."""

from __future__ import annotations

import json
from pathlib import Path

from deepswe.eval.store import RunStore

# Nested fields are JSON strings: the Hub's dataset viewer shows them and every reader parses
# them, with no schema drift between episodes whose steps differ.
COLUMNS = (
    "instance_id",
    "run",
    "repo",
    "status",
    "outcome",
    "reward",
    "ending",
    "steps",
    "prompt_tokens",
    "completion_tokens",
    "seconds",
    "patch",
    "messages",
    "actions",
)


def episode_rows(eval_run: Path) -> list[dict]:
    rows = []
    for rec in sorted(RunStore(eval_run).records(), key=lambda r: (r.instance_id, r.run)):
        t = rec.trajectory
        rows.append(
            {
                "instance_id": rec.instance_id,
                "run": rec.run,
                "repo": rec.repo,
                "status": rec.status.value,
                "outcome": rec.outcome.value if rec.outcome else None,
                "reward": t.reward if t else None,
                "ending": t.ending.value if t else None,
                "steps": len(t.steps) if t else 0,
                "prompt_tokens": t.prompt_tokens if t else 0,
                "completion_tokens": t.completion_tokens if t else 0,
                "seconds": round(rec.finished_at - rec.started_at, 3),
                "patch": t.patch if t else "",
                "messages": json.dumps(t.messages if t else []),
                "actions": json.dumps(
                    [s.action.model_dump(mode="json") if s.action else None for s in t.steps]
                    if t
                    else []
                ),
            }
        )
    return rows


def write_episodes(eval_run: Path, out: Path) -> int:
    """Write the episodes of `eval_run` to `out` (parquet); returns how many rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = episode_rows(eval_run)
    if rows:
        out.parent.mkdir(parents=True, exist_ok=True)
        table = pa.Table.from_pylist(rows)
        pq.write_table(table.select(list(COLUMNS)), out)
    return len(rows)
