"""Run by vLLM's interpreter for test_train_vllm_colocated.py (vLLM lives in its own virtualenv
on CPU machines): ColocatedVLLMEngine in this process on a model folder; writes a JSON report.

    python vllm_colocated_check.py MODEL OUT.json [--stream OTHER]

Samples twice with one seed, then (with --stream) loads OTHER's weights in place through
load_weights, read from its safetensors one tensor at a time, and samples again. Imports only
what vLLM's virtualenv has (torch, safetensors, vLLM) and deepswe.train.engines.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("out", type=Path)
    p.add_argument("--stream", default=None)
    a = p.parse_args()
    from safetensors import safe_open

    from deepswe.train.engines.vllm_colocated import ColocatedVLLMEngine

    engine = ColocatedVLLMEngine(a.model, dtype="float32", max_model_len=512)
    prompt = list(range(5, 25))

    def draw() -> list[dict]:
        return [
            {"ids": s.token_ids, "lps": s.logprobs, "finish": s.finish_reason}
            for s in engine.sample(prompt, 2, 1.0, 8, seed=3)
        ]

    report = {"can_sleep": engine.can_sleep, "first": draw(), "again": draw()}
    # a hybrid rank's batch: the same request beside another, in one generate call
    batch = engine.sample_many([(prompt, 2, 1.0, 8, 3), (prompt[:7], 1, 0.0, 4, None)])
    report["batched"] = [
        {"ids": s.token_ids, "lps": s.logprobs, "finish": s.finish_reason} for s in batch[0]
    ]
    report["batch_sizes"] = [len(r) for r in batch]
    # continuous batching: a long request in flight, a short one submitted after it finishes
    # first, and both sample as they do alone
    long = engine.submit(prompt, 1, 1.0, 200, seed=11)
    short = engine.submit(prompt[:9], 2, 1.0, 8, seed=3)
    short_samples = short.result(timeout=300)
    report["short_done_first"] = not long.done()
    long_samples = long.result(timeout=300)
    alone = engine.sample_many([(prompt, 1, 1.0, 200, 11), (prompt[:9], 2, 1.0, 8, 3)])
    report["submitted_as_alone"] = [
        [s.token_ids for s in long_samples],
        [s.token_ids for s in short_samples],
    ] == [[s.token_ids for s in r] for r in alone]
    report["long_tokens"] = len(long_samples[0].token_ids)
    engine.sleep(2)  # CPU: vLLM has no sleep mode here, a no-op said by can_sleep
    engine.wake_up()
    if a.stream:

        def stream():
            for f in sorted(Path(a.stream).glob("*.safetensors")):
                with safe_open(str(f), framework="pt") as st:
                    for name in st.keys():  # noqa: SIM118 (safe_open has no __iter__)
                        yield name, st.get_tensor(name)

        report["loaded"] = engine.load_weights(stream())
        report["after"] = draw()
    a.out.write_text(json.dumps(report))


if __name__ == "__main__":
    main()
