"""TRL's `rollout_func` over our OpenEnv server: each prompt of the batch is one whole episode.

GRPOTrainer (trl 1.16) hands `rollout_func(prompts, trainer)` the batch's prompts, each already
repeated `num_generations` times, and takes back per prompt the prompt's token ids, the
completion's token ids and their log-probs; an `env_mask` (1 on the tokens the model sampled,
0 on the environment's) keeps the observations out of the loss, and any other key reaches the
reward functions as a keyword argument. Here a prompt is a task id: `reset(task_id=...)` gives
the real prompt, the server's (the system prompt with R2E-Gym's tool descriptions, the issue).

A turn is batched over the episodes still running: one `generate` call on the trainer's model
samples every running episode's next reply, then each reply is sent as one `step` (in threads,
each session its own sandbox on the server). The tokens trained on are the ones sampled, never
re-tokenised text: the chat is rendered with deepswe.train's `ChatRenderer` (ChatML, prefix
stable) and assembled into one `TokenSequence` per episode, as deepswe-train's own trainer does.

The reward is the server's, the grader's verdict: 1.0 resolved, 0.0 otherwise, None for
infra_error, which TRL scores as unscorable (advantage 0), never as a failure of the model.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from deepswe.eval.openenv.client import SWEEnvClient
from deepswe.eval.openenv.models import SWEAction
from deepswe.train.rollout import ChatRenderer, TokenSequence


@dataclass
class Episode:
    """One session of the server and the token sequence of its episode so far."""

    task_id: str
    env: Any  # openenv's SyncEnvClient over SWEEnvClient
    messages: list[dict[str, str]]
    seq: TokenSequence
    prompt_len: int
    done: bool = False
    reward: float | None = None
    outcome: str | None = None
    ending: str | None = None
    turns: int = 0
    step_s: list[float] = field(default_factory=list)


class OpenEnvRollout:
    """A `rollout_func` for TRL's GRPOTrainer whose episodes run on the server at `url`; each
    call appends one line (the step's rewards and outcomes) to `curve`, a JSONL file."""

    def __init__(self, url: str, max_new_tokens: int, curve: Path, timeout_s: float = 600.0):
        self.url, self.max_new_tokens, self.curve = url, max_new_tokens, Path(curve)
        self.timeout_s = timeout_s

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list]:
        model = trainer.accelerator.unwrap_model(trainer.model)
        renderer = ChatRenderer(trainer.processing_class)
        temperature = float(trainer.args.temperature)
        started = time.monotonic()
        with ThreadPoolExecutor(max_workers=len(prompts)) as pool:
            episodes = list(pool.map(lambda p: self._open(_task_id(p), renderer), prompts))
            try:
                while live := [e for e in episodes if not e.done]:
                    samples = self._sample(model, renderer, live, temperature)
                    list(pool.map(lambda e, s: self._step(e, s, renderer), live, samples))
            finally:
                for e in episodes:
                    e.env.close()  # the session's end: the server removes its sandbox
        self._record(trainer.state.global_step + 1, episodes, time.monotonic() - started)
        return {
            "prompt_ids": [e.seq.ids[: e.prompt_len] for e in episodes],
            "completion_ids": [e.seq.ids[e.prompt_len :] for e in episodes],
            "logprobs": [e.seq.logprobs[e.prompt_len :] for e in episodes],
            "env_mask": [e.seq.loss_mask[e.prompt_len :] for e in episodes],
            "env_reward": [e.reward for e in episodes],
            "outcome": [e.outcome for e in episodes],
        }

    def _open(self, task_id: str, renderer: ChatRenderer) -> Episode:
        env = SWEEnvClient(base_url=self.url, message_timeout_s=self.timeout_s).sync()
        try:
            env.connect()
            first = env.reset(task_id=task_id)
        except BaseException:
            env.close()  # the session's sandbox goes with it
            raise
        messages = list(first.observation.messages)
        seq = TokenSequence()
        if messages:
            seq.add(renderer.encode(renderer.text(messages, True)), False)
        episode = Episode(task_id, env, messages, seq, len(seq.ids))
        if first.done:  # the sandbox did not start: infra_error, no reward
            self._end(episode, first.observation, first.reward)
            episode.seq.add(renderer.encode(renderer.eos_text), False)  # TRL needs a token
        return episode

    @torch.no_grad()
    def _sample(
        self, model: Any, renderer: ChatRenderer, live: list[Episode], temperature: float
    ) -> list[tuple[list[int], list[float]]]:
        """Each live episode's next reply, sampled in one batch: (ids, their log-probs), the
        ids ending at the end-of-turn token when the model sampled it."""
        pad = renderer.tok.pad_token_id
        width = max(len(e.seq.ids) for e in live)
        ids = torch.full((len(live), width), pad, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i, e in enumerate(live):  # left-padded: every row's reply starts at `width`
            ids[i, width - len(e.seq.ids) :] = torch.tensor(e.seq.ids)
            mask[i, width - len(e.seq.ids) :] = 1
        was_training = model.training
        model.eval()
        out = model.generate(
            input_ids=ids.to(model.device),
            attention_mask=mask.to(model.device),
            do_sample=True,
            temperature=temperature,
            top_k=0,
            top_p=1.0,
            max_new_tokens=self.max_new_tokens,
            eos_token_id=renderer.eos_id,
            pad_token_id=pad,
            return_dict_in_generate=True,
            output_scores=True,  # the logits after temperature: the sampling distribution
        )
        model.train(was_training)
        new = out.sequences[:, width:].cpu()
        logps = torch.stack(out.scores, dim=1).float().log_softmax(-1).cpu()
        picked = logps.gather(-1, new.unsqueeze(-1)).squeeze(-1)
        samples = []
        for row, lp in zip(new.tolist(), picked.tolist(), strict=True):
            n = row.index(renderer.eos_id) + 1 if renderer.eos_id in row else len(row)
            samples.append((row[:n], lp[:n]))
        return samples

    def _step(
        self, e: Episode, sample: tuple[list[int], list[float]], renderer: ChatRenderer
    ) -> None:
        """Send the reply as one step; add its tokens and, unless the episode ended, the
        observation's (the chat template's text between this reply and the next)."""
        ids, lps = sample
        e.seq.add(ids, True, lps)
        reply = renderer.decode(ids)
        t0 = time.monotonic()
        result = e.env.step(SWEAction(message=reply) if reply.strip() else _empty_reply())
        e.step_s.append(time.monotonic() - t0)
        e.turns += 1
        if result.done:
            self._end(e, result.observation, result.reward)
            return
        e.messages += [
            {"role": "assistant", "content": reply},
            {"role": "user", "content": result.observation.text},
        ]
        k = len(e.messages) - 2
        ended_eos = bool(ids) and ids[-1] == renderer.eos_id
        e.seq.add(renderer.encode(renderer.gap(e.messages, k, len(e.messages), ended_eos)), False)

    @staticmethod
    def _end(e: Episode, obs: Any, reward: float | None) -> None:
        e.done, e.reward, e.outcome, e.ending = True, reward, obs.outcome, obs.ending

    def _record(self, step: int, episodes: list[Episode], seconds: float) -> None:
        rewards = [e.reward for e in episodes]
        scored = [r for r in rewards if r is not None]
        outcomes: dict[str, int] = {}
        for e in episodes:
            outcomes[str(e.outcome)] = outcomes.get(str(e.outcome), 0) + 1
        steps = [s for e in episodes for s in e.step_s]
        line = {
            "step": step,
            "reward_mean": sum(scored) / len(scored) if scored else None,
            "rewards": rewards,
            "tasks": [e.task_id for e in episodes],
            "outcomes": outcomes,
            "infra_errors": len(rewards) - len(scored),
            "turns": [e.turns for e in episodes],
            "env_step_s_mean": sum(steps) / len(steps) if steps else None,
            "rollout_s": round(seconds, 2),
        }
        with self.curve.open("a") as f:
            f.write(json.dumps(line) + "\n")


def _task_id(prompt: Any) -> str:
    """The task id a dataset row carries as its prompt (plain text, or one user message)."""
    if isinstance(prompt, list):
        prompt = prompt[-1]["content"]
    return str(prompt).strip()


def _empty_reply() -> SWEAction:
    """A reply with no text (the model sampled the end token at once): the server's parser
    gets it as written, an empty message, which the action type refuses; a lone space is the
    same reply with no call in it (the loop answers it with its continue message)."""
    return SWEAction(message=" ")


def env_reward(env_reward: list[float | None], **_: Any) -> list[float | None]:
    """TRL reward function: the grader's reward the server returned (None: infra_error)."""
    return list(env_reward)


__all__ = ["OpenEnvRollout", "env_reward"]
