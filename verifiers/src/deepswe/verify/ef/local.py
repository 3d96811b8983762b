"""The judge as an in-process transformers model (the tiny profile: no server).

The score comes from the logits at the answer position, teacher-forced rather than sampled:
the prompt and each target (`<judgement>YES</judgement>`, `...NO...`) are tokenized whole, as
judge training tokenizes them; the two id sequences part at the answer token (a tokenizer may
merge the tag's `>` into it: then that is where they part). One forward pass over the shared
prefix gives the logits there, and Score = P(YES) / (P(YES) + P(NO)) in float64.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from deepswe.verify.ef.answer import Judgement
from deepswe.verify.ef.render import Messages, judge_target
from deepswe.verify.ef.tokens import ChatTokens, load_tokenizer
from deepswe.verify.types import VerdictStatus


def answer_ids(tokens: ChatTokens, messages: Messages) -> tuple[list[int], int, int]:
    """(shared prefix ids, YES id, NO id): where the two targets' tokenizations part."""
    prompt = tokens.prompt_text(messages)
    yes = tokens.encode(prompt + judge_target(True)["content"])
    no = tokens.encode(prompt + judge_target(False)["content"])
    k = 0
    while k < min(len(yes), len(no)) and yes[k] == no[k]:
        k += 1
    if k == 0 or k == min(len(yes), len(no)):
        raise ValueError("the YES and NO targets do not part at one token after a shared prefix")
    return yes[:k], yes[k], no[k]


def score_from_logits(logits: Any, yes_id: int, no_id: int) -> tuple[float, float, float]:
    """(score, P(YES), P(NO)) from one position's logits ([V] tensor), in float64."""
    import torch

    logp = torch.log_softmax(logits.detach().to(torch.float64), dim=-1)
    ly, ln = float(logp[yes_id]), float(logp[no_id])
    score = float(torch.sigmoid(torch.tensor(ly - ln, dtype=torch.float64)))
    return score, float(torch.exp(logp[yes_id])), float(torch.exp(logp[no_id]))


class LocalJudge:
    """A Judge (deepswe.verify.ef.score) from a local HF model folder (a merged judge)."""

    def __init__(self, path: str | Path, device: str = "cpu", dtype: str = "float32") -> None:
        import torch
        from transformers import AutoModelForCausalLM

        self.name = f"local:{Path(path).name}"
        self.count_tokens = ChatTokens(load_tokenizer(path))
        self.device = torch.device(device)
        self.model = AutoModelForCausalLM.from_pretrained(
            str(path), dtype=getattr(torch, dtype), local_files_only=True
        ).to(self.device)
        self.model.eval()
        self._lock = threading.Lock()  # one forward at a time: the model is shared by threads

    def logits(self, ids: list[int]) -> Any:
        """Next-token logits after `ids`: [V]."""
        import torch

        with self._lock, torch.inference_mode():
            x = torch.tensor([ids], dtype=torch.long, device=self.device)  # [1, T]
            return self.model(input_ids=x, logits_to_keep=1).logits[0, -1]  # [V]

    def judge(self, messages: Messages) -> Judgement:
        prefix, yes_id, no_id = answer_ids(self.count_tokens, messages)
        score, p_yes, p_no = score_from_logits(self.logits(prefix), yes_id, no_id)
        facts = {"p_yes": p_yes, "p_no": p_no, "yes_id": yes_id, "no_id": no_id}
        return Judgement(VerdictStatus.SCORED, score, extra=facts)
