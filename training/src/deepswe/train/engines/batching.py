"""Lock-step batches: requests that arrive while a batch runs wait, and go together into the
next one, which runs to its longest reply before the one after starts.

What a hybrid rank serves its engine's model-parallel group with (cluster/hybrid.py: every shard
must run the same generate calls in the same order), and the baseline bench/rollout_throughput.py
measures continuous batching against (`ColocatedVLLMEngine.submit`, vLLM's server). Stdlib only:
vLLM's virtualenv imports it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

# A sampling request: (prompt, n, temperature, max_tokens, seed).
Request = tuple[Any, int, float, int, "int | None"]


class _Pending:
    """A request waiting in the queue, and its result once a batch ran it."""

    def __init__(self, request: Request) -> None:
        self.request = request
        self.done = threading.Event()
        self.result: Any = None
        self.error: BaseException | None = None


class LockStepBatches:
    """`sample(request)` from many threads at once; `run(requests) -> results` (one per
    request, in order) is called for one batch at a time."""

    def __init__(self, run: Callable[[list[Request]], list[Any]]) -> None:
        self._run = run
        self._queue: list[_Pending] = []
        self._queue_lock, self._run_lock = threading.Lock(), threading.Lock()
        self.batches = 0  # batches run
        self.requests = 0  # requests served in them

    def sample(self, request: Request) -> Any:
        job = _Pending(request)
        with self._queue_lock:
            self._queue.append(job)
        while not job.done.is_set():
            with self._run_lock:  # one batch at a time
                with self._queue_lock:
                    batch, self._queue = self._queue, []
                if batch:
                    self._run_batch(batch)
        if job.error is not None:
            raise job.error
        return job.result

    def _run_batch(self, batch: list[_Pending]) -> None:
        self.batches += 1
        self.requests += len(batch)
        try:
            results = self._run([j.request for j in batch])
            for j, r in zip(batch, results, strict=True):
                j.result = r
        except BaseException as e:
            for j in batch:
                j.error = e
        finally:
            for j in batch:
                j.done.set()


__all__ = ["LockStepBatches", "Request"]
