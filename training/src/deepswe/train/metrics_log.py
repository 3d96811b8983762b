"""Where step metrics go: runs/ID/metrics.jsonl (one JSON object per step), a line per step on
the console, and runs/ID/tensorboard/ when the `tensorboard` package is installed and enabled.
The records themselves are made in metrics.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def progress_line(record: dict[str, Any], total: int = 0) -> str:
    """One line per step for the console: reward, episodes trained and masked, seconds."""
    step = f"step {record['step']}" + (f"/{total}" if total else "")
    trained, masked = int(record.get("filter/trained", 0)), int(record.get("filter/masked", 0))
    secs = record.get("time/step")
    mean = record.get("reward/mean")
    reward = f"reward {mean:.3f}" if mean is not None else "no reward (every rollout infra_error)"
    infra = int(record.get("reward/infra_rows", 0))
    return (
        f"{step}: {reward}, {trained} episodes trained, {masked} masked"
        + (f", {infra} infra_error" if infra else "")
        + (f", {secs:.0f} s" if secs is not None else "")
    )


class MetricsLog:
    """metrics.jsonl (+ TensorBoard); on resume, drops lines past the checkpoint's step."""

    def __init__(
        self, run_dir: Path, resume_step: int | None, tensorboard: bool, total_steps: int = 0
    ) -> None:
        self.path = run_dir / "metrics.jsonl"
        self.total = total_steps
        if resume_step is not None and self.path.exists():
            kept = [
                line
                for line in self.path.read_text().splitlines()
                if line.strip() and json.loads(line)["step"] <= resume_step
            ]
            self.path.write_text("".join(line + "\n" for line in kept))
        elif resume_step is None:
            self.path.write_text("")
        self.tb = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:  # optional: tensorboard is not a dependency
                self.tb = None
            else:
                self.tb = SummaryWriter(str(run_dir / "tensorboard"))

    def write(self, record: dict[str, Any]) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps(record, sort_keys=True) + "\n")
        print(progress_line(record, self.total), file=sys.stderr, flush=True)
        if self.tb is not None:
            for k, v in record.items():
                if k != "step":
                    self.tb.add_scalar(k, v, record["step"])
            self.tb.flush()

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()
