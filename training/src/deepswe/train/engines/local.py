"""A local checkpoint as an evaluation policy: `deepswe-eval run
eval.policy.name=deepswe.train.engines.local:LocalModelPolicy
eval.policy.args.path=runs/train-tiny/final`.

The evaluation harness makes one policy per episode; the model behind them is loaded once per
process and shared (HFEngine serialises sampling with its own lock).
"""

from __future__ import annotations

import threading
from pathlib import Path

from deepswe.env.policies import Reply
from deepswe.train.engines.hf import HFEngine
from deepswe.train.engines.policy import EnginePolicy

_engines: dict[str, HFEngine] = {}
_lock = threading.Lock()


def shared_engine(path: str | Path) -> HFEngine:
    """The process's HFEngine for the checkpoint at `path` (loaded on first use)."""
    key = str(Path(path).resolve())
    with _lock:
        if key not in _engines:
            if not Path(key).is_dir():
                raise FileNotFoundError(f"no model checkpoint folder at {path}")
            _engines[key] = HFEngine(key)
        return _engines[key]


class LocalModelPolicy:
    """The spine's Policy over a local HF-format checkpoint; string arguments, as CLIs give them."""

    def __init__(
        self,
        path: str,
        temperature: str | float = 1.0,
        max_tokens: str | int = 1024,
        max_context_tokens: str | int | None = None,
        seed: str | int | None = None,
    ) -> None:
        engine = shared_engine(path)
        self._policy = EnginePolicy(
            engine,
            temperature=float(temperature),
            max_tokens=int(max_tokens),
            max_context_tokens=None if max_context_tokens is None else int(max_context_tokens),
            seed=None if seed is None else int(seed),
        )
        self.name = f"local:{Path(path).name}"

    def reply(self, messages: list[dict[str, str]], *, timeout: float) -> Reply:
        return self._policy.reply(messages, timeout=timeout)

    def count_tokens(self, messages: list[dict[str, str]]) -> int | None:
        return self._policy.count_tokens(messages)
