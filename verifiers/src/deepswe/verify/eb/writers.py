"""The one test-writer factory: the writer a config (`tts.eb.writer`) or a flag
(`deepswe-verify score --writer`) names, looked up like every other plug point
(deepswe.env.registry): a name below, or a `module:Class` path whose class takes no arguments.
"""

from __future__ import annotations

from pathlib import Path

from deepswe.env.agent.loop import EpisodeLimits
from deepswe.env.policies import PolicySpec
from deepswe.env.registry import resolve
from deepswe.verify.eb.testgen import TestWriter

WRITERS = {
    # the issue's own snippet as a test, no model: a stand-in, named so everywhere
    "scripted-standin": "deepswe.verify.eb.testgen:ScriptedStandinWriter",
    # the agent loop with a test-writing prompt, on any OpenAI-compatible endpoint
    "agent": "deepswe.verify.eb.agent_writer:AgentTestWriter",
}


def make_writer(
    name: str,
    policy: PolicySpec | None = None,
    limits: EpisodeLimits | None = None,
    episodes_dir: Path | None = None,
) -> TestWriter:
    """The writer `name`; `agent` writes with `policy` (an endpoint and a model) under `limits`,
    keeping its episodes in `episodes_dir`. ValueError for an unknown name or an agent writer
    without a policy that names its endpoint."""
    cls = resolve(WRITERS, name, "test writer")
    if name != "agent":
        return cls()
    if policy is None or not (policy.base_url and policy.model):
        raise ValueError("the agent test writer needs a policy with an endpoint and a model")
    return cls(policy, limits, episodes_dir)


__all__ = ["WRITERS", "make_writer"]
