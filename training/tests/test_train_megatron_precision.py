"""The megatron backend's mixed precision and activation recomputation, in one process (gloo).

bf16 parameters step through fp32 main weights (optimizer.py): the model runs in bf16, AdamW
updates fp32 copies, so updates below a bf16 step accumulate instead of vanishing; checkpoints
keep the main weights (exact resume). Recomputing each layer's activations in the backward
(megatron's recompute_granularity=full, CPU RNG snapshots by shim patch 4) changes no number.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from deepswe.train.backends import OptimConfig
from deepswe.train.backends.megatron import MegatronBackend
from deepswe.train.backends.megatron.model import MegatronOptions
from deepswe.train.backends.megatron.optimizer import owners
from deepswe.train.backends.megatron.selfcheck import OPTIM, random_batch, run_backend
from deepswe.train.models import build_test_model

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return build_test_model(tmp_path_factory.mktemp("tiny"))


def vocab(model_dir: Path) -> int:
    import json

    return json.loads((model_dir / "config.json").read_text())["vocab_size"]


def test_bf16_steps_through_fp32_main_weights_close_to_fp32(model_dir):
    bf = MegatronBackend(model_dir, optim=OPTIM, dtype="bfloat16")
    opt = bf.optimizer
    # megatron keeps norm weights in fp32: they are their own main weights
    dtypes = {n: p.dtype for n, p in zip(opt.names, opt.params, strict=True)}
    assert all((d == torch.float32) == n.endswith("norm.weight") for n, d in dtypes.items())
    assert opt.mixed and {opt.names[i] for i in opt.copies} == {
        n for n, d in dtypes.items() if d == torch.bfloat16
    }
    assert all(m.dtype == torch.float32 for m in opt.main.values())
    got = run_backend(bf, random_batch(vocab(model_dir)))
    want = run_backend(MegatronBackend(model_dir, optim=OPTIM), random_batch(vocab(model_dir)))
    # the parameters are their main weights rounded to bf16
    assert all(torch.equal(opt.params[i], opt.main[i].to(torch.bfloat16)) for i in opt.copies)
    assert got["loss"] == pytest.approx(want["loss"], rel=2e-2)
    assert got["norm"] == pytest.approx(want["norm"], rel=2e-2)
    worst = max((got["w"][k].float() - want["w"][k]).abs().max().item() for k in want["w"])
    assert worst < 2e-3, worst  # bf16 rounding of weights of magnitude <= 0.5


def test_updates_below_a_bf16_step_accumulate_in_the_main_weights(model_dir):
    """lr 1e-6: each update is far below a bf16 step of these weights, so bf16 parameters alone
    would hardly move (only those near 0); the fp32 main weights carry every update."""
    optim = OptimConfig(lr=1e-6, weight_decay=0.0, grad_clip=1e9)
    bf = MegatronBackend(model_dir, optim=optim, dtype="bfloat16")
    opt = bf.optimizer
    before = {i: m.clone() for i, m in opt.main.items()}
    params_before = [p.detach().clone() for p in opt.params]
    upd = random_batch(vocab(model_dir))
    upd.rollout.old_logprobs = bf.forward_logprobs(upd.rollout) * upd.loss_mask
    for _ in range(3):
        bf.train_step(upd)
    moved = sum(int((opt.main[i] != before[i]).sum()) for i in opt.copies)
    total = sum(opt.main[i].numel() for i in opt.copies)
    bf16_moved = sum(int((opt.params[i] != params_before[i]).sum()) for i in opt.copies)
    print(f"of {total} bf16 weights, main moved {moved}, bf16 moved {bf16_moved}")
    assert moved > 0.5 * total
    assert bf16_moved < 0.1 * total  # only weights near 0, where a bf16 step is small


def test_bf16_checkpoints_resume_exactly_with_their_main_weights(model_dir, tmp_path):
    u1, u2 = random_batch(vocab(model_dir), 0), random_batch(vocab(model_dir), 1)
    build = lambda: MegatronBackend(model_dir, optim=OPTIM, dtype="bfloat16")  # noqa: E731
    straight = build()
    straight.train_step(u1)
    straight.train_step(u2)
    first = build()
    first.train_step(u1)
    first.save(tmp_path / "ckpt")
    resumed = build()
    resumed.load(tmp_path / "ckpt")
    assert all(torch.equal(resumed.optimizer.main[i], m) for i, m in first.optimizer.main.items())
    resumed.train_step(u2)
    want, got = straight.state_dict(), resumed.state_dict()
    assert all(torch.equal(got[k], want[k]) for k in want)
    with pytest.raises(ValueError, match="saved with model.dtype bfloat16, this run has float32"):
        MegatronBackend(model_dir, optim=OPTIM).load(tmp_path / "ckpt")
    other = build_test_model(tmp_path / "other", layers=3)
    with pytest.raises(
        ValueError,
        match=r"of this model's weights are not in the checkpoint "
        r"\(first: 'decoder.layers.2.",
    ):
        MegatronBackend(other, optim=OPTIM, dtype="bfloat16").load(tmp_path / "ckpt")


def test_full_recomputation_changes_no_number(model_dir):
    plain = run_backend(MegatronBackend(model_dir, optim=OPTIM), random_batch(vocab(model_dir)))
    rec = MegatronBackend(model_dir, optim=OPTIM, options=MegatronOptions(recompute="full"))
    assert rec.gpt.config.recompute_granularity == "full"
    again = run_backend(rec, random_batch(vocab(model_dir)))
    assert again["loss"] == plain["loss"] and again["norm"] == plain["norm"]
    assert all(torch.equal(again["w"][k], plain["w"][k]) for k in plain["w"])


def test_owners_balance_parameters_by_size_the_same_on_every_rank():
    sizes = [100, 10, 10, 80, 5, 5]
    assert owners(sizes, 2) == owners(list(sizes), 2)
    load = [0, 0]
    for n, r in zip(sizes, owners(sizes, 2), strict=True):
        load[r] += n
    assert load == [105, 105]
    assert owners(sizes, 1) == [0] * 6
    assert sorted(set(owners([1] * 3, 4))) == [0, 1, 2]  # more ranks than parameters: some own none


def test_the_gpu_checks_megatron_code_runs_on_cpu():
    """bench/gpu_check.py --cpu: its megatron checks (fp32 vs hf; bf16, distributed optimizer,
    recomputation and a sharded checkpoint's exact resume) run on gloo, so the script a GPU
    machine will run is not broken code. It proves nothing about CUDA."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    r = subprocess.run(
        [sys.executable, str(root / "bench" / "gpu_check.py"), "--cpu"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    lines = [x for x in r.stdout.splitlines() if x.startswith(("PASS", "FAIL", "SKIP"))]
    assert [x.split()[:2] for x in lines] == [
        ["PASS", "megatron-cuda"],
        ["PASS", "megatron-bf16-resume"],
    ], r.stdout
