"""Cluster placement: the placement plan (pure) and the Ray scheduler on CPU, whose engine and
rollout-worker actors must sample exactly what the local thread pool samples, and whose trainer
ranks (real gloo processes) must train exactly as one in-process backend."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
import torch

from deepswe.train.backends.hf import HFBackend
from deepswe.train.backends.megatron.selfcheck import OPTIM, random_batch, run_backend
from deepswe.train.cluster import placement_plan
from deepswe.train.cluster.ranks import RankedBackend
from deepswe.train.cluster.ray_runtime import RayScheduler
from deepswe.train.config import TrainConfig, load_config, validate
from deepswe.train.engines.hf import HFEngine
from deepswe.train.models import build_test_model
from deepswe.train.trainer import Trainer, check_runnable

try:
    import ray
except ImportError:  # the plan needs no Ray; the scheduler tests do
    ray = None
needs_ray = pytest.mark.skipif(ray is None, reason="pip install 'deepswe-train[cluster]'")
CONFIGS = Path(__file__).resolve().parents[2] / "configs"


@pytest.fixture(autouse=True)
def one_thread():
    """As the Ray actors run (one CPU each): the same float sums. Set for each test, since a
    module collected later (test_train_spine.py: 2 threads) sets its own at import."""
    torch.set_num_threads(1)


# -- the plan ---------------------------------------------------------------------------------
def test_the_32b_profile_places_8_engines_of_tp8_and_a_64_rank_trainer():
    plan = placement_plan(load_config(CONFIGS / "deepswe-32b.yaml"))
    assert (plan.gpus, plan.nodes, plan.gpus_per_node) == (64, 8, 8)
    assert (plan.engine_replicas, plan.engine_tp) == (8, 8)
    assert (plan.trainer_world, plan.trainer_tp, plan.trainer_pp, plan.trainer_cp) == (64, 8, 1, 1)
    assert plan.trainer_dp == 8 and plan.colocated and plan.rollout_workers == 64
    assert len(plan.bundles()) == 64 and all(b["GPU"] == 1 for b in plan.bundles())
    assert plan.engine_bundles(7) == list(range(56, 64)) and plan.engine_node(7) == 7
    assert [b["GPU"] for b in plan.replica_bundles()] == [8.0] * 8
    assert "8 replica(s) x TP 8" in plan.describe()


def test_the_tiny_profile_is_a_cpu_plan():
    plan = placement_plan(load_config(CONFIGS / "tiny.yaml"))
    assert (plan.gpus, plan.engine_replicas, plan.trainer_world) == (0, 1, 1)
    assert plan.bundles() == [{"CPU": 1.0}] and not plan.colocated
    assert plan.rollout_workers == 4  # rollout.concurrency
    rw = placement_plan(load_config(CONFIGS / "tiny.yaml", ["cluster.rollout_workers=2"]))
    assert rw.rollout_workers == 2


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        (
            ["engine.tensor_parallel=16"],
            r"engine.tensor_parallel 16 must divide "
            r"cluster.gpus_per_node 8 \(a vLLM tensor-parallel group lives on one node\)",
        ),
        (["cluster.gpus=60"], r"cluster.gpus 60 is not a multiple of cluster.gpus_per_node 8"),
        (
            ["cluster.gpus=8", "backend.parallel.pipeline_parallel=2"],
            r"backend.parallel: TP\*PP\*CP = 16 must divide cluster.gpus 8",
        ),
        (
            ["cluster.gpus_per_node=4", "engine.tensor_parallel=4"],
            r"backend.parallel.tensor_parallel 8 must divide cluster.gpus_per_node 4 \(tensor",
        ),
        (["cluster.gpus=4"], r"engine.tensor_parallel 8 must divide cluster.gpus 4 \(one node\)"),
    ],
)
def test_a_layout_that_cannot_be_placed_names_the_field(overrides, match):
    with pytest.raises(ValueError, match=match):
        placement_plan(load_config(CONFIGS / "deepswe-32b.yaml", overrides))


def test_a_cpu_plan_has_tp_x_pp_x_cp_x_cpu_data_parallel_trainer_ranks_of_their_own_cpus():
    cfg = load_config(
        CONFIGS / "tiny.yaml",
        [
            "backend.parallel.tensor_parallel=2",
            "cluster.cpu_data_parallel=2",
            "cluster.cpus_per_trainer_rank=2",
        ],
    )
    plan = placement_plan(cfg)
    assert (plan.trainer_world, plan.trainer_tp, plan.trainer_dp) == (4, 2, 2)
    assert plan.trainer_bundles() == [{"CPU": 2.0}] * 4
    assert plan.cpus() == 1 + 4 * 2 + 4  # engine, ranks, rollout workers: what a local Ray gets
    assert "world 4 = TP 2 x PP 1 x CP 1 x DP 2, 2 CPU a rank" in plan.describe()
    assert placement_plan(load_config(CONFIGS / "tiny.yaml")).trainer_bundles() == []  # driver


def test_trainer_ranks_are_refused_where_they_cannot_run():
    """GPU plans of several ranks need the megatron backend on CUDA with vLLM inside the ranks,
    engines of one GPU or of a whole model-parallel group (refused before any Ray starts); a
    CPU world above 1 needs Ray and a backend that splits the work."""
    gpu = load_config(CONFIGS / "tiny.yaml", ["cluster.gpus=8", "engine.tensor_parallel=4"])
    assert placement_plan(gpu).trainer_world == 8
    with pytest.raises(
        ValueError,
        match="backend.name 'hf': 8 trainer ranks on GPUs run the "
        "megatron backend on CUDA with vLLM inside the ranks; set backend.name "
        "megatron",
    ):
        RayScheduler.start(gpu)
    tp4 = load_config(CONFIGS / "deepswe-32b.yaml", ["engine.tensor_parallel=4"])
    with pytest.raises(
        ValueError,
        match=r"engine.tensor_parallel 4: an engine inside the trainer "
        r"ranks spans one model-parallel group \(TP x CP = 8\) or one GPU",
    ):
        RayScheduler.start(tp4)
    with pytest.raises(ValueError, match="cluster.cpu_data_parallel 2 is for CPU runs"):
        placement_plan(load_config(CONFIGS / "deepswe-32b.yaml", ["cluster.cpu_data_parallel=2"]))
    dp2 = ["cluster.cpu_data_parallel=2"]
    with pytest.raises(ValueError, match="trainer ranks are Ray actors; set cluster.scheduler ray"):
        check_runnable(load_config(CONFIGS / "tiny.yaml", dp2))
    with pytest.raises(ValueError, match="trainer world 2: the hf backend trains in one process"):
        check_runnable(load_config(CONFIGS / "tiny.yaml", [*dp2, "cluster.scheduler=ray"]))


def test_engine_tensor_parallel_needs_gpus():
    cfg = load_config(CONFIGS / "tiny.yaml", ["engine.tensor_parallel=2"])
    with pytest.raises(ValueError, match="engine.tensor_parallel 2 needs GPUs; cluster.gpus is 0"):
        placement_plan(cfg)


# -- Ray on CPU --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return build_test_model(tmp_path_factory.mktemp("tiny"))


def with_scheduler(cfg: TrainConfig, scheduler: str) -> TrainConfig:
    return cfg.model_copy(
        update={"cluster": cfg.cluster.model_copy(update={"scheduler": scheduler})}
    )


def text_cfg(model_dir: Path, **run) -> TrainConfig:
    """test_train_trainer.py's short text run: 2 tasks x 4 rollouts of up to 6 tokens."""
    return validate(
        {
            "run": {"seed": 7, "tensorboard": False, **run},
            "model": {"path": str(model_dir)},
            "data": {"source": "text", "text": {"target": "s"}},
            "rollout": {
                "tasks_per_step": 2,
                "group_size": 4,
                "concurrency": 3,
                "max_tokens_per_turn": 6,
            },
            "backend": {"optim": {"lr": 1e-2, "micro_batch_size": 3}},
            "algo": {"loss_constant": 8},
            "cluster": {"rollout_workers": 2},
        },
        "test",
    )


