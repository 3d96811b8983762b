"""The SFT warm start's settings (the profile's `sft:` section, the verb's flags as overrides of
it) and the stage end to end on one toy task in Docker: a model and its resolved config."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml
from typer.testing import CliRunner

from deepswe.train.cli import EXIT_INVALID, app
from deepswe.train.config import ConfigError, load_config, validate
from deepswe.train.models import build_test_model
from deepswe.train.sft import SFTConfig, run_sft

torch.set_num_threads(1)

TINY = Path(__file__).resolve().parents[2] / "configs" / "tiny.yaml"


def test_the_sft_section_is_validated_like_every_other():
    """Absent, it is the defaults the verb's flags had (300 epochs, 1 right : 2 wrong)."""
    cfg = validate({"model": {"path": "m"}, "data": {"source": "text"}}, "test")
    assert cfg.sft == SFTConfig() and (cfg.sft.epochs, cfg.sft.wrong_per_task) == (300, 2)
    assert (cfg.sft.lr, cfg.sft.seed) == (3e-3, 0)
    with pytest.raises(ConfigError, match="sft.epoch: unknown key"):
        load_config(TINY, ["sft.epoch=3"])
    with pytest.raises(ConfigError, match="sft.epochs"):
        load_config(TINY, ["sft.epochs=0"])
    assert load_config(TINY, ["sft.lr=1e-5"]).sft.lr == 1e-5


def test_the_verbs_overrides_edit_the_profiles_sft_section_in_order(tmp_path, monkeypatch):
    """`deepswe-train sft ... sft.epochs=N` (the Makefile's call): overrides of the sft
    section, a later one winning; the old `--epochs` flag is gone (one way to set a value)."""
    from deepswe.train import sft

    seen = []
    monkeypatch.setattr(sft, "run_sft", lambda cfg, out, log: seen.append(cfg) or ([], [1.0]))
    args = [
        "sft",
        "--config",
        str(TINY),
        "--out",
        str(tmp_path / "m"),
        "sft.epochs=3",
        "sft.lr=1e-05",
        "sft.wrong_per_task=1",
        "sft.epochs=7",
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    (cfg,) = seen
    want = {"epochs": 7, "lr": 1e-5, "wrong_per_task": 1}  # sft.epochs=7 wins over =3
    assert cfg.sft == load_config(TINY).sft.model_copy(update=want)
    bad = CliRunner().invoke(
        app, ["sft", "--config", str(TINY), "--out", str(tmp_path / "m"), "sft.epoks=3"]
    )
    assert bad.exit_code == EXIT_INVALID and "sft.epoks: unknown key" in bad.output
    old = CliRunner().invoke(
        app, ["sft", "--config", str(TINY), "--out", str(tmp_path / "m"), "--epochs", "3"]
    )
    assert old.exit_code != 0 and "--epochs" in old.output


@pytest.mark.docker
def test_sft_writes_the_model_and_its_resolved_config(tmp_path):
    """One toy task, its right fix and one wrong one played in Docker, one epoch: the folder
    holds a model transformers loads and the config it was made with (sft section included)."""
    from transformers import AutoModelForCausalLM

    from deepswe.data.toy import make_toy_tasks

    tasks = make_toy_tasks(tmp_path / "toy", n=1)
    cfg = validate(
        {
            "model": {"path": str(build_test_model(tmp_path / "model"))},
            "data": {"path": "given"},
            "episode": {"max_steps": 4, "sandbox": {"memory": "1g", "pids": 256}},
            "sft": {"epochs": 1, "wrong_per_task": 1, "threads": 1},
        },
        "test",
    )
    episodes, losses = run_sft(cfg, tmp_path / "sft", tasks=tasks, log=print)
    assert [(e.label, e.reward) for e in episodes] == [("right", 1.0), ("wrong-0", 0.0)]
    assert len(losses) == 1 and losses[0] > 0
    written = yaml.safe_load((tmp_path / "sft" / "config.yaml").read_text())
    assert validate(written, "config.yaml") == cfg and written["sft"]["epochs"] == 1
    AutoModelForCausalLM.from_pretrained(tmp_path / "sft", local_files_only=True)
