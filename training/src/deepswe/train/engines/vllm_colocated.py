"""vLLM's offline engine inside the calling process: the engine a hybrid trainer rank holds on GPUs
(deepswe.train.cluster.hybrid), and a `ColocatedEngine`.

Unlike engines/vllm.py (a server in its own virtualenv, new weights through a safetensors folder),
this engine lives in the trainer rank's own process and interpreter, so the rank needs vLLM
installed beside the trainer (one GPU virtualenv). Its engine core runs in this process
(VLLM_ENABLE_V1_MULTIPROCESSING=0) and its executor is the in-process one, so `load_weights`
hands the backend's stream of (HF name, tensor) to vLLM's in-place reload
(`Worker.reload_weights(weights_iterator=...)`, which reruns each layer's post-load processing)
by reference: one tensor at a time, nothing written to disk, nothing through Ray.

`sleep`/`wake_up` are vLLM's own (level 1: weights to host memory, KV cache freed), available on
CUDA only; elsewhere (vLLM's CPU build) sleeping is refused by vLLM at construction, so the
engine is built without sleep mode and `sleep` is a no-op there, said by `can_sleep`.

Two ways to sample. `submit` is continuous batching, as vLLM's server and rLLM's async engine run:
each request joins the engine's running batch at its next decoding step and its future resolves
the moment it finishes, whatever else is still decoding (a stepping thread drives
`LLMEngine.step()`; requests are added between steps). `sample_many` is one generate call over a
batch, run to its longest reply: what the model-parallel fan-out needs (every shard must run the
same calls in the same order; cluster/hybrid.py). A generate call waits until no submitted
request is in flight, and the other way round.

Tested on CPU in vLLM's virtualenv (training/tests/test_train_vllm_colocated.py): build, sample
with seeds, the streamed in-place load against a fresh engine of the same weights. Not run on a
GPU. With `tensor_parallel` above 1 every rank of the group builds its shard through vLLM's
`external_launcher` executor (the torch.distributed world the trainer formed); every rank must
then call generate with the same requests in the same order, which the hybrid ranks' fan-out
guarantees (cluster/hybrid.py). That mode has not run anywhere: it needs several GPUs.

Imports only torch, vLLM and deepswe.train.engines (vLLM's virtualenv has no deepswe.env).
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from deepswe.train.engines import Sample

if TYPE_CHECKING:
    from deepswe.train.config import TrainConfig


class ColocatedVLLMEngine:
    """`vllm.LLM` in this process; implements `InferenceEngine` and `ColocatedEngine`."""

    name = "vllm"

    def __init__(
        self,
        model_path: str | Path,
        *,
        dtype: str = "auto",
        gpu_memory_utilization: float = 0.6,
        max_model_len: int | None = None,
        seed: int = 0,
        tensor_parallel: int = 1,
    ) -> None:
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # the stream by reference
        from vllm import LLM

        self.can_sleep = cuda = torch.cuda.is_available()
        self.tensor_parallel = tensor_parallel
        self.llm = LLM(
            model=str(model_path),
            dtype=dtype,
            seed=seed,
            tensor_parallel_size=tensor_parallel,
            distributed_executor_backend="uni" if tensor_parallel == 1 else "external_launcher",
            enable_sleep_mode=cuda,
            gpu_memory_utilization=gpu_memory_utilization,
            max_model_len=max_model_len,
            enable_prefix_caching=True,
            # As the vllm engine's server: the plain distribution asked for (not the model
            # folder's sampling defaults), log-probs of logits / temperature.
            generation_config="vllm",
            logprobs_mode="processed_logprobs",
            # CPU: eager, as the server engine (torch.compile on 2 shared cores costs minutes at
            # start for no gain on tiny models). CUDA: vLLM's CUDA graphs (not run here).
            enforce_eager=not cuda,
        )
        self.tokenizer = self.llm.get_tokenizer()
        self.asleep = False
        self._renderer: Any = None
        # continuous batching (submit): request id -> its future, the stepping thread's state
        self._inflight: dict[str, Future] = {}
        self._aliases: dict[str, str] = {}  # vLLM's id of a request -> ours
        self._engine_lock = threading.Condition()
        self._request_ids = itertools.count()
        self._stepper: threading.Thread | None = None
        self.busy_s = 0.0  # seconds the engine spent in decoding steps and generate calls

    @classmethod
    def from_config(cls, cfg: TrainConfig) -> ColocatedVLLMEngine:
        """From a TrainConfig: model.path and dtype; the context is the rollout's budget; 0.6 of
        the GPU as the DeepSWE recipe gives vLLM (rLLM gpu_memory_utilization=0.6)."""
        ro = cfg.rollout
        return cls(
            cfg.model.path,
            dtype=cfg.model.dtype,
            seed=cfg.run.seed,
            max_model_len=ro.max_prompt_tokens + ro.max_response_tokens,
            tensor_parallel=cfg.engine.tensor_parallel,
        )

    def _ids(self, prompt: list[int] | list[dict[str, str]]) -> list[int]:
        if prompt and isinstance(prompt[0], dict):
            if self._renderer is None:  # the trainer's own rendering (deepswe.env is there)
                from deepswe.train.rollout import ChatRenderer

                self._renderer = ChatRenderer(self.tokenizer)
            return self._renderer.encode(self._renderer.text(prompt, True))
        return list(prompt)  # type: ignore[arg-type]

    def sample(
        self,
        prompt: list[int] | list[dict[str, str]],
        n: int,
        temperature: float,
        max_tokens: int,
        seed: int | None = None,
    ) -> list[Sample]:
        """n replies with the log-prob of each sampled token (vLLM's logprobs=0: the sampled
        token's, under the tempered distribution). Concurrent calls are batched continuously
        (`submit`), but for an engine spanning a model-parallel group, whose shards must run the
        same generate calls (`sample_many`)."""
        if self.tensor_parallel == 1:
            return self.submit(prompt, n, temperature, max_tokens, seed).result()
        return self.sample_many([(prompt, n, temperature, max_tokens, seed)])[0]

    def _request(
        self, prompt: Any, n: int, temperature: float, max_tokens: int, seed: int | None
    ) -> tuple[dict[str, list[int]], Any]:
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        if self.asleep:
            raise RuntimeError("the engine is asleep: wake_up before sampling")
        ids = self._ids(prompt)
        if not ids or n < 1 or max_tokens < 1 or temperature < 0:
            raise ValueError(
                f"need a prompt, n >= 1, max_tokens >= 1, temperature >= 0; "
                f"got {len(ids)} ids, {n}, {max_tokens}, {temperature}"
            )
        params = SamplingParams(
            n=n,
            temperature=temperature,
            max_tokens=max_tokens,
            seed=seed,
            logprobs=0,
            skip_special_tokens=False,
            output_kind=RequestOutputKind.FINAL_ONLY,  # one output per request, when it ends
        )
        return {"prompt_token_ids": ids}, params

    def sample_many(
        self, requests: list[tuple[Any, int, float, int, int | None]]
    ) -> list[list[Sample]]:
        """`sample` for several requests (prompt, n, temperature, max_tokens, seed) in one
        generate call, each with its own sampling parameters, run to its longest reply: the
        model-parallel fan-out's batch (every shard runs the same calls)."""
        made = [self._request(*r) for r in requests]
        with self._engine_lock:
            while self._inflight:  # the generate call would step (and take) their outputs
                self._engine_lock.wait()
            t0 = time.monotonic()
            try:
                outs = self.llm.generate([m[0] for m in made], [m[1] for m in made], use_tqdm=False)
            except BaseException:
                self._abort_all()  # else the next call would step (and return) them too
                raise
            finally:
                self.busy_s += time.monotonic() - t0
        return [self._samples(out) for out in outs]

    def submit(
        self,
        prompt: list[int] | list[dict[str, str]],
        n: int,
        temperature: float,
        max_tokens: int,
        seed: int | None = None,
    ) -> Future:
        """Continuous batching: the request joins the running batch at the engine's next
        decoding step; the future resolves to its n samples as soon as it finishes, whatever
        else is still decoding. Thread-safe; a seeded request samples as it does alone."""
        prompt_in, params = self._request(prompt, n, temperature, max_tokens, seed)
        future: Future = Future()
        with self._engine_lock:
            ours = f"deepswe-{next(self._request_ids)}"
            # vLLM may name the request its own way internally; its outputs carry ours
            theirs = self.llm.llm_engine.add_request(ours, prompt_in, params)
            self._inflight[ours] = future
            self._aliases[theirs] = ours
            if self._stepper is None or not self._stepper.is_alive():
                self._stepper = threading.Thread(
                    target=self._step_loop, name="vllm-colocated-steps", daemon=True
                )
                self._stepper.start()
            self._engine_lock.notify_all()
        return future

    def _step_loop(self) -> None:
        """Decoding steps while any submitted request is in flight; requests are added between
        steps (each step holds the engine's lock), finished ones resolved at once."""
        while True:
            with self._engine_lock:
                while not self._inflight:
                    self._engine_lock.wait()
                t0 = time.monotonic()
                try:
                    outs = self.llm.llm_engine.step()
                except BaseException as e:  # every waiting episode learns why
                    self._abort_all()
                    for future in self._inflight.values():
                        future.set_exception(e)
                    self._inflight.clear()
                    self._aliases.clear()
                    self._engine_lock.notify_all()
                    continue
                finally:
                    self.busy_s += time.monotonic() - t0
                done = []
                for out in outs:
                    if out.finished:
                        key = self._aliases.pop(out.request_id, out.request_id)
                        self._aliases = {k: v for k, v in self._aliases.items() if v != key}
                        future = self._inflight.pop(key, None)
                        if future is None:  # not ours: nothing waits on it
                            continue
                        done.append((future, out))
                if not self._inflight:
                    self._engine_lock.notify_all()  # a generate call may run now
            for future, out in done:
                try:
                    future.set_result(self._samples(out))
                except BaseException as e:
                    future.set_exception(e)

    def _abort_all(self) -> None:
        """Drop every request still in the engine after a failed step: one left there would be
        stepped, and its output taken, by the next call. (Found on vLLM's CPU build: a seeded
        request whose prefill is split across steps raises "CPU Generator does not use
        offset" there.)"""
        engine = self.llm.llm_engine
        states = getattr(getattr(engine, "output_processor", None), "request_states", {})
        if states:
            engine.abort_request(list(states))

    def _samples(self, out: Any) -> list[Sample]:
        samples = []
        for c in out.outputs:
            toks = list(c.token_ids)
            lps = [float(step[t].logprob) for t, step in zip(toks, c.logprobs or [], strict=True)]
            text = self.tokenizer.decode(toks, skip_special_tokens=True)
            samples.append(
                Sample(toks, lps, text, "length" if c.finish_reason == "length" else "stop")
            )
        return samples

    def update_weights(self, state_dict: dict[str, torch.Tensor]) -> None:
        self.load_weights(state_dict.items())

    # -- ColocatedEngine ---------------------------------------------------------------------
    def sleep(self, level: int = 1) -> None:
        if level not in (1, 2):
            raise ValueError(f"sleep level {level}: 1 (offload weights) or 2 (discard them)")
        if self.asleep or not self.can_sleep:
            return
        self.llm.sleep(level=level)
        self.asleep = True

    def wake_up(self, tags: list[str] | None = None) -> None:
        if not self.asleep:
            return
        self.llm.wake_up(tags)
        if tags is None or "kv_cache" in tags:
            self.asleep = False

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> int:
        """vLLM's in-place reload over the stream (HF checkpoint names); the prefix cache is
        reset after it (cached KV of the old weights would be reused otherwise).

        A tied model's head is given again as lm_head.weight when the stream lacks it (a tied
        HF checkpoint has only the embedding): vLLM's CPU build multiplies by its own copy of the
        head, refreshed only when a weight of that name arrives; without it the reloaded engine
        embedded with the new weights and scored with the old ones (found by the CPU test)."""
        count = [0]
        config = self.llm.llm_engine.model_config.hf_config
        tied = bool(getattr(config, "tie_word_embeddings", False))

        def counted() -> Iterator[tuple[str, torch.Tensor]]:
            embed, head = None, False
            for name, t in weights:
                count[0] += 1
                if name == "model.embed_tokens.weight":
                    embed = t
                head = head or name == "lm_head.weight"
                yield name, t
            if tied and embed is not None and not head:
                yield "lm_head.weight", embed

        self.llm.collective_rpc(
            "reload_weights", kwargs={"weights_iterator": counted(), "is_checkpoint_format": True}
        )
        self.llm.reset_prefix_cache()
        return count[0]

    def close(self) -> None:
        del self.llm
