"""The run card's record of the served weights, and `deepswe-eval run`'s endpoint check before
it writes anything.

The CLI tests use a real HTTP server on loopback answering GET /v1/models as vLLM does (with
`root`) and checking the bearer key (the root conftest's `models_endpoint`), driven by the
unmodified `openai` client in a real `deepswe-eval` process. What they do not prove: that vLLM answers so; training's
test_train_vllm.py runs the wrong-name case against a real vLLM server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from deepswe.data.toy import make_toy_tasks, write_tasks
from deepswe.env.policies import PolicySpec
from deepswe.eval.card import (
    ProtocolMismatch,
    RunCard,
    ServedWeights,
    make_card,
    open_run,
    read_card,
    served_weights,
)
from deepswe.eval.config import EvalConfig
from deepswe.eval.store import RunStore
from deepswe.eval.weights import weights_digest

CLI = str(Path(sys.executable).with_name("deepswe-eval"))


def checkpoint(folder: Path, seed: int) -> Path:
    """A model folder as a trainer leaves it: weight files beside a config and a tokenizer."""
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(bytes([seed]) * 4096)
    (folder / "config.json").write_text('{"model_type": "qwen3"}')
    (folder / "tokenizer.json").write_text("{}")
    return folder


@pytest.fixture
def tasks(tmp_path):
    return make_toy_tasks(tmp_path / "src", n=2)


def openai_cfg(dataset: str = "swe-mini:test") -> EvalConfig:
    return EvalConfig(
        dataset=dataset, policy=PolicySpec(name="openai", base_url="http://h/v1", model="policy")
    )


def test_served_weights_digest_a_local_folder_and_only_that(tmp_path):
    ckpt = checkpoint(tmp_path / "step-10", seed=1)
    assert served_weights("policy", str(ckpt)) == ServedWeights(
        model="policy", root=str(ckpt), digest=weights_digest(ckpt)
    )
    (tmp_path / "lora").mkdir()  # a folder here without weight files: nothing to pin
    assert served_weights("policy", str(tmp_path / "lora")).digest is None
    assert served_weights("m", "Qwen/Qwen3-32B").digest is None  # a hub id, not a folder here
    assert served_weights("m", None) == ServedWeights(model="m", root=None, digest=None)


def test_a_resume_against_other_weights_is_refused_naming_the_digest(tmp_path, tasks):
    """The endpoint may move (its URL is operational), the weights it serves may not."""
    a, b = checkpoint(tmp_path / "a", seed=1), checkpoint(tmp_path / "b", seed=2)
    cfg, out = openai_cfg(), tmp_path / "run"
    open_run(out, make_card(cfg, tasks, served_weights("policy", str(a))))
    before = (out / "config.json").read_text()
    with pytest.raises(ProtocolMismatch) as err:
        open_run(out, make_card(cfg, tasks, served_weights("policy", str(b))))
    assert f'served_weights.digest: on disk "{weights_digest(a)}"' in str(err.value)
    assert (out / "config.json").read_text() == before
    # the same weights from another folder, at another URL: the same run
    copy = checkpoint(tmp_path / "copy", seed=1)
    moved = cfg.model_copy(
        update={"policy": cfg.policy.model_copy(update={"base_url": "http://g/v1"})}
    )
    _, card = open_run(out, make_card(moved, tasks, served_weights("policy", str(copy))))
    assert card.served_weights.root == str(copy)
    assert read_card(RunStore(out)).served_weights.digest == weights_digest(a)


def test_a_resume_that_cannot_read_the_weights_keeps_the_recorded_digest(tmp_path, tasks):
    """A resume from a machine without the folder knows no digest: it neither refuses nor
    erases the one the start recorded (publishing checks it); other weights replace it."""
    ckpt = checkpoint(tmp_path / "ckpt", seed=1)
    cfg, out = openai_cfg(), tmp_path / "run"
    first = served_weights("policy", str(ckpt))
    open_run(out, make_card(cfg, tasks, first))
    unread = ServedWeights(model="policy", root=str(ckpt), digest=None)
    assert open_run(out, make_card(cfg, tasks, unread))[1].served_weights == first
    hub = ServedWeights(model="policy", root="org/other-model", digest=None)
    assert open_run(out, make_card(cfg, tasks, hub))[1].served_weights == hub


def test_a_card_written_before_served_weights_still_loads_and_resumes(tmp_path, tasks):
    """Run folders made before #23 have no served_weights key: readable, resumable, None."""
    cfg, out = EvalConfig(policy=PolicySpec(name="gold")), tmp_path / "run"
    old = make_card(cfg, tasks).model_dump(mode="json")
    del old["served_weights"]
    out.mkdir()
    (out / "config.json").write_text(json.dumps(old))
    assert read_card(RunStore(out)).served_weights is None
    _, card = open_run(out, make_card(cfg, tasks))
    assert card.served_weights is None and isinstance(card, RunCard)


def _run(out: Path, data: Path, url: str, model: str, key: str) -> subprocess.CompletedProcess:
    cmd = [CLI, "run", "--dataset", str(data), "--out", str(out), "eval.policy.name=openai"]
    cmd += [f"eval.policy.base_url={url}", f"eval.policy.model={model}"]
    env = {**os.environ, "OPENAI_API_KEY": key}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)


def test_run_refuses_a_wrong_model_or_key_before_making_the_run_folder(
    tmp_path, tasks, models_endpoint
):
    data = write_tasks(tasks, tmp_path / "tasks.jsonl")
    out, key = tmp_path / "run", models_endpoint.key
    url = models_endpoint.serve({"tiny-qwen3": "/models/tiny-qwen3"})
    res = _run(out, data, url, "wrong-name", key)
    assert res.returncode == 2, res.stderr
    assert res.stderr.strip() == (
        f"deepswe-eval: model 'wrong-name' is not served at {url}; it serves: tiny-qwen3"
    )
    res = _run(out, data, url, "tiny-qwen3", "sk-wrong")
    assert res.returncode == 2, res.stderr
    assert res.stderr.strip().startswith(
        f"deepswe-eval: the key in $OPENAI_API_KEY was refused by {url} (HTTP 401"
    )
    assert len(res.stderr.strip().splitlines()) == 1 and "sk-wrong" not in res.stderr
    assert not out.exists()
