"""ColocatedVLLMEngine (the engine a hybrid rank holds on GPUs) on vLLM's CPU build: it samples
reproducibly, and weights streamed into it in place make it sample exactly as a fresh engine
built on those weights. Run in vLLM's own virtualenv (tests/vllm_colocated_check.py), since the
trainer's cannot import vLLM on CPU machines. Sleep mode is CUDA-only in vLLM: not covered."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from safetensors import safe_open

from deepswe.train.engines.vllm_server import SRC_DIR, find_python
from deepswe.train.models import build_test_model

pytestmark = pytest.mark.slow
CHECK = Path(__file__).with_name("vllm_colocated_check.py")


def _python() -> Path:
    try:
        return find_python()
    except FileNotFoundError as e:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the vllm tests, but {e}", pytrace=False)
        pytest.skip(str(e))


def _run(python: Path, model: Path, out: Path, *extra: str) -> dict:
    env = dict(
        os.environ,
        PYTHONPATH=str(SRC_DIR),
        VLLM_CPU_KVCACHE_SPACE="1",
        VLLM_CPU_OMP_THREADS_BIND="nobind",
    )
    done = subprocess.run(
        [str(python), str(CHECK), str(model), str(out), *extra],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(out.read_text())


def test_streamed_weights_make_the_engine_sample_as_a_fresh_one(tmp_path):
    """~90 s: two vLLM engines on CPU (head_dim 32: vLLM's CPU attention has no 16)."""
    python = _python()
    a = build_test_model(tmp_path / "a", heads=2, kv_heads=1, seed=0)
    b = build_test_model(tmp_path / "b", heads=2, kv_heads=1, seed=1)
    streamed = _run(python, a, tmp_path / "streamed.json", "--stream", str(b))
    fresh = _run(python, b, tmp_path / "fresh.json")
    assert streamed["can_sleep"] is False  # vLLM's CPU build has no sleep mode
    assert streamed["first"] == streamed["again"]  # seeded
    # sample_many (the hybrid rank's batch): a seeded request samples as it does alone
    assert streamed["batched"] == streamed["first"] and streamed["batch_sizes"] == [2, 1]
    # submit (continuous batching): the short request ends while the long one still decodes,
    # and each samples as in a generate call of its own
    assert streamed["short_done_first"] and streamed["long_tokens"] > 8
    assert streamed["submitted_as_alone"]
    with safe_open(str(b / "model.safetensors"), framework="pt") as f:
        assert streamed["loaded"] == len(list(f.keys()))  # every tensor of b, one at a time
    assert streamed["after"] == fresh["first"] != streamed["first"]
