"""The `vllm` inference engine: a vLLM OpenAI-compatible server, sampled over HTTP.

The trainer's process starts `vllm serve` from vLLM's own virtualenv (vllm_server.py) and
samples through /v1/completions with the prompt as token ids, asking for the sampled ids
(`return_token_ids`) and their log-probs (`logprobs: 0`; the server runs with
`--logprobs-mode processed_logprobs`, so they are log_softmax(logits / temperature), the same
quantity the `hf` engine reports). Text is decoded here from the ids, never re-tokenised.

New weights travel as a safetensors file in the server's private folder: the server is paused
(in-flight requests finish on the old weights, new ones wait), our worker extension
(vllm_worker.py) reloads the file in place through /collective_rpc and checks every 1:1
parameter against it, the prefix cache (old keys/values) is reset, and the server resumes.
A file rather than NCCL keeps CPU and GPU on one path; on a GPU cluster the collective
weight-transfer engines of vLLM (/init_weight_transfer_engine) are the faster option.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from deepswe.train.engines import Sample
from deepswe.train.engines.hf import load_tokenizer
from deepswe.train.engines.vllm_server import VLLMServer, VLLMServerError
from deepswe.train.rollout import ChatRenderer

if TYPE_CHECKING:
    from deepswe.train.config import TrainConfig


class VLLMEngine:
    """Implements `InferenceEngine` over a vLLM server it starts and owns; `close()` (or
    garbage collection, or interpreter exit) stops the server."""

    name = "vllm"

    def __init__(
        self,
        model_path: str | Path,
        *,
        device: str = "cpu",
        dtype: str = "float32",
        tensor_parallel: int = 1,
        python: str | Path | None = None,
        extra_args: Sequence[str] = (),
        startup_timeout_s: float = 600.0,
        request_timeout_s: float = 3600.0,
    ) -> None:
        self.tokenizer = load_tokenizer(model_path)
        self.renderer = ChatRenderer(self.tokenizer)
        self.request_timeout_s = request_timeout_s
        self.weight_version = 0  # updates pushed so far
        t0 = time.monotonic()
        self.server = VLLMServer(
            model_path,
            dtype=dtype,
            device="cpu" if device == "cpu" else "cuda",
            tensor_parallel=tensor_parallel,
            python=python,
            extra_args=extra_args,
            startup_timeout_s=startup_timeout_s,
        )
        # One real token before anyone relies on the server: kernels that fail only on the
        # first forward pass (e.g. a head size the CPU attention lacks) fail here, with the log.
        try:
            self._complete([self.tokenizer.eos_token_id], 1, 1.0, 1, 0)
        except VLLMServerError as e:
            time.sleep(1.0)  # let the dying server finish writing its log
            tail = self.server.log_tail()
            self.server.stop()
            raise VLLMServerError(f"vLLM server failed its first request: {e}\n{tail}") from None
        self.startup_s = time.monotonic() - t0

    @classmethod
    def from_config(cls, cfg: TrainConfig) -> VLLMEngine:
        """From a TrainConfig (model.path, model.device, model.dtype, engine.tensor_parallel)."""
        return cls(
            cfg.model.path,
            device=cfg.model.device,
            dtype=cfg.model.dtype,
            tensor_parallel=cfg.engine.tensor_parallel,
        )

    # -- sampling ---------------------------------------------------------------------------
    def sample(
        self,
        prompt: list[int] | list[dict[str, str]],
        n: int,
        temperature: float,
        max_tokens: int,
        seed: int | None = None,
    ) -> list[Sample]:
        """n replies; temperature 0 is greedy (log-probs then at temperature 1). Thread-safe:
        concurrent calls are batched by the server."""
        if prompt and isinstance(prompt[0], dict):
            prompt = self.renderer.encode(self.renderer.text(prompt, True))  # type: ignore[arg-type]
        if not prompt or n < 1 or max_tokens < 1 or temperature < 0:
            raise ValueError(
                f"need a prompt, n >= 1, max_tokens >= 1, temperature >= 0; got "
                f"{len(prompt)} ids, {n}, {max_tokens}, {temperature}"
            )
        if temperature == 0:  # vLLM refuses n > 1 with greedy sampling; all n are equal anyway
            one = self._complete(list(prompt), 1, 0.0, max_tokens, seed)[0]
            return [
                Sample(list(one.token_ids), list(one.logprobs), one.text, one.finish_reason)
                for _ in range(n)
            ]
        return self._complete(list(prompt), n, temperature, max_tokens, seed)

    def _complete(
        self, prompt: list[int], n: int, temperature: float, max_tokens: int, seed: int | None
    ) -> list[Sample]:
        body: dict[str, Any] = {
            "model": "policy",
            "prompt": prompt,
            "n": n,
            "temperature": temperature,
            "max_tokens": max_tokens,
            "logprobs": 0,  # the sampled token's own log-prob only
            "return_token_ids": True,
            "return_tokens_as_token_ids": True,
            "skip_special_tokens": False,
        }
        if seed is not None:
            body["seed"] = seed % 2**63  # vLLM takes an int64
        out = self.server.post("/v1/completions", body, self.request_timeout_s)
        choices = sorted(out["choices"], key=lambda c: c["index"])
        return [self._sample_of(c) for c in choices]

    def _sample_of(self, choice: dict[str, Any]) -> Sample:
        ids = [int(i) for i in choice["token_ids"]]
        lps = [float(x) for x in choice["logprobs"]["token_logprobs"]]
        # return_tokens_as_token_ids: each token is "token_id:<id>"; it must name the same ids.
        named = [int(t.rpartition(":")[2]) for t in choice["logprobs"]["tokens"]]
        reason = choice["finish_reason"]
        if named != ids or len(lps) != len(ids) or not ids or reason not in ("stop", "length"):
            raise VLLMServerError(
                f"malformed completion (finish_reason {reason!r}, {len(ids)} ids, "
                f"{len(lps)} log-probs, token names match ids: {named == ids})"
            )
        if reason == "stop" and ids[-1] != self.tokenizer.eos_token_id:
            # Only the end-of-turn token stops a reply: no stop strings are sent.
            raise VLLMServerError(f"stopped on {ids[-1]}, not eos {self.tokenizer.eos_token_id}")
        return Sample(ids, lps, self.renderer.decode(ids), reason)

    # -- weights ----------------------------------------------------------------------------
    def update_weights(self, state_dict: dict[str, torch.Tensor]) -> None:
        """Replace the served weights (HF checkpoint names, as the training backend's
        state_dict) and check they landed; raises VLLMServerError otherwise."""
        from safetensors.torch import save_file

        folder = self.server.dir / "weights"
        folder.mkdir(exist_ok=True)
        seen: set[int] = set()
        tensors = {}
        for name, t in state_dict.items():
            t = t.detach().to("cpu").contiguous()
            # Tied weights (and views of one fused tensor) share storage: safetensors refuses it.
            if t.untyped_storage().data_ptr() in seen:
                t = t.clone()
            seen.add(t.untyped_storage().data_ptr())
            tensors[name] = t
        save_file(tensors, str(folder / "model.safetensors"))
        del tensors
        # mode=wait: running requests finish on the old weights, new ones wait for /resume.
        self.server.post("/pause?mode=wait", timeout_s=self.request_timeout_s)
        try:
            out = self.server.post(
                "/collective_rpc",
                {"method": "deepswe_load_weights", "kwargs": {"weights_dir": str(folder)}},
            )
            # Cached prompt prefixes hold keys/values computed with the old weights.
            reset = self.server.post("/reset_prefix_cache")
        finally:
            self.server.post("/resume")
        if not reset.get("success"):
            raise VLLMServerError(f"the prefix cache could not be reset: {reset}")
        for report in out["results"]:  # one per worker (tensor-parallel rank)
            if report["mismatched"] or not report["checked"]:
                raise VLLMServerError(
                    f"weight update did not take: {report['checked']} parameters equal to "
                    f"the pushed ones, mismatched: {report['mismatched'][:10]}"
                )
        self.weight_version += 1

    def close(self) -> None:
        """Stop the server (idempotent)."""
        self.server.stop()

    def __enter__(self) -> VLLMEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
