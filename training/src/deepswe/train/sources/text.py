"""The `text` rollout source: the trainer's unit-test environment.

Each task is one user prompt; a rollout is one sampled reply from the real policy (through the
same EnginePolicy the spine uses), rewarded 1.0 iff the reply's text contains `target`. It is a
real, if trivial, RL problem (the policy can learn to emit the target), it needs no Docker, and
its episodes are Trajectory objects like the spine's, so everything downstream of the rollout
(sequences, filtering, advantages, update, checkpoints) runs unchanged. It exists to test the
trainer, resume included, deterministically on a CPU; it is not a benchmark.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from deepswe.env.policies import Policy
from deepswe.env.trajectory import Ending, Step, Trajectory

if TYPE_CHECKING:
    from deepswe.train.config import TrainConfig


@dataclass(frozen=True)
class TextTask:
    instance_id: str
    prompt: str


class TextSource:
    @classmethod
    def from_config(cls, cfg: TrainConfig) -> TextSource:
        return cls(cfg)

    def __init__(self, cfg: TrainConfig) -> None:
        self.env = cfg.data.text

    def tasks(self) -> list[TextTask]:
        return [TextTask(f"text-{i}", p) for i, p in enumerate(self.env.prompts)]

    def rollout(self, task: TextTask, policy: Policy) -> Trajectory:
        messages = [{"role": "user", "content": task.prompt}]
        reply = policy.reply(messages, timeout=60.0)
        solved = self.env.target in reply.text
        step = Step(
            index=0,
            assistant=reply.text,
            prompt_tokens=reply.prompt_tokens,
            completion_tokens=reply.completion_tokens,
            token_ids=reply.token_ids,
            logprobs=reply.logprobs,
        )
        return Trajectory(
            instance_id=task.instance_id,
            policy=policy.name,
            messages=[*messages, {"role": "assistant", "content": reply.text}],
            steps=[step],
            ending=Ending.SUBMITTED,
            outcome="resolved" if solved else "unresolved",
            reward=1.0 if solved else 0.0,
        )
