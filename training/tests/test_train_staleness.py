"""Training one step behind (`rollout.max_staleness: 1`) and the off-policy mask, on the
trainer's unit-test environment (`text` source: a real tiny model, real sampling)."""

from __future__ import annotations

import json
import math
import shutil
import time
from pathlib import Path

import pytest
import torch

from deepswe.train.algos.off_policy import seq_is_mask, sequence_log_ratio
from deepswe.train.config import TrainConfig, validate
from deepswe.train.models import build_test_model
from deepswe.train.sources.text import TextSource
from deepswe.train.trainer import PENDING, Trainer, check_runnable

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return build_test_model(tmp_path_factory.mktemp("tiny"))


def cfg_of(model_dir: Path, staleness: int = 1, source: str = "text", **run) -> TrainConfig:
    return validate(
        {
            "run": {"seed": 11, "steps": 4, "tensorboard": False, **run},
            "model": {"path": str(model_dir)},
            "data": {"source": source, "text": {"target": "s"}},
            "rollout": {
                "tasks_per_step": 2,
                "group_size": 3,
                "concurrency": 3,
                "max_tokens_per_turn": 6,
                "max_staleness": staleness,
            },
            "backend": {"optim": {"lr": 1e-2, "micro_batch_size": 3}},
            "algo": {"loss_constant": 8},
        },
        "test",
    )


def records(run_dir: Path) -> list[dict]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(x).items() if not k.startswith("time/")} for x in lines]


def versions(run_dir: Path, step: int) -> list[int]:
    lines = (run_dir / f"trajectories/step-{step:06d}.jsonl").read_text().splitlines()
    return [json.loads(x)["policy_version"] for x in lines]


def weights(trainer: Trainer) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in trainer.backend.state_dict().items()}


def test_one_step_behind_lags_one_version_at_most_and_trains_every_episode(model_dir, tmp_path):
    """Step 1 trains on its own version's episodes (nothing was sampled before); every later
    step on episodes the previous version sampled, all of them."""
    out = tmp_path / "behind"
    done = Trainer.setup(cfg_of(model_dir), out).train()
    assert [versions(out, s) for s in (1, 2, 3, 4)] == [[0] * 6, [0] * 6, [1] * 6, [2] * 6]
    assert [r["staleness/max"] for r in done] == [0.0, 1.0, 1.0, 1.0]
    assert [r.get("staleness/1", 0.0) for r in done] == [0.0, 6.0, 6.0, 6.0]
    assert all(r["filter/ending/submitted"] == 6 for r in done)
    assert all("time/generation_exposed" in r and "time/generation_wall" in r for r in done)

    sync = tmp_path / "sync"
    done = Trainer.setup(cfg_of(model_dir, staleness=0), sync).train()
    assert [versions(sync, s) for s in (1, 4)] == [[0] * 6, [3] * 6]
    assert [r["staleness/max"] for r in done] == [0.0] * 4


class SlowTextSource(TextSource):
    """The text source whose first task's episodes take a second longer than the rest."""

    def rollout(self, task, policy):
        if task.instance_id == "text-0":
            time.sleep(1.0)
        return super().rollout(task, policy)


def test_a_slow_episode_is_waited_for_never_dropped(model_dir, tmp_path):
    cfg = cfg_of(model_dir, source=f"{__name__}:SlowTextSource", steps=3)
    out = tmp_path / "slow"
    done = Trainer.setup(cfg, out).train()
    for step in (1, 2, 3):
        lines = (out / f"trajectories/step-{step:06d}.jsonl").read_text().splitlines()
        ids = sorted(json.loads(x)["instance_id"] for x in lines)
        assert len(ids) == 6 and ids.count("text-0") in (0, 3, 6)
    assert all(r["filter/ending/submitted"] == 6 and r["filter/dropped"] == 0 for r in done)


