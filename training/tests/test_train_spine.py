"""One real GRPO++ step on a real spine task: the tiny policy acts through the real tools in
Docker sandboxes, the patch is graded by a real pytest run, and the trainer updates on it."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
import torch

from deepswe.data.task import EnvironmentSpec, HiddenTests, Task, TaskSource, TestSpec
from deepswe.train.config import validate
from deepswe.train.models import build_test_model
from deepswe.train.trainer import Trainer

pytestmark = pytest.mark.docker
torch.set_num_threads(2)

# The calc task of environments/tests/conftest.py (a bug in add(); a hidden test finds it).
OPS_GOOD = "def add(a, b):\n    return a + b\n"
OPS_BUG = OPS_GOOD.replace("a + b", "a - b")
HIDDEN_TEST = "from calc.ops import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"


def git(repo: Path, *args: str) -> str:
    cmd = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args]
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def calc_task(root: Path) -> Task:
    repo = root / "calc"
    (repo / "calc").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "calc" / "__init__.py").write_text("")
    (repo / "calc" / "ops.py").write_text(OPS_BUG)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "calc with a bug")
    base = git(repo, "rev-parse", "HEAD").strip()
    (repo / "tests").mkdir()
    (repo / "tests" / "test_hidden.py").write_text(HIDDEN_TEST)
    git(repo, "add", "-N", "tests/test_hidden.py")
    test_patch = git(repo, "diff")
    git(repo, "reset", "-q")
    (repo / "tests" / "test_hidden.py").unlink()
    return Task(
        instance_id="calc__calc-1",
        repo="calc/calc",
        base_commit=base,
        problem_statement="add(2, 3) returns -1 instead of 5.",
        source=TaskSource.CUSTOM,
        environment=EnvironmentSpec(source=str(repo), pip=["pytest"]),
        test_spec=TestSpec(command="python -m pytest -rA tests", log_parser="pytest"),
        hidden=HiddenTests(fail_to_pass=["tests/test_hidden.py::test_add"], test_patch=test_patch),
    )


def test_one_grpo_step_on_a_real_spine_task(tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(calc_task(tmp_path).model_dump_json() + "\n")
    cfg = validate(
        {
            "run": {"steps": 1, "tensorboard": False},
            "model": {"path": str(build_test_model(tmp_path / "tiny"))},
            "data": {"source": "spine", "path": str(tasks)},
            "rollout": {
                "tasks_per_step": 1,
                "group_size": 2,
                "concurrency": 2,
                "max_tokens_per_turn": 16,
            },
            "episode": {"max_steps": 2, "sandbox": {"memory": "1g", "pids": 256}},
            "algo": {"loss_constant": 64, "mask_endings": []},  # train on the cut-off episodes
        },
        "test",
    )
    trainer = Trainer.setup(cfg, tmp_path / "run")
    started = time.monotonic()
    (record,) = trainer.train()
    print(
        f"\nfirst real-spine GRPO++ step: {time.monotonic() - started:.1f} s "
        f"({json.dumps({k: round(v, 2) for k, v in record.items() if k.startswith('time/')})})"
    )

    trajs = [json.loads(x) for x in (tmp_path / "run/trajectories/step-000001.jsonl").open()]
    assert len(trajs) == 2
    for t in trajs:
        assert t["ending"] != "infra_error", t["ending_detail"]
        # A random tiny model does not fix the bug: graded by the hidden test, not assumed.
        assert (t["outcome"], t["reward"]) == ("unresolved", 0.0), t["grade"]
        assert t["messages"][0]["role"] == "system" and len(t["steps"]) >= 1
        assert all(s["token_ids"] and len(s["token_ids"]) == len(s["logprobs"]) for s in t["steps"])
    assert record["filter/trained"] == 2 and record["tokens/response"] > 0
    assert record["rollout/logprob_diff"] < 1e-3  # engine and trainer agree on what was sampled
    # All rewards 0: leave-one-out advantages and so the gradient are 0, yet the step ran on
    # every sampled token (and Adam's step counter moved).
    assert record["groups/solve_none"] == 1 and record["actor/grad_norm"] == 0.0
    assert record["actor/skipped"] == 0.0 and record["tokens/trained"] == record["tokens/response"]
    assert all(s["step"] == 1 for s in trainer.backend.optimizer.state.values())
    assert (tmp_path / "run/checkpoints/step-000001/model/model.safetensors").exists()


def test_a_grading_infra_failure_never_reaches_the_loss(tmp_path):
    """Regression: a grading-stage infra failure (here: a task whose own test patch does not
    apply) set outcome infra_error but left the ending `submitted`/`max_steps`; the trainer
    filters on endings, so the row was trained on as a failure with reward 0."""
    from deepswe.env.trajectory import Trajectory
    from deepswe.train.rollout import ChatRenderer, trajectory_sequence

    good = calc_task(tmp_path / "good")
    stale = (  # the broken task's test patch: its context is nowhere in the repository
        "diff --git a/calc/ops.py b/calc/ops.py\n--- a/calc/ops.py\n+++ b/calc/ops.py\n"
        "@@ -1 +1 @@\n-this line is not in the file\n+x = 1\n"
    )
    broken = good.model_copy(
        update={
            "instance_id": "calc__calc-broken",
            "hidden": good.hidden.model_copy(update={"test_patch": stale}),
        }
    )
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(good.model_dump_json() + "\n" + broken.model_dump_json() + "\n")
    cfg = validate(
        {
            "run": {"steps": 1, "tensorboard": False},
            "model": {"path": str(build_test_model(tmp_path / "tiny"))},
            "data": {"source": "spine", "path": str(tasks), "shuffle": False},
            "rollout": {
                "tasks_per_step": 2,
                "group_size": 2,
                "concurrency": 2,
                "max_tokens_per_turn": 16,
            },
            "episode": {"max_steps": 1, "sandbox": {"memory": "1g", "pids": 256}},
            "algo": {"loss_constant": 64, "mask_endings": []},  # cut-off rows are trained
        },
        "test",
    )
    trainer = Trainer.setup(cfg, tmp_path / "run")
    (record,) = trainer.train()

    lines = (tmp_path / "run/trajectories/step-000001.jsonl").read_text().splitlines()
    trajs = [Trajectory.model_validate_json(x) for x in lines]
    ids = [t.instance_id for t in trajs]
    assert ids == [good.instance_id] * 2 + [broken.instance_id] * 2
    for t in trajs[2:]:
        assert (t.ending.value, t.outcome, t.reward) == ("infra_error", "infra_error", None)
        assert "hidden tests did not apply" in t.ending_detail
    assert all(t.ending.value == "max_steps" and t.reward == 0.0 for t in trajs[:2])
    assert (record["filter/dropped"], record["filter/trained"]) == (2.0, 2.0)

    # The batch the optimizer saw, rebuilt from the same trajectories: only the good task's rows.
    update, counts = trainer.advantages(trainer.to_batch(trajs, [0, 0, 1, 1]))
    assert counts.dropped == 2 and update is not None
    assert update.rollout.endings == ["max_steps", "max_steps"]
    renderer = ChatRenderer(trainer.engine.tokenizer)
    for row, t in zip(update.rollout.input_ids, trajs[:2], strict=True):
        ids = trajectory_sequence(t, renderer).ids
        assert row[: len(ids)].tolist() == ids