def episodes(run_dir: Path, step: int) -> list[dict]:
    """A step's trajectories without their timings (the test log's process output has some)."""
    out = []
    for line in (run_dir / f"trajectories/step-{step:06d}.jsonl").open():
        t = json.loads(line)
        for key in ("wall_seconds", "grade_seconds", "test_log"):
            t.pop(key)
        for s in t["steps"]:
            s.pop("model_seconds"), s.pop("tool_seconds")
        out.append(t)
    return out


def metrics(run_dir: Path) -> list[dict]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(x).items() if not k.startswith("time/")} for x in lines]


def assert_engine_follows_backend(trainer: Trainer, model_dir: Path) -> None:
    """The engine actor samples as a local engine holding the backend's weights, and not as the
    model the run started from."""
    local, start = HFEngine(model_dir), HFEngine(model_dir)
    local.update_weights(trainer.backend.state_dict())
    prompt = [{"role": "user", "content": "Write a word with the letter s."}]
    (remote,) = trainer.engine.sample(prompt, 1, 1.0, 8, seed=11)
    (want,) = local.sample(prompt, 1, 1.0, 8, seed=11)
    (before,) = start.sample(prompt, 1, 1.0, 8, seed=11)
    assert remote.token_ids == want.token_ids and remote.logprobs == want.logprobs
    assert remote.logprobs != before.logprobs


