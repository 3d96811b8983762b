"""The trainer end to end on its unit-test environment (`text` source: real tiny model, real
sampling, reward = the reply contains a target string): metrics, checkpoints, exact resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml

from deepswe.env.trajectory import Ending
from deepswe.train.config import ConfigError, TrainConfig, validate
from deepswe.train.metrics import step_metrics
from deepswe.train.models import build_test_model
from deepswe.train.sft import SFTConfig
from deepswe.train.trainer import Trainer, train_from_files

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return build_test_model(tmp_path_factory.mktemp("tiny"))


def text_cfg(model_dir: Path, **run) -> TrainConfig:
    return validate(
        {
            "run": {"seed": 7, "steps": 3, "tensorboard": False, **run},
            "model": {"path": str(model_dir)},
            "data": {"source": "text", "text": {"target": "s"}},
            "rollout": {
                "tasks_per_step": 2,
                "group_size": 4,
                "concurrency": 3,
                "max_tokens_per_turn": 6,
            },
            "backend": {"optim": {"lr": 1e-2, "micro_batch_size": 3}},
            "algo": {"loss_constant": 8},
        },
        "test",
    )


def metrics(run_dir: Path) -> list[dict]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(x).items() if not k.startswith("time/")} for x in lines]


def weights(trainer: Trainer) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in trainer.backend.state_dict().items()}


def test_a_text_run_logs_metrics_and_leaves_loadable_checkpoints(model_dir, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    cfg = text_cfg(model_dir, steps=2)
    trainer = Trainer.setup(cfg, tmp_path / "run")
    records = trainer.train()
    assert [r["step"] for r in records] == [1, 2] == [m["step"] for m in metrics(tmp_path / "run")]
    r = records[0]
    for key in (
        "reward/mean",
        "groups/solve_none",
        "groups/solve_all",
        "groups/partial",
        "filter/ending/submitted",
        "tokens/response",
        "actor/clipfrac",
        "actor/grad_norm",
        "actor/entropy",
        "time/step",
        "time/rollout",
    ):
        assert key in r, key
    assert r["groups/solve_none"] + r["groups/solve_all"] + r["groups/partial"] == 2
    assert r["filter/ending/submitted"] == 8 and r["rollout/logprob_diff"] < 1e-4
    assert any(m["groups/partial"] > 0 for m in records)  # advantages are not all zero
    assert (
        validate(__import__("yaml").safe_load((tmp_path / "run/config.yaml").read_text()), "x")
        == cfg
    )
    ckpt = tmp_path / "run/checkpoints" / (tmp_path / "run/checkpoints/latest").read_text().strip()
    assert ckpt.name == "step-000002"
    model = AutoModelForCausalLM.from_pretrained(ckpt / "model")
    AutoTokenizer.from_pretrained(ckpt / "model")
    for k, v in model.state_dict().items():
        assert torch.equal(v, trainer.backend.state_dict()[k])
    lines = (tmp_path / "run/trajectories/step-000002.jsonl").read_text().splitlines()
    assert len(lines) == 8 and json.loads(lines[0])["steps"][0]["token_ids"]


def test_a_resumed_run_continues_exactly_as_if_never_stopped(model_dir, tmp_path):
    straight = Trainer.setup(text_cfg(model_dir, steps=4, save_every=2), tmp_path / "a")
    straight.train()

    first = Trainer.setup(text_cfg(model_dir, steps=3, save_every=2), tmp_path / "b")
    first.train()
    # Killed after logging step 3 but before its checkpoint was complete: back to step 2.
    ckpts = tmp_path / "b/checkpoints"
    (ckpts / "latest").write_text("step-000002\n")
    __import__("shutil").rmtree(ckpts / "step-000003")
    resumed = Trainer.setup(text_cfg(model_dir, steps=4, save_every=2), tmp_path / "b", resume=True)
    assert resumed.step == 2
    resumed.train()

    assert metrics(tmp_path / "b") == metrics(tmp_path / "a")  # step 3 logged once, identical
    a, b = weights(straight), weights(resumed)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(
        torch.equal(a[k], v)
        for k, v in weights(Trainer.setup(text_cfg(model_dir), tmp_path / "fresh")).items()
    )


def test_resume_refuses_a_different_config(model_dir, tmp_path):
    Trainer.setup(text_cfg(model_dir, steps=1), tmp_path / "r").train()
    changed = text_cfg(model_dir, steps=2).model_copy(
        update={"rollout": text_cfg(model_dir).rollout.model_copy(update={"group_size": 2})}
    )
    with pytest.raises(ConfigError, match="differs .* in: rollout.group_size"):
        Trainer.setup(changed, tmp_path / "r", resume=True)
    # The sft section made model.path before the run (and older run folders have none).
    warm = text_cfg(model_dir, steps=2).model_copy(update={"sft": SFTConfig(epochs=1)})
    Trainer.setup(warm, tmp_path / "r", resume=True).close()
    # A run folder from before a field existed (episode.prompt_variant came with EpisodeLimits
    # embedded): absent there and at its default now is not a change; another value is.
    saved = tmp_path / "r" / "config.yaml"
    doc = yaml.safe_load(saved.read_text())
    del doc["episode"]["prompt_variant"]
    saved.write_text(yaml.safe_dump(doc))
    Trainer.setup(text_cfg(model_dir, steps=2), tmp_path / "r", resume=True).close()
    doc["episode"].pop("prompt_variant", None)
    saved.write_text(yaml.safe_dump(doc))
    other = text_cfg(model_dir, steps=2)
    other = other.model_copy(
        update={"episode": other.episode.model_copy(update={"prompt_variant": "eval"})}
    )
    with pytest.raises(ConfigError, match="in: episode.prompt_variant"):
        Trainer.setup(other, tmp_path / "r", resume=True)


def test_old_logprobs_recomputed_or_taken_from_the_engine(model_dir, tmp_path):
    trainer = Trainer.setup(text_cfg(model_dir), tmp_path / "o")
    trajs, groups = trainer.collect([0, 1])
    batch = trainer.to_batch(trajs, groups)
    engine_lp = batch.old_logprobs.clone()
    trainer.old_logprobs(batch)  # default: recompute
    assert torch.equal(
        batch.old_logprobs, trainer.backend.forward_logprobs(batch) * batch.loss_mask
    )
    torch.testing.assert_close(batch.old_logprobs, engine_lp, atol=1e-4, rtol=0)

    eng = text_cfg(model_dir).model_copy(
        update={
            "rollout": text_cfg(model_dir).rollout.model_copy(update={"old_logprobs": "engine"})
        }
    )
    trainer = Trainer.setup(eng, tmp_path / "e")
    batch = trainer.to_batch(*trainer.collect([0, 1]))
    engine_lp = batch.old_logprobs.clone()
    trainer.old_logprobs(batch)
    assert torch.equal(batch.old_logprobs, engine_lp)


def test_train_from_files_will_not_overwrite_a_run(model_dir, tmp_path):
    profile = tmp_path / "p.yaml"
    profile.write_text(
        __import__("yaml").safe_dump(text_cfg(model_dir, steps=1).model_dump(mode="json"))
    )
    out = train_from_files(profile, ["run.save_every=1"], tmp_path / "run")
    assert (out / "checkpoints/latest").exists()
    with pytest.raises(ConfigError, match="already holds checkpoints"):
        train_from_files(profile, [], tmp_path / "run")
    train_from_files(profile, ["run.steps=2"], tmp_path / "run", resume=True)
    assert [m["step"] for m in metrics(out)] == [1, 2]
    # The last checkpoint's model is exported in HF format for `make eval`.
    from transformers import AutoModelForCausalLM

    final = AutoModelForCausalLM.from_pretrained(out / "final")
    last = AutoModelForCausalLM.from_pretrained(out / "checkpoints/step-000002/model")
    assert all(
        torch.equal(a, b)
        for a, b in zip(final.state_dict().values(), last.state_dict().values(), strict=True)
    )


@pytest.mark.slow
def test_the_text_environment_is_learnable(model_dir, tmp_path):
    """GRPO++ end to end raises the reward: the update's sign and scale are right."""
    cfg = text_cfg(model_dir, steps=30, save_every=100).model_copy(
        update={
            "rollout": text_cfg(model_dir).rollout.model_copy(
                update={"tasks_per_step": 4, "group_size": 8}
            )
        }
    )
    rewards = [r["reward/mean"] for r in Trainer.setup(cfg, tmp_path / "l").train()]
    assert sum(rewards[-10:]) / 10 > sum(rewards[:10]) / 10 + 0.1, rewards


