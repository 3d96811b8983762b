"""The `hf` inference engine: an in-process transformers model sampled by a manual loop.

A manual loop (prefill, then one token at a time through the KV cache) rather than `generate`:
it returns the exact log-prob of each sampled token under the distribution it was drawn from
(log_softmax(logits / temperature)), the quantity the trainer's importance ratio needs, and it
draws from a per-call seeded generator, so a run is reproducible whatever the thread schedule.
Calls are serialised by a lock: one model, many episode threads.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch

from deepswe.train.engines import Sample
from deepswe.train.rollout import ChatRenderer

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def load_model(path: str | Path, device: str, dtype: str) -> Any:
    """A causal LM from a local HF folder (never the Hub: local_files_only)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(
        str(path), dtype=DTYPES[dtype], local_files_only=True
    )
    return model.to(device)


def load_tokenizer(path: str | Path) -> Any:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    if tok.chat_template is None or tok.eos_token_id is None:
        raise ValueError(f"{path}: the tokenizer needs a chat template and an eos token")
    return tok


class HFEngine:
    """Samples from a transformers causal LM; implements `InferenceEngine`."""

    name = "hf"

    def __init__(self, model_path: str | Path, *, device: str = "cpu", dtype: str = "float32"):
        self.tokenizer = load_tokenizer(model_path)
        self.model = load_model(model_path, device, dtype).eval()
        self.renderer = ChatRenderer(self.tokenizer)
        self.device = torch.device(device)
        self._lock = threading.Lock()
        self.busy_s = 0.0  # seconds spent sampling (inside the lock): the engine's busy time
        self.asleep, self._level, self._stale = False, 1, False
        self._shapes: dict[Any, tuple[torch.Size, torch.dtype]] = {}

    @classmethod
    def from_config(cls, cfg: Any) -> HFEngine:
        """From a TrainConfig (model.path, model.device, model.dtype)."""
        return cls(cfg.model.path, device=cfg.model.device, dtype=cfg.model.dtype)

    def sample(
        self,
        prompt: list[int] | list[dict[str, str]],
        n: int,
        temperature: float,
        max_tokens: int,
        seed: int | None = None,
    ) -> list[Sample]:
        """n replies; temperature 0 is greedy (log-probs then at temperature 1)."""
        if prompt and isinstance(prompt[0], dict):
            prompt = self.renderer.encode(self.renderer.text(prompt, True))  # type: ignore[arg-type]
        if not prompt or n < 1 or max_tokens < 1 or temperature < 0:
            raise ValueError(
                f"need a prompt, n >= 1, max_tokens >= 1, temperature >= 0; got "
                f"{len(prompt)} ids, {n}, {max_tokens}, {temperature}"
            )
        if self.asleep or self._stale:
            raise RuntimeError(
                "the engine is asleep or its weights were discarded: wake_up "
                "(and load_weights after a level-2 sleep) before sampling"
            )
        gen = torch.Generator(device=self.device)
        gen.manual_seed(seed if seed is not None else int(torch.seed() % (2**63)))
        with self._lock, torch.no_grad():
            t0 = time.monotonic()
            ids, lps, stopped = self._loop(list(prompt), n, temperature, max_tokens, gen)
            self.busy_s += time.monotonic() - t0
        return [
            Sample(ids[i], lps[i], self.renderer.decode(ids[i]), "stop" if stopped[i] else "length")
            for i in range(n)
        ]

    def _loop(
        self, prompt: list[int], n: int, temperature: float, max_tokens: int, gen: torch.Generator
    ) -> tuple[list[list[int]], list[list[float]], list[bool]]:
        eos = self.tokenizer.eos_token_id
        x = torch.tensor([prompt] * n, dtype=torch.long, device=self.device)
        # Only the last position's logits are needed: with a 152k vocabulary the full prefill
        # logits would cost more than the whole decoder of a tiny model.
        out = self.model(input_ids=x, use_cache=True, logits_to_keep=1)
        # transformers >= 5.2x names the KV cache `cache`; earlier, `past_key_values`.
        cache_arg = "cache" if "cache" in out else "past_key_values"
        ids: list[list[int]] = [[] for _ in range(n)]
        lps: list[list[float]] = [[] for _ in range(n)]
        done = [False] * n
        for _ in range(max_tokens):
            logits = out.logits[:, -1, :].float()  # [n, V]
            if temperature == 0:
                logp = torch.log_softmax(logits, dim=-1)
                tok = logp.argmax(dim=-1)
            else:
                logp = torch.log_softmax(logits / temperature, dim=-1)
                tok = torch.multinomial(logp.exp(), 1, generator=gen).squeeze(-1)
            tok_lp = logp.gather(-1, tok[:, None]).squeeze(-1)
            for i in range(n):
                if not done[i]:
                    ids[i].append(int(tok[i]))
                    lps[i].append(float(tok_lp[i]))
                    done[i] = int(tok[i]) == eos
            if all(done):
                break
            out = self.model(input_ids=tok[:, None], use_cache=True, **{cache_arg: out[cache_arg]})
        return ids, lps, done

    def update_weights(self, state_dict: dict[str, torch.Tensor]) -> None:
        """Copy new weights in (strict: every parameter must be given)."""
        with self._lock:
            self.model.load_state_dict(state_dict, strict=True)

    # -- ColocatedEngine: the CPU stand-in of a vLLM engine inside a trainer rank --------------
    def sleep(self, level: int = 1) -> None:
        """Level 1 moves the weights to host memory (a no-op on CPU, where they already are);
        level 2 frees their storage (every parameter becomes an empty tensor: nothing stays)."""
        if level not in (1, 2):
            raise ValueError(f"sleep level {level}: 1 (offload weights) or 2 (discard them)")
        with self._lock:
            if self.asleep:
                return
            for p in self.model.parameters():
                self._shapes[p] = (p.shape, p.dtype)
                p.data = p.data.to("cpu") if level == 1 else torch.empty(0, dtype=p.dtype)
            self.asleep, self._level = True, level

    def wake_up(self, tags: list[str] | None = None) -> None:
        """ "weights": back on the device (level 1: as they were; level 2: allocated, values
        undefined until load_weights). "kv_cache": nothing to do (no cache between calls)."""
        if tags is not None and not set(tags) <= {"weights", "kv_cache"}:
            raise ValueError(f"wake_up tags {tags}: 'weights' and/or 'kv_cache'")
        if tags is not None and "weights" not in tags:
            return
        with self._lock:
            if not self.asleep:
                return
            for p in self.model.parameters():
                shape, dtype = self._shapes[p]
                p.data = (
                    p.data.to(self.device)
                    if self._level == 1
                    else torch.empty(shape, dtype=dtype, device=self.device)
                )
            self.asleep, self._stale = False, self._level == 2

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> int:
        """In place, by HF name (a tied head may come under either name, or both)."""
        named = dict(self.model.named_parameters(remove_duplicate=False))
        want = {id(p): n for n, p in self.model.named_parameters()}  # each storage once
        loaded: set[int] = set()
        count = 0
        with self._lock, torch.no_grad():
            if self.asleep:
                raise RuntimeError("load_weights on a sleeping engine: wake_up(['weights']) first")
            for name, t in weights:
                p = named.get(name)
                if p is None:
                    raise KeyError(f"load_weights: {name!r} is not a weight of this model")
                if p.shape != t.shape:
                    raise ValueError(
                        f"load_weights: {name} is {tuple(t.shape)}, the model's {tuple(p.shape)}"
                    )
                p.copy_(t)
                loaded.add(id(p))
                count += 1
            missing = [n for i, n in want.items() if i not in loaded]
            if missing:
                raise ValueError(
                    f"load_weights: {len(missing)} weight(s) not given, e.g. {missing[:3]}"
                )
            self._stale = False
        return count