def assert_engine_near_backend(trainer: Trainer, model_dir: Path) -> None:
    """assert_engine_follows_backend for engines reloaded after a level-2 sleep: the same tokens,
    log-probs equal to float rounding. Their weights are fresh 64-byte-aligned allocations, a
    model loaded from safetensors keeps them at the file's offsets (40 mod 64 here), and the
    matmul kernels sum in another order for each: equal values, last bits apart (5e-7 seen)."""
    local, start = HFEngine(model_dir), HFEngine(model_dir)
    local.update_weights(trainer.backend.state_dict())
    prompt = [{"role": "user", "content": "Write a word with the letter s."}]
    for _ in range(2):  # both engine-holding ranks (the proxy takes them in turn)
        (remote,) = trainer.engine.sample(prompt, 1, 1.0, 8, seed=11)
        (want,) = local.sample(prompt, 1, 1.0, 8, seed=11)
        (before,) = start.sample(prompt, 1, 1.0, 8, seed=11)
        assert remote.token_ids == want.token_ids
        assert max(abs(a - b) for a, b in zip(remote.logprobs, want.logprobs, strict=True)) < 1e-5
        assert (
            max(abs(a - b) for a, b in zip(remote.logprobs, before.logprobs, strict=False)) > 1e-3
        )


def test_both_schedulers_build_the_same_policy_for_a_rollout(model_dir, tmp_path):
    """Regression (issue 15): the thread pool and the Ray workers (and sft.policy_reward) each
    built their own EnginePolicy, with two seed formulas. Now both play sampling.run_rollout:
    for the same (seed, step, slot, k), the same seed, limits and sampled tokens. Ray's side runs
    RolloutWorker.run in this process, over the trainer's own engine and source (no Ray)."""
    from deepswe.train.cluster.ray_runtime import RolloutWorker

    trainer = Trainer.setup(text_cfg(model_dir, steps=2), tmp_path / "run")
    trainer.step = 1  # any step: the seed must follow it
    built: list[tuple] = []
    play = trainer.source.rollout

    def spy(task, policy):
        built.append(
            (
                task.instance_id,
                policy.seed,
                policy.temperature,
                policy.max_tokens,
                policy.max_context_tokens,
            )
        )
        return play(task, policy)

    trainer.source.rollout = spy
    local, groups = trainer.collect([1, 0])
    by_pool, built[:] = sorted(built), []  # threads: any order

    worker = RolloutWorker.__new__(RolloutWorker)  # its __init__ would start a RemoteEngine
    worker.cfg, worker.source, worker.engine = trainer.cfg, trainer.source, trainer.engine

    class InProcess:  # RayScheduler.collect's contract: results in job order
        def collect(self, jobs):
            return [worker.run(job) for job in jobs]

    trainer.scheduler = InProcess()
    try:
        remote, ray_groups = trainer.collect([1, 0])
    finally:
        trainer.scheduler = None
        trainer.close()
    assert sorted(built) == by_pool and len(by_pool) == 8 and groups == ray_groups
    assert len({seed for _, seed, *_ in by_pool}) == 8  # every rollout its own seed
    assert [t.steps[0].token_ids for t in remote] == [t.steps[0].token_ids for t in local]


