"""The CPU side of hybrid workers (deepswe.train.cluster.hybrid): the hf engine as a
ColocatedEngine (sleep, wake, weights loaded in place from a stream, strict). The Ray run with
the engines inside the megatron rank actors is in test_train_cluster.py (it shares that module's
Ray); the streamed megatron export under TP 2 in test_train_megatron_backend.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from deepswe.train.backends import hf_weights
from deepswe.train.backends.hf import HFBackend
from deepswe.train.engines import ColocatedEngine
from deepswe.train.engines.hf import HFEngine
from deepswe.train.models import build_test_model

PROMPT = [{"role": "user", "content": "Write a word with the letter s."}]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return build_test_model(tmp_path_factory.mktemp("tiny"))


def draw(engine: HFEngine) -> list:
    return engine.sample(PROMPT, 2, 1.0, 8, seed=5)


def test_the_hf_engine_sleeps_wakes_and_takes_a_stream_in_place(model_dir):
    torch.set_num_threads(1)
    engine = HFEngine(model_dir)
    assert isinstance(engine, ColocatedEngine)
    before = draw(engine)
    weights = {k: v.clone() for k, v in engine.model.state_dict().items()}
    engine.sleep(2)  # level 2: every weight's storage freed
    assert engine.asleep and all(p.numel() == 0 for p in engine.model.parameters())
    with pytest.raises(RuntimeError, match="asleep"):
        draw(engine)
    engine.wake_up(["kv_cache"])  # the weights stay discarded
    assert engine.asleep
    engine.wake_up(["weights"])
    with pytest.raises(RuntimeError, match="discarded"):  # allocated, not yet loaded
        draw(engine)
    assert engine.load_weights(iter(weights.items())) == len(weights)  # tied head under both names
    assert draw(engine) == before
    engine.sleep(1)  # level 1 keeps them (host memory: on CPU nothing moves)
    engine.wake_up()
    assert draw(engine) == before
    engine.sleep(1)
    engine.sleep(2)  # asleep already: a no-op, nothing discarded
    engine.wake_up()
    assert draw(engine) == before


def test_load_weights_is_strict_and_names_what_is_wrong(model_dir):
    engine = HFEngine(model_dir)
    (name, t), *_ = engine.model.state_dict().items()
    with pytest.raises(ValueError, match=r"weight\(s\) not given"):
        engine.load_weights([(name, t)])
    with pytest.raises(KeyError, match="'nope' is not a weight of this model"):
        engine.load_weights([("nope", t)])
    with pytest.raises(ValueError, match=rf"{name} is \(1,\), the model's"):
        engine.load_weights([(name, torch.zeros(1))])
    engine.sleep(2)
    with pytest.raises(RuntimeError, match=r"wake_up\(\['weights'\]\) first"):
        engine.load_weights([(name, t)])
    with pytest.raises(ValueError, match="sleep level 3"):
        engine.sleep(3)
    with pytest.raises(ValueError, match="wake_up tags"):
        engine.wake_up(["scheduling"])


def test_a_trained_backend_streams_into_a_sleeping_engine(model_dir):
    """hf_weights over the hf backend (no iter_hf_weights: its state dict, one pair at a time)
    after a step: the woken engine samples as one loaded with the state dict."""
    from deepswe.train.backends.megatron.selfcheck import OPTIM, random_batch, run_backend

    torch.set_num_threads(1)
    backend = HFBackend(model_dir, optim=OPTIM)
    run_backend(backend, random_batch(backend.model.config.vocab_size))
    engine, reference = HFEngine(model_dir), HFEngine(model_dir)
    reference.update_weights(backend.state_dict())
    engine.sleep(2)
    engine.wake_up(["weights"])
    engine.load_weights(hf_weights(backend))
    engine.wake_up(["kv_cache"])
    assert draw(engine) == draw(reference) != draw(HFEngine(model_dir))


def test_the_serving_rank_batches_requests_that_arrive_together(model_dir):
    """HybridRank.sample from 4 threads at once (as a threaded Ray actor takes the rollout
    workers' calls): the first request runs alone, the 3 that arrived meanwhile go in the next
    generate call together; every thread gets what the engine samples for its request alone."""
    import threading

    from deepswe.train.cluster.hybrid import HybridRank
    from deepswe.train.config import validate

    torch.set_num_threads(1)
    cfg = validate({"model": {"path": str(model_dir)}, "data": {"source": "text"}}, "test")
    rank = HybridRank(cfg, 0, 1, None)  # not joined: no backend, and no Ray needed
    rank.engine = HFEngine(model_dir)
    seeds = [1, 2, 3, 4]
    want = {s: [x.token_ids for x in rank.engine.sample(PROMPT, 2, 1.0, 64, seed=s)] for s in seeds}
    got: dict[int, list] = {}
    start = threading.Barrier(len(seeds))

    def call(seed: int) -> None:
        start.wait()
        got[seed] = [x.token_ids for x in rank.sample(PROMPT, 2, 1.0, 64, seed=seed)]

    threads = [threading.Thread(target=call, args=(s,)) for s in seeds]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert got == want
    assert rank.requests == 4 and rank.batches < 4  # some requests shared a generate call
    with pytest.raises(RuntimeError, match="trainer rank 1 serves no samples"):
        HybridRank(
            cfg.model_copy(
                update={
                    "backend": cfg.backend.model_copy(
                        update={
                            "parallel": cfg.backend.parallel.model_copy(
                                update={"tensor_parallel": 2}
                            )
                        }
                    )
                }
            ),
            1,
            2,
            None,
        ).sample(PROMPT, 1, 1.0, 4)
