"""The `hf` backend's own options beyond the shared conformance suite."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from deepswe.train.backends.hf import HFBackend
from deepswe.train.backends.megatron import MegatronBackend
from deepswe.train.backends.megatron.selfcheck import OPTIM, random_batch
from deepswe.train.models import build_test_model

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return build_test_model(tmp_path_factory.mktemp("tiny"))


def test_frozen_parameters_stay_put_and_the_rest_trains(model_dir):
    """backend.optim.frozen keeps the tied token embedding (and so the output layer) fixed."""
    optim = OPTIM.model_copy(update={"frozen": ("model.embed_tokens",)})
    be = HFBackend(model_dir, optim=optim)
    before = {k: v.clone() for k, v in be.state_dict().items()}
    upd = random_batch(be.model.config.vocab_size, 0)
    upd.rollout.old_logprobs = (
        be.forward_logprobs(upd.rollout) + upd.rollout.old_logprobs
    ) * upd.loss_mask
    stats = be.train_step(upd)
    assert not stats.skipped and stats.grad_norm > 0
    after = be.state_dict()
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert "model.embed_tokens.weight" not in changed and "lm_head.weight" not in changed
    assert any(k.startswith("model.layers.") for k in changed)
    n_opt = sum(p.numel() for g in be.optimizer.param_groups for p in g["params"])
    assert n_opt == sum(p.numel() for p in be.model.parameters() if p.requires_grad)
    assert n_opt < sum(p.numel() for p in be.model.parameters())


def test_a_frozen_prefix_that_names_nothing_is_an_error(model_dir):
    optim = OPTIM.model_copy(update={"frozen": ("model.embed",)})
    HFBackend(model_dir, optim=optim)  # a prefix, not a whole name, is enough
    with pytest.raises(ValueError, match=r"backend.optim.frozen: no parameter starts with"):
        HFBackend(model_dir, optim=OPTIM.model_copy(update={"frozen": ("encoder.",)}))


def test_megatron_refuses_frozen_parameters_rather_than_ignoring_them(model_dir):
    optim = OPTIM.model_copy(update={"frozen": ("model.embed_tokens",)})
    with pytest.raises(NotImplementedError, match="backend.optim.frozen"):
        MegatronBackend(model_dir, optim=optim)