@needs_ray
def test_a_ray_run_resumes_a_local_one_and_samples_exactly_as_it(model_dir, tmp_path):
    """Step 2 on Ray (engine and two rollout workers as actors, weights restored from the
    step-1 checkpoint through RemoteEngine) equals step 2 of the local thread-pool run."""
    local = text_cfg(model_dir, steps=2, save_every=1)
    Trainer.setup(local, tmp_path / "a").train()

    shutil.copytree(tmp_path / "a", tmp_path / "b")
    ckpts = tmp_path / "b/checkpoints"
    (ckpts / "latest").write_text("step-000001\n")
    shutil.rmtree(ckpts / "step-000002")
    started_ray = not ray.is_initialized()
    trainer = Trainer.setup(with_scheduler(local, "ray"), tmp_path / "b", resume=True)
    try:
        assert trainer.scheduler.owns_ray == started_ray and trainer.step == 1
        assert trainer.engine is trainer.scheduler.engine
        assert trainer.scheduler.backend is None  # a trainer world of 1: in the driver
        assert len(trainer.scheduler.workers) == 2
        trainer.run_step()
        assert episodes(tmp_path / "b", 2) == episodes(tmp_path / "a", 2)
        assert metrics(tmp_path / "b") == metrics(tmp_path / "a")
        assert_engine_follows_backend(trainer, model_dir)
    finally:
        trainer.close()
    assert not started_ray or not ray.is_initialized()  # the scheduler stops the Ray it started


@needs_ray
@pytest.mark.docker
def test_a_spine_step_on_ray_equals_the_local_step(model_dir, ray_with_gpus, tmp_path):
    """A real episode in Docker from each rollout worker: the same actions, tokens and rewards
    as the trainer's own thread pool (here the scheduler joins an already running Ray)."""
    from deepswe.data.toy import make_toy_tasks, write_tasks

    tasks = write_tasks(make_toy_tasks(tmp_path / "toy", n=1), tmp_path / "tasks.jsonl")
    cfg = validate(
        {
            "run": {"steps": 1, "tensorboard": False},
            "model": {"path": str(model_dir)},
            "data": {"source": "spine", "path": str(tasks)},
            "rollout": {
                "tasks_per_step": 1,
                "group_size": 2,
                "concurrency": 2,
                "max_tokens_per_turn": 16,
            },
            "episode": {"max_steps": 2, "sandbox": {"memory": "1g", "pids": 256}},
            "algo": {"loss_constant": 64, "mask_endings": []},
            # Rewards are all 0 (a random model), so the gradient is too: at this lr AdamW's
            # weight decay alone moves the weights, enough to see them reach the engine.
            "backend": {"optim": {"lr": 1e-2}},
        },
        "test",
    )
    (here,) = Trainer.setup(cfg, tmp_path / "local").train()
    trainer = Trainer.setup(with_scheduler(cfg, "ray"), tmp_path / "ray")
    try:
        assert not trainer.scheduler.owns_ray
        there = trainer.run_step()
        mine, theirs = episodes(tmp_path / "local", 1), episodes(tmp_path / "ray", 1)
        assert len(mine) == 2 and all(t["ending"] != "infra_error" for t in mine)
        assert all(s["token_ids"] for t in mine for s in t["steps"])
        assert theirs == mine and here["reward/mean"] == there["reward/mean"]
        assert_engine_follows_backend(trainer, model_dir)
    finally:
        trainer.close()
    assert ray.is_initialized()  # not its Ray to stop


