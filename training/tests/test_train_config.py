"""Run configs: one YAML profile + `a.b=value` overrides, validated, unknown keys named."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from deepswe.data.profile import parse_override
from deepswe.train.backends import BACKENDS
from deepswe.train.config import ConfigError, load_config, validate
from deepswe.train.trainer import check_runnable

ROOT = Path(__file__).resolve().parents[2]
BASE = {"model": {"path": "m"}, "data": {"source": "text"}}


def write(tmp_path: Path, data: dict) -> Path:
    p = tmp_path / "profile.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


def test_tiny_profile_validates_and_starts_with_its_command():
    path = ROOT / "configs" / "tiny.yaml"
    cfg = load_config(path)
    assert (cfg.engine.name, cfg.backend.name, cfg.data.source) == ("hf", "hf", "spine")
    # swe-toy's train split only: the held-out split is the eval: section's
    assert cfg.data.path == "runs/data/swe-toy/train.jsonl" and cfg.cluster.gpus == 0
    assert cfg.eval.dataset == "runs/data/swe-toy/test.jsonl"
    assert path.read_text().startswith("# deepswe-train train --config configs/tiny.yaml")
    check_runnable(cfg)  # everything it names is built and this machine can run it


@pytest.mark.parametrize(
    ("key", "value"),
    [("backend.optim.lrr", 1), ("rollout.grup_size", 4), ("algo.eps_hi", 0.3), ("colour", 1)],
)
def test_unknown_keys_are_rejected_by_name(tmp_path, key, value):
    with pytest.raises(ConfigError, match=rf"{key}: unknown key"):
        load_config(write(tmp_path, BASE), [f"{key}={value}"])


def test_overrides_are_parsed_as_yaml_and_applied_in_order(tmp_path):
    cfg = load_config(
        write(tmp_path, BASE),
        [
            "rollout.group_size=2",
            "rollout.group_size=3",
            "algo.mask_endings=[max_steps]",
            "backend.optim.betas=[0.8, 0.9]",
            "run.name=x=y",
        ],
    )
    assert cfg.rollout.group_size == 3
    assert cfg.algo.mask_endings == frozenset({"max_steps"})
    assert cfg.backend.optim.betas == (0.8, 0.9)
    assert cfg.run.name == "x=y"


@pytest.mark.parametrize("bad", ["novalue", "=3", "a..b=1"])
def test_malformed_overrides_say_what_is_wanted(bad):
    with pytest.raises(ConfigError, match="want key.path=value"):
        parse_override(bad)


def test_bad_values_name_file_and_key(tmp_path):
    with pytest.raises(ConfigError) as e:
        load_config(write(tmp_path, {**BASE, "rollout": {"temperature": -1}}))
    assert str(tmp_path / "profile.yaml") in str(e.value) and "rollout.temperature" in str(e.value)
    with pytest.raises(ConfigError, match="model: Field required"):
        validate({"data": {"source": "text"}}, "x")
    with pytest.raises(ConfigError, match="spine source needs"):
        validate({"model": {"path": "m"}}, "x")


def test_the_vllm_engine_is_resolved_by_name(tmp_path):
    cfg = load_config(write(tmp_path, BASE), ["engine.name=vllm"])
    assert check_runnable(cfg)[0].__name__ == "VLLMEngine"


def test_a_registered_backend_whose_module_is_missing_is_named(tmp_path, monkeypatch):
    """A registry entry whose module cannot be imported (not written yet, or its optional
    dependency missing) is a clear error naming the plug point, not an ImportError traceback."""
    monkeypatch.setitem(BACKENDS, "future", "deepswe.train.backends.not_written_yet:Future")
    cfg = load_config(write(tmp_path, BASE), ["backend.name=future"])
    with pytest.raises(ValueError, match=r"training backend 'future': cannot import"):
        check_runnable(cfg)


def test_a_gpu_profile_on_a_cpu_machine_stops_after_validating(tmp_path):
    cfg = load_config(write(tmp_path, {**BASE, "cluster": {"gpus": 64}}))
    with pytest.raises(RuntimeError, match=r"needs 64 GPUs; found \d+"):
        check_runnable(cfg)


def test_unknown_plugin_names_list_the_known_ones(tmp_path):
    cfg = load_config(write(tmp_path, BASE), ["data.source=dockerless"])
    with pytest.raises(
        ValueError,
        match=r"unknown rollout source 'dockerless'; known: \['openenv', 'spine', 'text'\]",
    ):
        check_runnable(cfg)


def test_make_data_writes_the_file_the_32b_profile_reads():
    """Regression: `make data PROFILE=deepswe-32b` wrote runs/data/r2e-gym-decontaminated.jsonl
    while configs/deepswe-32b.yaml read runs/data/r2e-gym-subset-decontaminated.jsonl."""
    makefile = (ROOT / "Makefile").read_text()
    (line,) = [ln for ln in makefile.splitlines() if ln.startswith("R2E_TASKS :=")]
    cfg = yaml.safe_load((ROOT / "configs" / "deepswe-32b.yaml").read_text())
    assert line.split(":=", 1)[1].strip() == cfg["data"]["path"]
    assert "--to $(R2E_TASKS)" in makefile
