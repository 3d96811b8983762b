"""`deepswe-train` verbs through Typer's runner: init-model, validate-config, train."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml
from typer.testing import CliRunner

from deepswe.train.cli import EXIT_CANNOT_RUN, EXIT_INVALID, app
from deepswe.train.models import build_test_model

torch.set_num_threads(1)

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
runner = CliRunner()


@pytest.fixture(scope="module")
def qwen_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("models") / "tiny-qwen3"
    result = runner.invoke(app, ["init-model", "--out", str(out), "--seed", "3"])
    assert result.exit_code == 0, result.output
    assert "9,805,568 parameters" in result.output and "vocabulary 151,669" in result.output
    return out


def test_init_model_writes_a_model_transformers_loads_offline(qwen_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(str(qwen_dir), local_files_only=True)
    tok = AutoTokenizer.from_pretrained(str(qwen_dir), local_files_only=True)
    assert model.config.vocab_size == len(tok)
    again = runner.invoke(app, ["init-model", "--out", str(qwen_dir)])
    assert again.exit_code == EXIT_INVALID and "not an empty folder" in again.output
    bad = runner.invoke(app, ["init-model", "--out", str(qwen_dir.parent / "x"), "--size", "xl"])
    assert bad.exit_code == EXIT_INVALID and "known sizes are tiny, small" in bad.output


def test_validate_config_prints_the_resolved_tiny_profile(qwen_dir):
    result = runner.invoke(
        app, ["validate-config", str(CONFIGS / "tiny.yaml"), f"model.path={qwen_dir}"]
    )
    assert result.exit_code == 0, result.output
    resolved = yaml.safe_load(result.stdout)
    assert resolved["model"]["path"] == str(qwen_dir)
    assert resolved["rollout"]["group_size"] == 4 and resolved["algo"]["eps_high"] == 0.28
    assert "valid, and runnable on this machine" in result.stderr


def test_tiny_profile_points_at_the_init_model_output():
    """`make train PROFILE=tiny` runs init-model --out runs/models/tiny-qwen3 first."""
    cfg = yaml.safe_load((CONFIGS / "tiny.yaml").read_text())
    assert cfg["model"]["path"] == "runs/models/tiny-qwen3"


def test_validate_config_names_the_file_and_the_unknown_key(tmp_path):
    bad = tmp_path / "typo.yaml"
    text = (CONFIGS / "tiny.yaml").read_text()
    bad.write_text(text.replace("  seed: 0\n", "  seed: 0\n  sede: 1\n", 1))
    result = runner.invoke(app, ["validate-config", str(bad)])
    assert result.exit_code == EXIT_INVALID
    assert f"{bad}: invalid config" in result.output and "run.sede: unknown key" in result.output
    assert "Traceback" not in result.output and result.stdout == ""  # nothing printed as valid

    override = runner.invoke(
        app, ["validate-config", str(CONFIGS / "tiny.yaml"), "rollout.group_size=0"]
    )
    assert override.exit_code == EXIT_INVALID and "rollout.group_size" in override.output


@pytest.mark.skipif(torch.cuda.device_count() >= 64, reason="this machine has the 64 GPUs")
def test_the_32b_recipe_validates_then_stops_for_want_of_gpus():
    path = CONFIGS / "deepswe-32b.yaml"
    assert path.read_text().startswith("# deepswe-train train --config configs/deepswe-32b.yaml")
    result = runner.invoke(app, ["validate-config", str(path)])
    assert result.exit_code == EXIT_CANNOT_RUN
    resolved = yaml.safe_load(result.stdout)  # validated and resolved before stopping
    assert resolved["model"]["path"] == "Qwen/Qwen3-32B"
    assert (resolved["rollout"]["tasks_per_step"], resolved["rollout"]["group_size"]) == (8, 8)
    assert resolved["backend"]["optim"]["lr"] == 1e-6 and resolved["engine"]["name"] == "vllm"
    assert "the config is valid, but it cannot run here" in result.stderr
    found = torch.cuda.device_count()
    assert f"cluster.gpus: this profile needs 64 GPUs; found {found}" in result.stderr
    assert "Traceback" not in result.output


def test_train_runs_refuses_a_used_folder_and_resumes(tmp_path, monkeypatch):
    """A one-step run of tiny.yaml on the trainer's text environment (no Docker), then resume.
    Regression (issue 15): the verb parsed the profile, then the trainer parsed it again."""
    from deepswe.train import config, trainer

    parsed = []
    load = config.load_config

    def counted(path, overrides=()):
        parsed.append(path)
        return load(path, overrides)

    monkeypatch.setattr(config, "load_config", counted)
    monkeypatch.setattr(trainer, "load_config", counted)
    model = build_test_model(tmp_path / "model")
    out = tmp_path / "run"
    args = [
        "train",
        "--config",
        str(CONFIGS / "tiny.yaml"),
        "--out",
        str(out),
        f"model.path={model}",
        "data.source=text",
        "run.steps=1",
        "run.tensorboard=false",
        "rollout.max_tokens_per_turn=4",
        "algo.loss_constant=8",
    ]
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    assert parsed == [CONFIGS / "tiny.yaml"]  # once per run
    assert f"done: {out}" in first.output
    assert "step 1/1: reward " in first.output  # one progress line a step
    assert (out / "config.yaml").exists() and (out / "checkpoints" / "latest").exists()

    again = runner.invoke(app, args)
    assert again.exit_code == EXIT_INVALID and "pass --resume" in again.output
    assert "Traceback" not in again.output

    resumed = runner.invoke(app, [*args[:-4], "run.steps=2", *args[-3:], "--resume"])
    assert resumed.exit_code == 0, resumed.output
    steps = [json.loads(x)["step"] for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2]


def test_train_stops_before_starting_when_the_model_is_missing(tmp_path):
    result = runner.invoke(
        app,
        [
            "train",
            "--config",
            str(CONFIGS / "tiny.yaml"),
            "--out",
            str(tmp_path / "run"),
            f"model.path={tmp_path / 'none'}",
        ],
    )
    assert result.exit_code == EXIT_CANNOT_RUN
    assert "deepswe-train init-model --out" in result.output
    assert not (tmp_path / "run").exists()


def test_every_option_has_help():
    import typer.main

    group = typer.main.get_command(app)
    for name, command in group.commands.items():
        for param in command.params:
            assert getattr(param, "help", None), f"{name}: {param.name} has no help"
