"""LocalModelPolicy: a saved checkpoint answers through the spine's Policy protocol."""

from __future__ import annotations

import pytest

from deepswe.env.policies import Policy, policy_class
from deepswe.train.engines.local import LocalModelPolicy, shared_engine
from deepswe.train.models import build_test_model


def test_a_checkpoint_is_a_policy_sharing_one_engine(tmp_path):
    path = build_test_model(tmp_path / "m")
    a = policy_class("deepswe.train.engines.local:LocalModelPolicy")(
        path=str(path), max_tokens="8", seed="3"
    )
    b = LocalModelPolicy(str(path), max_tokens=8, seed=3)
    assert isinstance(a, Policy)
    msgs = [{"role": "user", "content": "fix the bug"}]
    counted = a.count_tokens(msgs)
    ra, rb = a.reply(msgs, timeout=30), b.reply(msgs, timeout=30)
    assert ra.text == rb.text and 1 <= ra.completion_tokens <= 8  # same seed, same engine
    assert counted == ra.prompt_tokens
    assert shared_engine(path) is shared_engine(str(path))


def test_a_missing_checkpoint_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="no model checkpoint folder"):
        LocalModelPolicy(str(tmp_path / "nope"))
