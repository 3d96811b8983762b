"""The plan on paper (deepswe.train.cluster.budget, `deepswe-train plan`): memory a GPU in each
phase of a colocated step and the time a step takes, for the 32B profile and for plans that do
not fit. Pure arithmetic: no GPU, no Ray."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from deepswe.train.cli import EXIT_CANNOT_RUN, EXIT_INVALID, app
from deepswe.train.cluster.budget import (
    GB,
    KNOWN_SHAPES,
    Assumptions,
    ModelShape,
    estimate,
    model_shape,
)
from deepswe.train.config import load_config

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
runner = CliRunner()


def _32b(*overrides: str):
    return load_config(CONFIGS / "deepswe-32b.yaml", list(overrides))


def test_qwen3_32b_has_the_parameter_count_of_its_model_card():
    """Qwen's card says 32.8B parameters (31.2B without embeddings): the shape arithmetic
    counts every projection, norm and the untied head."""
    shape = model_shape("Qwen/Qwen3-32B")
    assert shape.parameters == pytest.approx(32.8e9, rel=0.005)
    assert shape.layers * shape.per_layer == pytest.approx(31.2e9, rel=0.005)
    # bf16 K and V of 64 layers x 8 heads x 128: 256 KiB a token; a TP-8 engine holds one head
    # of each per GPU (32 KiB); TP 16 replicates them (still one head a GPU).
    assert shape.kv_bytes_per_token(1) == 2 * 64 * 8 * 128 * 2 == 256 * 1024
    assert shape.kv_bytes_per_token(8) == 32 * 1024 == shape.kv_bytes_per_token(16)


def test_the_32b_profile_fits_an_h100_in_every_phase_with_the_rollout_at_the_peak():
    b = estimate(_32b())
    phases = {p.name: p for p in b.phases}
    assert set(phases) == {"rollout", "sync", "update"} and b.fits and b.problem() is None
    P = b.shape.parameters
    # Trainer state a GPU, TP 8 x DP 8: bf16 params and fp32 grads over TP, the distributed
    # optimizer's 12 bytes a parameter over TP and DP.
    upd = phases["update"].parts
    assert upd["params"] == pytest.approx(2 * P / 8)
    assert upd["grads"] == pytest.approx(4 * P / 8)
    assert upd["optimizer"] == pytest.approx(12 * P / 64)
    # The engine: 8 replicas share 64 concurrent episodes, each up to 4,096 + 32,768 tokens.
    kv = phases["rollout"].parts["kv cache"]
    assert kv == 8 * 36_864 * 32 * 1024
    assert b.peak.name == "rollout" and 50 * GB < b.peak.total < 65 * GB
    # The step: rollout dominates (the slowest episode decodes its whole budget in 50 turns).
    assert max(b.times, key=b.times.get) == "rollout (slowest)"
    est, bound = b.step_bounds
    reference = 6 * 86400 / 200  # DeepSWE-Preview: ~200 steps in ~6 days
    assert est < reference < bound
    text = "\n".join(b.lines())
    for needle in (
        "32.76 B parameters",
        "TP 8 x PP 1 x CP 1 x DP 8",
        "peak: rollout",
        "43 min a step",
        "(NVIDIA datasheet)",
        "(ours)",
        "evaluation server",
        "one step behind",
    ):
        assert needle in text, needle


def test_one_step_behind_is_priced_from_the_same_parts():
    """Half the replicas generate (each decode step reads twice the KV cache), half the GPUs
    train (twice the time); the step is the longer of the two plus the sync. On the 32B plan
    generation dominates, so the split costs more than the overlap gives back: said, not hidden."""
    b = estimate(_32b())
    t, h = b.times, b.behind
    assert h["training"] == pytest.approx(
        2 * (t["old log-probs"] + t["update"]) + t["checkpoint (amortised)"]
    )
    assert h["generation"] > t["rollout (slowest)"]
    assert h["step"] == pytest.approx(max(h["generation"], h["training"]) + t["weight sync"])
    est = b.step_bounds[0]
    hidden = t["old log-probs"] + t["update"] + t["checkpoint (amortised)"]
    assert h["best"] == pytest.approx(est - hidden)
    assert h["step"] > est > h["best"]  # the overlap cannot pay here; at best 1.05x
    assert f"{est / h['best']:.2f}x" in "\n".join(b.lines())


def test_a_plan_that_does_not_fit_names_the_phase_and_what_to_change():
    # TP 1: every GPU holds all 32.8B parameters with fp32 grads: 200+ GB in the update.
    b = estimate(_32b("backend.parallel.tensor_parallel=1"))
    assert not b.fits and b.peak.name == "update"
    assert "the update phase needs" in b.problem() and "tensor_parallel" in b.problem()
    assert "largest part: grads" in b.problem()
    # A 40 GB GPU fits the state but not the rollout's KV cache beside it.
    small = estimate(_32b(), assumptions=Assumptions(gpu="A100 40GB", gpu_memory_gb=40))
    assert not small.fits and "A100 40GB has 40 GB" in small.problem()
    assert "DOES NOT FIT" in "\n".join(small.lines())
    # Context parallelism splits the activations and logits (and shards the optimizer wider).
    base, cp2 = (
        estimate(_32b()),
        estimate(_32b("cluster.gpus=128", "backend.parallel.context_parallel=2")),
    )
    u0, u2 = ({p.name: p for p in x.phases}["update"].parts for x in (base, cp2))
    assert u2["activations"] == pytest.approx(u0["activations"] / 2)
    assert u2["logits"] == pytest.approx(u0["logits"] / 2)


def test_the_megatron_options_the_32b_profile_sets_are_what_makes_the_update_fit():
    """backend.megatron: without the distributed optimizer every GPU holds all 12 bytes a
    parameter of AdamW state; without recomputation and sequence parallelism, 64 layers of
    activations at 36,864 tokens. Each is counted in the plan, and its absence named."""
    update = lambda b: {p.name: p for p in b.phases}["update"].parts  # noqa: E731
    base = update(estimate(_32b()))
    whole = estimate(_32b("backend.megatron.distributed_optimizer=false"))
    assert update(whole)["optimizer"] == pytest.approx(8 * base["optimizer"])
    assert not whole.fits and "set backend.megatron.distributed_optimizer true" in whole.problem()
    kept = estimate(
        _32b("backend.megatron.recompute=none", "backend.megatron.sequence_parallel=false")
    )
    assert update(kept)["activations"] > 10 * base["activations"]
    assert not kept.fits and "backend.megatron.recompute full" in kept.problem()


def test_model_shapes_come_from_config_json_or_the_known_table_and_never_the_network(tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    cfg = dict(KNOWN_SHAPES["Qwen/Qwen3-32B"], num_hidden_layers=2, hidden_size=64)
    (folder / "config.json").write_text(json.dumps(cfg))
    assert model_shape(str(folder)).layers == 2
    with pytest.raises(ValueError, match=r"model.path 'nobody/nothing': no config.json"):
        model_shape("nobody/nothing")
    with pytest.raises(ValueError, match="lacks or mangles .num_hidden_layers."):
        ModelShape.from_hf_config({"num_attention_heads": 4}, "broken")
    with pytest.raises(ValueError, match="a CPU run has no GPU memory"):
        estimate(load_config(CONFIGS / "tiny.yaml"))


def test_plan_verb_prints_the_budget_and_exits_3_when_it_does_not_fit():
    path = str(CONFIGS / "deepswe-32b.yaml")
    ok = runner.invoke(app, ["plan", "--config", path])
    assert ok.exit_code == 0, ok.output
    assert "memory a GPU" in ok.stdout and "time a step" in ok.stdout
    assert ok.stdout.count("ray start --address HEAD:6379 --num-gpus 8") == 7
    assert f"deepswe-train train --config {path} cluster.address=auto" in ok.stdout
    bad = runner.invoke(app, ["plan", "--config", path, "--gpu-memory-gb", "40"])
    assert bad.exit_code == EXIT_CANNOT_RUN
    assert "the plan does not fit: the rollout phase needs" in bad.stderr
    typo = runner.invoke(app, ["plan", "--config", path, "engine.tensor_parallel=3"])
    assert typo.exit_code == EXIT_INVALID and "engine.tensor_parallel 3" in typo.stderr
    cpu = runner.invoke(app, ["plan", "--config", str(CONFIGS / "tiny.yaml")])
    assert cpu.exit_code == 0 and "CPU run" in cpu.stdout


@pytest.mark.skipif(torch.cuda.device_count() >= 64, reason="this machine has the 64 GPUs")
def test_training_the_32b_profile_here_prints_the_plan_then_stops_with_the_reasons():
    result = runner.invoke(
        app,
        [
            "train",
            "--config",
            str(CONFIGS / "deepswe-32b.yaml"),
            "--out",
            "/nonexistent/never-written",
        ],
    )
    assert result.exit_code == EXIT_CANNOT_RUN
    assert "memory a GPU" in result.stderr and "launch:" in result.stderr
    assert "cluster.gpus: this profile needs 64 GPUs" in result.stderr
    assert "huggingface-cli download Qwen/Qwen3-32B" in result.stderr
    assert not Path("/nonexistent/never-written").exists()
    # On a Ray cluster's head node (the plan's launch line) the GPUs are the cluster's, counted
    # when the placement group is reserved: this machine's count is no reason to stop.
    joined = runner.invoke(
        app,
        [
            "train",
            "--config",
            str(CONFIGS / "deepswe-32b.yaml"),
            "--out",
            "/nonexistent/never-written",
            "cluster.address=auto",
        ],
    )
    assert joined.exit_code == EXIT_CANNOT_RUN and "launch:" in joined.stderr
    assert "GPUs; found" not in joined.stderr
    assert "huggingface-cli download Qwen/Qwen3-32B" in joined.stderr
