"""examples/trl_openenv (issue #46): TRL's GRPOTrainer runs GRPO steps against a real
`deepswe-eval serve` process on swe-toy tasks, in real Docker sandboxes, the rewards the
grader's. The model is the tests' tiny Qwen3 (deepswe.train.models.build_test_model: the tiny
model's architecture with a 1,024-token vocabulary, so a step takes seconds, not a minute).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl", reason="the trl extra (training[trl]) is not installed")
pytest.importorskip("openenv", reason="the openenv extra (evaluation[openenv]) is not installed")

from deepswe.data.swetoy import make_split  # noqa: E402
from deepswe.env.sandbox.docker import client  # noqa: E402
from deepswe.env.sandbox.owner import PID  # noqa: E402
from deepswe.train.models import build_test_model  # noqa: E402

pytestmark = [pytest.mark.docker, pytest.mark.slow]

SCRIPT = Path(__file__).resolve().parents[1] / "examples/trl_openenv/train_grpo.py"


def test_trl_grpo_runs_to_completion_against_the_server(tmp_path):
    tasks = make_split(tmp_path / "swe-toy", "train", 2)
    data = tmp_path / "train.jsonl"
    data.write_text("".join(t.model_dump_json() + "\n" for t in tasks))
    model = build_test_model(tmp_path / "model")
    out = tmp_path / "run"
    argv = ["--out", out, "--tasks", data, "--model", model, "--steps", "2"]
    argv += ["--tasks-per-step", "2", "--num-generations", "2", "--max-turns", "2"]
    argv += ["--max-new-tokens", "24"]
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *map(str, argv)], capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    curve = [json.loads(x) for x in (out / "reward_curve.jsonl").read_text().splitlines()]
    assert [x["step"] for x in curve] == [1, 2]
    for step in curve:  # every episode graded: a reward from the grader, none infra_error
        assert len(step["rewards"]) == 4 and step["infra_errors"] == 0
        assert all(r in (0.0, 1.0) for r in step["rewards"])
        assert sum(step["outcomes"].values()) == 4
        assert set(step["tasks"]) <= {t.instance_id for t in tasks}
    assert (out / "reward_curve.png").stat().st_size > 0
    logged = [json.loads(x) for x in (out / "trl_log.jsonl").read_text().splitlines()]
    assert [h["reward"] for h in logged if "reward" in h] == [x["reward_mean"] for x in curve]
    pid = (out / "server.pid").read_text().strip()
    assert not client().containers.list(all=True, filters={"label": f"{PID}={pid}"})