# -- Ray with declared GPUs (nothing touches CUDA) -----------------------------------------------
@pytest.fixture(scope="module")
def ray_with_gpus():
    """A local Ray told it has 8 GPUs (placement is checked without any), shared by the rest of
    the module; 8 logical CPUs, enough for an engine, two rollout workers and two ranks."""
    if ray.is_initialized():
        # Every Ray user in the suite shuts its Ray down; one left running is a leak to fix.
        pytest.fail("a Ray is already running in this process: an earlier test leaked it")
    # Logical CPUs: the 8-GPU plans reserve one CPU beside each GPU.
    ray.init(num_cpus=8, num_gpus=8, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@needs_ray
def test_engine_replicas_hold_tp_gpus_each(model_dir, ray_with_gpus):
    from ray.util.placement_group import placement_group_table, remove_placement_group

    from deepswe.train.cluster.ray_runtime import EngineActor, engine_options, reserve

    cfg = load_config(
        CONFIGS / "tiny.yaml",
        [
            f"model.path={model_dir}",
            "cluster.gpus=8",
            "engine.tensor_parallel=4",
            "cluster.rollout_workers=1",
        ],
    )
    plan = placement_plan(cfg)
    assert (plan.engine_replicas, plan.trainer_world, len(plan.bundles())) == (2, 8, 8)
    pg = reserve(plan, timeout_s=30)
    try:
        reserved = placement_group_table(pg)["bundles"].values()
        assert sorted(b["GPU"] for b in reserved) == [4.0, 4.0]  # 8 GPU bundles, 4 a replica
        # The engine itself runs on CPU (model.device cpu); Ray still hands it its 4 GPUs.
        host = ray.remote(EngineActor)
        actors = [host.options(**engine_options(plan, pg, i)).remote(cfg) for i in range(2)]
        ids = ray.get([a.gpu_ids.remote() for a in actors], timeout=120)
        assert [len(x) for x in ids] == [4, 4] and not set(ids[0]) & set(ids[1])
        for a in actors:
            ray.kill(a)
    finally:
        remove_placement_group(pg)


@needs_ray
def test_a_plan_the_cluster_cannot_hold_fails_saying_what_is_missing(ray_with_gpus):
    from deepswe.train.cluster.ray_runtime import reserve

    cfg = load_config(CONFIGS / "deepswe-32b.yaml", ["cluster.gpus=16"])
    with pytest.raises(RuntimeError, match=r"needs 16 CPU, 16 GPU in 2 bundle.*has 8 CPU, 8 GPU"):
        reserve(placement_plan(cfg), timeout_s=2)


# -- trainer ranks: real gloo processes in Ray actors ------------------------------------------
def megatron_cfg(model_dir: Path, **cluster) -> TrainConfig:
    """text_cfg's run on the megatron backend; adam_eps 1e-3 as test_train_megatron_backend.py
    (Adam turns rounding in near-zero gradients into whole steps)."""
    cfg = text_cfg(model_dir, steps=2, save_every=1)
    optim = cfg.backend.optim.model_copy(update={"adam_eps": 1e-3})
    return cfg.model_copy(
        update={
            "backend": cfg.backend.model_copy(update={"name": "megatron", "optim": optim}),
            "cluster": cfg.cluster.model_copy(update=cluster),
        }
    )


@needs_ray
def test_ranked_backend_on_two_data_parallel_ranks_matches_hf_and_reloads(
    model_dir, ray_with_gpus, tmp_path
):
    """~20 s: megatron TP 1 x DP 2 in two rank actors (tcp rendezvous) = the hf backend in
    this process on the same batch; its checkpoint loads into two fresh ranks (file rendezvous);
    a call that outlives its timeout, or a dead rank, is reported naming the ranks."""
    cfg = validate(
        {
            "model": {"path": str(model_dir)},
            "data": {"source": "text"},
            "backend": {"name": "megatron", "optim": OPTIM.model_dump()},
        },
        "test",
    )
    hf = HFBackend(model_dir, optim=OPTIM)
    vocab = hf.model.config.vocab_size
    ref = run_backend(hf, random_batch(vocab))
    ranked = RankedBackend.start(cfg, [{"num_cpus": 1}] * 2, "tcp", timeout_s=120)
    try:
        assert ranked.name == "megatron" and len(ranked.actors) == 2
        got = run_backend(ranked, random_batch(vocab))  # 3 rows: DP shares of 1 and 2
        ranked.save(tmp_path / "ckpt")
    finally:
        ranked.close()
    lp_diff = (got["lp"] - ref["lp"]).abs().max().item()
    w_diff = max((got["w"][k] - ref["w"][k]).abs().max().item() for k in ref["w"])
    print(
        f"DP 2 rank actors vs hf: logprob {lp_diff:.1e}, weights {w_diff:.1e}, loss "
        f"{got['loss']!r} / {ref['loss']!r}, norm {got['norm']!r} / {ref['norm']!r}"
    )
    assert lp_diff < 1e-5 and w_diff < 1e-5
    assert got["loss"] == pytest.approx(ref["loss"], rel=1e-5)
    assert got["norm"] == pytest.approx(ref["norm"], rel=1e-4) and ref["norm"] > OPTIM.grad_clip
    files = {p.name for p in (tmp_path / "ckpt").iterdir()}
    assert files == {"model", "dist", "rng_rank0.pt", "rng_rank1.pt"}

    fresh = RankedBackend.start(cfg, [{"num_cpus": 1}] * 2, "file", timeout_s=120)
    try:
        fresh.load(tmp_path / "ckpt")
        fresh.timeout_s = 1e-3
        with pytest.raises(
            RuntimeError,
            match=r"forward_logprobs: rank\(s\) \[0, 1\] of 2 did "
            r"not answer within 0.001 s",
        ):
            fresh.forward_logprobs(random_batch(vocab).rollout)
        fresh.timeout_s = 120
        loaded = fresh.state_dict()  # queued behind that call on every rank
        assert all(torch.equal(loaded[k], got["w"][k]) for k in got["w"])
        ray.kill(fresh.actors[1])
        _wait_until_dead(fresh.actors[1])
        with pytest.raises(RuntimeError, match="state_dict failed on rank 1"):
            fresh.state_dict()
    finally:
        fresh.close()


def _wait_until_dead(actor, within_s: float = 60.0) -> None:
    """ray.kill only asks the GCS to kill the actor: a call submitted right after it can still
    reach the live worker and succeed (seen once in CI), so wait for the death to be visible."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            ray.get(actor.address.remote(), timeout=5)
        except ray.exceptions.RayActorError:
            return
        except ray.exceptions.GetTimeoutError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"the killed actor still answers after {within_s:g} s")


@needs_ray
def test_a_step_on_two_rank_actors_equals_the_in_process_step_and_resumes(
    model_dir, ray_with_gpus, tmp_path
):
    """~45 s: cluster.cpu_data_parallel 2 (two megatron rank actors beside the engine and the
    rollout workers) takes step 1 as one in-process megatron backend does, checkpoints through
    the ranks, and resumed on fresh ranks takes step 2 as the in-process run does."""
    local = Trainer.setup(megatron_cfg(model_dir), tmp_path / "local").train()
    ray_cfg = megatron_cfg(model_dir, scheduler="ray", cpu_data_parallel=2)
    one = ray_cfg.model_copy(update={"run": ray_cfg.run.model_copy(update={"steps": 1})})
    trainer = Trainer.setup(one, tmp_path / "ray")
    try:
        assert isinstance(trainer.backend, RankedBackend) and len(trainer.backend.actors) == 2
        assert trainer.backend is trainer.scheduler.backend
        records = [trainer.run_step()]
    finally:
        trainer.close()
    ckpt = tmp_path / "ray/checkpoints/step-000001"
    assert {"rng_rank0.pt", "rng_rank1.pt", "trainer.json"} <= {p.name for p in ckpt.iterdir()}
    trainer = Trainer.setup(ray_cfg, tmp_path / "ray", resume=True)
    try:
        assert trainer.step == 1
        records.append(trainer.run_step())
        assert_engine_follows_backend(trainer, model_dir)
    finally:
        trainer.close()
    assert_same_steps(local, records, "in-process vs 2 ranks")


def assert_same_steps(want: list[dict], got: list[dict], what: str) -> None:
    """Two runs' step records agree: equal reward and trained tokens, loss and grad norm to
    float rounding."""
    for w, g in zip(want, got, strict=True):
        print(
            f"step {g['step']}: {what}: loss {w['actor/loss']!r} / {g['actor/loss']!r}, grad "
            f"norm {w['actor/grad_norm']!r} / {g['actor/grad_norm']!r}"
        )
        assert g["reward/mean"] == w["reward/mean"]
        assert g["tokens/trained"] == w["tokens/trained"]
        # On-policy (ratio 1) the loss is the advantages' sum, 0 up to rounding (leave-one-out
        # advantages sum to 0 in a group): abs covers that rounding, the grad norm is the check.
        assert g["actor/loss"] == pytest.approx(w["actor/loss"], rel=1e-5, abs=1e-6)
        assert g["actor/grad_norm"] == pytest.approx(w["actor/grad_norm"], rel=1e-4)


def test_cpu_colocate_places_the_engines_inside_the_trainer_ranks(model_dir):
    cfg = megatron_cfg(model_dir, scheduler="ray", cpu_data_parallel=2, cpu_colocate=True)
    plan = placement_plan(cfg)
    assert plan.colocated and plan.engine_replicas == 2
    assert plan.replica_bundles() == [] and len(plan.trainer_bundles()) == 2
    assert "inside the trainer ranks" in plan.describe()
    with pytest.raises(ValueError, match="cluster.cpu_colocate: the engines live in trainer-rank"):
        placement_plan(
            megatron_cfg(model_dir, cpu_colocate=True).model_copy(
                update={"backend": cfg.backend.model_copy(update={"name": "hf"})}
            )
        )
    with pytest.raises(ValueError, match="cluster.cpu_colocate is for CPU runs"):
        placement_plan(load_config(CONFIGS / "deepswe-32b.yaml", ["cluster.cpu_colocate=true"]))
    with pytest.raises(
        ValueError,
        match="cpu_colocate: the engines live in trainer-rank actors; set cluster.scheduler ray",
    ):
        check_runnable(megatron_cfg(model_dir, cpu_colocate=True))


@needs_ray
def test_hybrid_ranks_sleep_for_the_update_take_weights_in_place_and_step_as_before(
    model_dir, ray_with_gpus, tmp_path
):
    """~60 s: cluster.cpu_colocate: the engines live in the two megatron rank actors (one per
    DP group, hf engine; no engine actor), sleep (level 2: weights discarded) before the old
    log-probs, and take the backend's weights in place, streamed, after the update. Steps 1 and
    2 (resumed on fresh ranks) equal the run with a separate engine actor."""
    separate = megatron_cfg(model_dir, scheduler="ray", cpu_data_parallel=2)
    want = Trainer.setup(separate, tmp_path / "separate").train()
    hybrid = megatron_cfg(model_dir, scheduler="ray", cpu_data_parallel=2, cpu_colocate=True)
    one = hybrid.model_copy(update={"run": hybrid.run.model_copy(update={"steps": 1})})
    trainer = Trainer.setup(one, tmp_path / "hybrid")
    try:
        s = trainer.scheduler
        assert s.engine_actors == [] and s.push_weights is not None
        ranks = s.backend.actors
        assert ray.get([r.engine_name.remote() for r in ranks]) == ["hf", "hf"]
        got = [trainer.run_step()]
        states = ray.get([r.engine_state.remote() for r in ranks])
        n_weights = len(trainer.backend.state_dict())
        assert [{k: s[k] for k in ("asleep", "naps", "synced")} for s in states] == [
            {"asleep": False, "naps": 1, "synced": n_weights}
        ] * 2
        assert_engine_near_backend(trainer, model_dir)
    finally:
        trainer.close()
    trainer = Trainer.setup(hybrid, tmp_path / "hybrid", resume=True)
    try:
        assert trainer.step == 1
        got.append(trainer.run_step())
        assert_engine_near_backend(trainer, model_dir)
    finally:
        trainer.close()
    assert_same_steps(want, got, "separate engine vs hybrid")


# -- GPU ranks (declared GPUs) and an engine spanning a model-parallel group (the fan-out) ------
class GPUProbe:
    def gpus(self) -> list:
        return ray.get_gpu_ids()


@needs_ray
def test_gpu_ranks_take_one_gpu_each_in_their_engines_bundle(ray_with_gpus):
    """deepswe-32b's layout at 8 GPUs (TP 8 x DP 1, one engine of TP 8): rank r takes one GPU of
    bundle r // 8; at TP 4 with engines of TP 4, ranks 0-3 share bundle 0 and 4-7 bundle 1."""
    from ray.util.placement_group import remove_placement_group

    from deepswe.train.cluster.ray_runtime import check_gpu_ranks, rank_options, reserve

    cfg = load_config(CONFIGS / "deepswe-32b.yaml", ["cluster.gpus=8", "cluster.rollout_workers=1"])
    plan = placement_plan(cfg)
    check_gpu_ranks(cfg, plan)  # the 32B profile's fields are what several GPU ranks need
    assert plan.ranked and plan.trainer_bundles() == []
    assert [plan.rank_bundle(r) for r in range(8)] == [0] * 8
    tp4 = load_config(
        CONFIGS / "deepswe-32b.yaml",
        [
            "cluster.gpus=8",
            "cluster.rollout_workers=1",
            "engine.tensor_parallel=4",
            "backend.parallel.tensor_parallel=4",
        ],
    )
    plan = placement_plan(tp4)
    check_gpu_ranks(tp4, plan)
    assert [plan.rank_bundle(r) for r in range(8)] == [0, 0, 0, 0, 1, 1, 1, 1]
    pg = reserve(plan, timeout_s=30)
    try:
        opts = rank_options(plan, pg)
        assert all(o["num_gpus"] == 1.0 for o in opts)
        probes = [ray.remote(GPUProbe).options(**o).remote() for o in opts]
        ids = [tuple(x) for x in ray.get([p.gpus.remote() for p in probes], timeout=120)]
        assert all(len(x) == 1 for x in ids) and len(set(ids)) == 8  # one GPU each, all different
        for p in probes:
            ray.kill(p)
    finally:
        remove_placement_group(pg)


def tp2_cfg(model_dir: Path, **cluster) -> TrainConfig:
    """megatron_cfg's run, one step, on TP 2 (one model-parallel group of 2)."""
    cfg = megatron_cfg(model_dir, scheduler="ray", **cluster)
    one = cfg.run.model_copy(update={"steps": 1})
    par = cfg.backend.parallel.model_copy(update={"tensor_parallel": 2})
    return cfg.model_copy(
        update={"run": one, "backend": cfg.backend.model_copy(update={"parallel": par})}
    )


@needs_ray
def test_an_engine_spanning_the_group_fans_every_request_out_in_step(
    model_dir, ray_with_gpus, tmp_path
):
    """~60 s: TP 2 with engine.tensor_parallel 2 inside the ranks: both ranks hold the engine,
    rank 0 serves the rollout workers and has rank 1 run each call too (same tokens, checked on
    every call); both sleep, both load the synced weights; the step equals the one with a
    separate engine actor."""
    want = Trainer.setup(tp2_cfg(model_dir), tmp_path / "separate").train()
    fan = tp2_cfg(model_dir, cpu_colocate=True)
    fan = fan.model_copy(update={"engine": fan.engine.model_copy(update={"tensor_parallel": 2})})
    assert placement_plan(fan).engine_tp == 2
    trainer = Trainer.setup(fan, tmp_path / "fanout")
    try:
        ranks = trainer.scheduler.backend.actors
        got = [trainer.run_step()]
        states = ray.get([r.engine_state.remote() for r in ranks])
        n_weights = len(trainer.backend.state_dict())
        # the same generate calls on both ranks (batched: requests >= batches)
        assert states[0] == states[1] and states[0]["requests"] >= states[0]["batches"] > 0
        assert states[0] == {
            "asleep": False,
            "naps": 1,
            "synced": n_weights,
            "batches": states[0]["batches"],
            "requests": states[0]["requests"],
        }
    finally:
        trainer.close()
    assert_same_steps(want, got, "separate engine vs an engine fanned out over TP 2")