def test_one_step_behind_is_seeded_and_resumes_exactly(model_dir, tmp_path):
    """Two runs of one seed agree; a run stopped at a checkpoint keeps the batch already
    sampled for the next step there and goes on exactly as the straight run."""
    straight = Trainer.setup(cfg_of(model_dir, save_every=2), tmp_path / "a")
    straight.train()
    again = Trainer.setup(cfg_of(model_dir, save_every=2), tmp_path / "a2")
    again.train()
    assert records(tmp_path / "a") == records(tmp_path / "a2")

    first = Trainer.setup(cfg_of(model_dir, save_every=2), tmp_path / "b")
    first.train()
    ckpts = tmp_path / "b/checkpoints"
    assert (ckpts / "step-000002" / PENDING).is_file()
    assert not (ckpts / "step-000004" / PENDING).exists()  # the run's last step: none next
    (ckpts / "latest").write_text("step-000002\n")
    shutil.rmtree(ckpts / "step-000004")
    resumed = Trainer.setup(cfg_of(model_dir, save_every=2), tmp_path / "b", resume=True)
    assert resumed.step == 2 and resumed.pending is not None and resumed.pending.step == 2
    resumed.train()
    assert records(tmp_path / "b") == records(tmp_path / "a")
    a, b = weights(straight), weights(resumed)
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_the_is_mask_matches_a_hand_computed_example():
    """Three rows of sampled tokens (mask 1), the trainer's and the sampler's log-probs."""
    trainer = torch.tensor([[-1.0, -2.0, 0.0], [-0.5, -0.5, -0.5], [-3.0, 0.0, 0.0]])
    sampler = torch.tensor([[-1.2, -2.4, 0.0], [-0.5, -0.5, -0.5], [-1.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 0], [1, 1, 1], [1, 0, 0]])
    # row 0: log-ratios 0.2 and 0.4 -> geometric log w = 0.3, sequence log w = 0.6
    # row 1: all 0 -> 0; row 2: one token, -2.0 -> w = e^-2 = 0.135 either way
    geo = sequence_log_ratio(trainer, sampler, mask, "geometric")
    seq = sequence_log_ratio(trainer, sampler, mask, "sequence")
    torch.testing.assert_close(geo, torch.tensor([0.3, 0.0, -2.0], dtype=torch.float64))
    torch.testing.assert_close(seq, torch.tensor([0.6, 0.0, -2.0], dtype=torch.float64))
    # bounds [0.5, 1.5]: w = e^0.3 = 1.35 kept, 1 kept, 0.135 masked
    found = seq_is_mask(trainer, sampler, mask, low=0.5, high=1.5, level="geometric")
    assert found.keep.tolist() == [True, True, False]
    # the whole reply: w = e^0.6 = 1.82 > 1.5, masked too
    found = seq_is_mask(trainer, sampler, mask, low=0.5, high=1.5, level="sequence")
    assert found.keep.tolist() == [False, True, False]
    m = found.metrics()
    assert m["offpolicy/masked_rows"] == 2 and m["offpolicy/masked_share"] == pytest.approx(2 / 3)
    assert m["offpolicy/abs_log_ratio_max"] == pytest.approx(2.0)
    assert math.exp(0.3) < 1.5 < math.exp(0.6)
    with pytest.raises(ValueError, match="is_low"):
        seq_is_mask(trainer, sampler, mask, low=1.5, high=2.0)


def test_masked_rows_train_nothing_and_keep_the_normaliser(model_dir, tmp_path):
    """A mask whose bounds no row meets leaves no update; a row masked keeps the normaliser the
    filter set, as a compact-filtered row does."""
    cfg = cfg_of(model_dir, staleness=0, steps=1)
    trainer = Trainer.setup(cfg, tmp_path / "m")
    trajs, groups = trainer.collect([0, 1])
    update, _ = trainer.advantages(trainer.to_batch(trajs, groups))
    assert update is not None
    n = len(update.rollout)
    lp = update.rollout.old_logprobs
    shifted = lp + update.rollout.loss_mask * 1.0  # every token's log-ratio -1 vs this
    trainer.cfg = cfg.model_copy(
        update={"algo": cfg.algo.model_copy(update={"off_policy": "seq_is_mask"})}
    )
    kept, m = trainer.correct(update, lp, shifted)  # w = e^-1 = 0.37 < 0.5: all masked
    assert kept is None and m["offpolicy/masked_rows"] == n
    half = shifted.clone()
    half[0] = lp[0]  # row 0 matches the sampler exactly: it alone trains
    kept, m = trainer.correct(update, lp, half)
    assert len(kept.rollout) == 1 and kept.denominator == update.denominator
    assert m["offpolicy/masked_rows"] == n - 1
    trainer.close()


def test_one_step_behind_is_refused_where_engines_sleep_for_the_update(model_dir):
    cfg = cfg_of(model_dir)
    colocated = cfg.model_copy(
        update={"cluster": cfg.cluster.model_copy(update={"cpu_colocate": True})}
    )
    with pytest.raises(ValueError, match="rollout.max_staleness 1: cluster.cpu_colocate"):
        check_runnable(colocated)
    with pytest.raises(ValueError, match="max_staleness"):
        cfg_of(model_dir, staleness=2)
