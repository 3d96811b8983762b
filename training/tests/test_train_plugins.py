"""Plug-ins are built by the from_config classmethod their Protocol declares; a class without
one is refused by name, not guessed at."""

from __future__ import annotations

import pytest

from deepswe.train.backends import TrainingBackend
from deepswe.train.engines import InferenceEngine
from deepswe.train.plugins import build
from deepswe.train.sources import SOURCES, RolloutSource, source_class


def test_every_protocol_declares_from_config_and_every_source_has_it():
    for proto in (InferenceEngine, TrainingBackend, RolloutSource):
        assert "from_config" in proto.__dict__
    for name in SOURCES:
        assert callable(source_class(name).from_config)


class _NoFactory:
    def __init__(self, cfg):
        self.cfg = cfg


class _WithFactory:
    @classmethod
    def from_config(cls, cfg):
        obj = cls()
        obj.cfg = cfg
        return obj


def test_build_calls_from_config_and_refuses_a_class_without_it():
    assert build(_WithFactory, "cfg").cfg == "cfg"
    with pytest.raises(TypeError, match=r"test_train_plugins:_NoFactory has no from_config"):
        build(_NoFactory, "cfg")