def test_infra_error_rollouts_leave_the_batch(model_dir, tmp_path):
    """A rollout whose sandbox never started (no messages, no tokens, ending infra_error) is
    dropped, never trained on as a reward 0, and the rest of the batch still trains."""
    from deepswe.env.trajectory import Trajectory

    trainer = Trainer.setup(text_cfg(model_dir), tmp_path / "i")
    trajs, groups = trainer.collect([0, 1])
    trajs[0] = Trajectory(instance_id="x", policy="p", messages=[], ending=Ending.INFRA_ERROR)
    batch = trainer.to_batch(trajs, groups)
    assert batch.attention_mask[0].sum() == 0
    trainer.old_logprobs(batch)
    assert torch.isfinite(batch.old_logprobs).all()
    update, counts = trainer.advantages(batch)
    assert (counts.dropped, len(update.rollout)) == (1, 7)
    stats = trainer.backend.train_step(update)
    assert not stats.skipped and stats.trained_tokens == int(batch.loss_mask[1:].sum())
    record = step_metrics(1, batch, counts, stats, 0.0, {})  # the mean of the 7 real rewards
    assert record["reward/infra_rows"] == 1
    assert record["reward/mean"] == pytest.approx(float(batch.rewards[1:].mean()))


def test_compact_filtered_rows_count_in_the_normaliser_but_cost_no_update(model_dir, tmp_path):
    trainer = Trainer.setup(text_cfg(model_dir), tmp_path / "c")
    trajs, groups = trainer.collect([0, 1])
    trajs[3] = trajs[3].model_copy(update={"ending": Ending.MAX_STEPS})
    update, counts = trainer.advantages(trainer.to_batch(trajs, groups))
    assert counts.masked == 1 and len(update.rollout) == 7
    assert update.denominator == 8 * trainer.cfg.algo.loss_constant  # seq-sum-constant: B = 8

    for i, t in enumerate(trajs):  # every rollout cut off: nothing to learn, no optimizer step
        trajs[i] = t.model_copy(update={"ending": Ending.TIMEOUT})
    update, counts = trainer.advantages(trainer.to_batch(trajs, groups))
    assert update is None and counts.masked == 8
