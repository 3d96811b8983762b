"""Grade predictions made elsewhere: each patch in a fresh sandbox, by `grade_patch`."""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from deepswe.data.task import Task
from deepswe.env.episode import grade_patch
from deepswe.eval.config import EvalConfig
from deepswe.eval.store import atomic_write_json
from deepswe.eval.swebench_io import instance_report


def grade_all(
    preds: list[dict], tasks: list[Task], unsupported: dict[str, str], out: Path, cfg: EvalConfig
) -> dict:
    """Writes out/<instance_id>/report.json (+ test_output.txt) and out/summary.json."""
    by_id = {t.instance_id: t for t in tasks}

    def one(pred: dict) -> str:
        iid = pred["instance_id"]
        if iid in unsupported:
            atomic_write_json(
                out / iid / "report.json", {iid: {"unsupported_env": unsupported[iid]}}
            )
            return "unsupported_env"
        patch = pred.get("model_patch")
        run = grade_patch(
            by_id[iid], patch or "", backend=cfg.sandbox_backend, sandbox_limits=cfg.sandbox
        )
        result = run.grade
        (out / iid).mkdir(parents=True, exist_ok=True)
        (out / iid / "test_output.txt").write_text(run.text, encoding="utf-8")
        report = instance_report(by_id[iid], patch, result)
        atomic_write_json(out / iid / "report.json", report)
        return result.outcome.value

    with ThreadPoolExecutor(max_workers=cfg.workers) as pool:
        outcomes = list(pool.map(one, preds))
    counts = Counter(outcomes)
    summary = {
        "predictions": len(preds),
        "counts": dict(sorted(counts.items())),
        "resolved_ids": sorted(
            p["instance_id"] for p, o in zip(preds, outcomes, strict=True) if o == "resolved"
        ),
        "how": "each patch applied to a fresh sandbox of its task, hidden tests run, graded by "
        "the task's log parser (SWE-bench's rules for SWE-bench tasks)",
    }
    atomic_write_json(out / "summary.json", summary)
    return summary
