"""The GRPO++ trainer: setup, then a loop of named stages.

    sample tasks -> rollouts (G per task, concurrently) -> sequences -> old log-probs
    -> filter + advantages -> off-policy mask -> update -> push weights -> metrics -> checkpoint

Everything a step draws is seeded by (run.seed, step, task slot, rollout): resumed from a
checkpoint, a run continues exactly as if it had never stopped (on CPU; GPU kernels may not be
bitwise deterministic).

One step behind (`rollout.max_staleness: 1`): when step s's batch is in hand, the episodes of
step s+1 start in the background on the engine's weights (version s, the weights before step
s's update) while step s trains; after the update the trainer waits for them (the exposed
generation), then pushes version s+1. Every batch after the first is sampled one version before
the weights that train on it, never more, and no episode is dropped for being slow: the
staleness is bounded by when episodes may start. The schedule is fixed, not timed: the engine
serves one version for a whole batch, so the same seed gives the same run, and a checkpoint
holds the batch sampled for the next step (pending.jsonl), so a resumed run goes on exactly.
Each trajectory records the version that sampled it (`policy_version`); `algo.off_policy`
masks the rows the gap has moved too far (deepswe.train.algos.off_policy).
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from deepswe.env.trajectory import Trajectory
from deepswe.train.algos import (
    FilterCounts,
    advantage_estimator,
    compact_filter,
    expand_to_tokens,
    loss_denominator,
    off_policy_correction,
)
from deepswe.train.backends import UpdateBatch
from deepswe.train.checkpoint import DataCursor, latest_checkpoint, load_checkpoint, save_checkpoint
from deepswe.train.config import ConfigError, TrainConfig, dump_config, load_config
from deepswe.train.metrics import (
    episode_seconds,
    integrity_metrics,
    staleness_metrics,
    step_metrics,
    timing_metrics,
)
from deepswe.train.metrics_log import MetricsLog
from deepswe.train.pending import PENDING, Collected
from deepswe.train.plugins import build
from deepswe.train.resume import check_resume_config
from deepswe.train.rollout import ChatRenderer, RolloutBatch, collate, trajectory_sequence
from deepswe.train.runnable import check_runnable
from deepswe.train.sampling import RolloutJob, run_rollout
from deepswe.train.step_record import StepRecord


@dataclass
class Trainer:
    cfg: TrainConfig
    run_dir: Path
    engine: Any
    backend: Any
    source: Any
    cursor: DataCursor
    step: int = 0  # optimizer steps done
    log: Any = None  # MetricsLog, opened by setup
    scheduler: Any = None  # cluster.scheduler ray: a RayScheduler (its .engine is `engine`)
    # max_staleness 1: the next step's batch, sampling in the background or read back from a
    # checkpoint (a Collected once done)
    pending: Future | Collected | None = None
    _background: ThreadPoolExecutor | None = field(default=None, repr=False)

    @classmethod
    def setup(cls, cfg: TrainConfig, run_dir: Path, resume: bool = False) -> Trainer:
        engine_cls, backend_cls, source_cls = check_runnable(cfg)
        run_dir.mkdir(parents=True, exist_ok=True)
        check_resume_config(cfg, run_dir, resume)
        dump_config(cfg, run_dir / "config.yaml")
        source = build(source_cls, cfg)
        scheduler = None
        if cfg.cluster.scheduler == "ray":
            from deepswe.train.cluster.ray_runtime import RayScheduler

            scheduler = RayScheduler.start(cfg)
        try:
            engine = scheduler.engine if scheduler is not None else build(engine_cls, cfg)
            ranked = scheduler.backend if scheduler is not None else None
            # A trainer world above 1: the scheduler's rank actors; otherwise in this process.
            backend = ranked if ranked is not None else build(backend_cls, cfg)
        except BaseException:
            if scheduler is not None:
                scheduler.shutdown()
            raise
        cursor = DataCursor(len(source.tasks()), cfg.run.seed, cfg.data.shuffle)
        trainer = cls(cfg, run_dir, engine, backend, source, cursor, scheduler=scheduler)
        try:
            ckpt = latest_checkpoint(run_dir / "checkpoints") if resume else None
            if resume and ckpt is None:
                raise FileNotFoundError(f"--resume: {run_dir}/checkpoints has no checkpoint")
            if ckpt is not None:  # RankedBackend: every rank loads its part
                trainer.step, trainer.cursor = load_checkpoint(ckpt, backend)
                trainer.pending = Collected.load(ckpt / PENDING)
                trainer.push_weights()
            trainer.log = MetricsLog(
                run_dir, trainer.step if resume else None, cfg.run.tensorboard, cfg.run.steps
            )
        except BaseException:
            trainer.close()  # the Ray actors, when there are any
            raise
        return trainer

    def push_weights(self) -> None:
        """The backend's new weights into the engine(s): the scheduler's own way when it has one
        (hybrid ranks load them in place, never through the driver), else the state dict."""
        push = getattr(self.scheduler, "push_weights", None)
        if push is not None:
            push()
        else:
            self.engine.update_weights(self.backend.state_dict())

    # -- stages ------------------------------------------------------------------------------
    def collect(
        self, task_ids: list[int], step: int | None = None
    ) -> tuple[list[Trajectory], list[int]]:
        """G rollouts per task, run concurrently (threads, or the Ray scheduler's workers);
        group id = slot in the step. `step` (default: the next one, self.step) seeds them."""
        ro = self.cfg.rollout
        step = self.step if step is None else step
        jobs = [
            RolloutJob(task=t, step=step, slot=slot, k=k)
            for slot, t in enumerate(task_ids)
            for k in range(ro.group_size)
        ]
        groups = [job.slot for job in jobs]
        if self.scheduler is not None:  # its workers play the same jobs (sampling.run_rollout)
            return self.scheduler.collect(jobs), groups

        def one(job: RolloutJob) -> Trajectory:
            return run_rollout(self.source, self.engine, self.cfg, job)

        with ThreadPoolExecutor(max_workers=ro.concurrency) as pool:
            trajs = list(pool.map(one, jobs))  # in job order whatever finishes first
        return trajs, groups

    def to_batch(self, trajs: list[Trajectory], groups: list[int]) -> RolloutBatch:
        renderer = ChatRenderer(self.engine.tokenizer)
        seqs = [trajectory_sequence(t, renderer) for t in trajs]
        rewards = [t.reward if t.reward is not None else 0.0 for t in trajs]
        pad = self.engine.tokenizer.pad_token_id
        pad = pad if pad is not None else self.engine.tokenizer.eos_token_id
        return collate(seqs, rewards, groups, [t.ending.value for t in trajs], pad)

    def old_logprobs(self, batch: RolloutBatch) -> float:
        """Recompute pi_old with the trainer (default) or keep the engine's; returns the mean
        |engine - trainer| gap on sampled tokens."""
        return recompute_old_logprobs(self.backend, self.cfg, batch)[0]

    def correct(
        self, update: UpdateBatch, trainer_lp: torch.Tensor, sampler_lp: torch.Tensor
    ) -> tuple[UpdateBatch | None, dict[str, float]]:
        """`update` with the rows `algo.off_policy` masks given loss mask 0 (still counted in
        the normaliser, as compact-filtered rows are), and its `offpolicy/*` metrics; None when
        no row is left to train."""
        a = self.cfg.algo
        fix = off_policy_correction(a.off_policy)
        mask = update.rollout.loss_mask
        found = fix(trainer_lp, sampler_lp, mask, low=a.is_low, high=a.is_high, level=a.is_level)
        metrics = found.metrics()
        if bool(found.keep.all()):
            return update, metrics
        live = found.keep
        if not bool(live.any()):
            return None, metrics
        kept = UpdateBatch(
            rollout=update.rollout.select(live),
            advantages=update.advantages[live],
            loss_mask=update.loss_mask[live],
            denominator=update.denominator,
        )
        return kept, metrics

    def advantages(self, batch: RolloutBatch) -> tuple[UpdateBatch | None, FilterCounts]:
        a = self.cfg.algo
        filt = compact_filter(
            batch.endings,
            batch.rewards,
            batch.loss_mask,
            a.mask_endings,
            a.keep_masked_in_baseline,
            a.drop_endings,
        )
        rows = filt.keep_rows
        if not bool(rows.any()):
            return None, filt.counts  # every rollout failed for infrastructure reasons
        adv = advantage_estimator(a.adv_estimator)(
            filt.rewards[rows], batch.group_ids[rows], filt.baseline_mask[rows]
        )
        mask = filt.loss_mask[rows]
        # The normaliser counts every kept row, masked ones included (algos.loss_denominator);
        # only then are rows without a trained token left out: they add exactly zero to the
        # loss and its gradient, and cost a full forward/backward each.
        denominator = loss_denominator(mask, a.loss_agg, a.loss_constant)
        live = mask.any(dim=1)
        if not bool(live.any()):
            return None, filt.counts  # every kept rollout was compact-filtered
        kept = batch.select(rows)
        update = UpdateBatch(
            rollout=kept.select(live),
            advantages=expand_to_tokens(adv, mask)[live].float(),
            loss_mask=mask[live],
            denominator=denominator,
        )
        return update, filt.counts

    def run_step(self) -> dict[str, Any]:
        times: dict[str, float] = {}
        t0 = last = time.monotonic()

        def tick(name: str) -> None:
            nonlocal last
            now = time.monotonic()
            times[name], last = now - last, now

        got = self._take_batch()
        tick("rollout")  # what the trainer waited for this step's batch
        exposed = times["rollout"]
        if self.cfg.rollout.max_staleness and self.step + 1 < self.cfg.run.steps:
            self._start_next()
        trajs, groups = got.trajectories, got.groups
        self._save_trajectories(trajs)
        batch = self.to_batch(trajs, groups)
        update, counts = self.advantages(batch)
        extra: dict[str, float] = {}
        gap = 0.0
        if update is not None:
            sampler_lp = update.rollout.old_logprobs.clone()  # the engine's, before recompute
            gap, trainer_lp = recompute_old_logprobs(self.backend, self.cfg, update.rollout)
            update, extra = self.correct(update, trainer_lp, sampler_lp)
        tick("old_logprobs")
        # No trained token (all rows dropped, compact-filtered or masked): no optimizer step.
        stats = self.backend.train_step(update) if update is not None else None
        tick("update")
        if isinstance(self.pending, Future):  # the next step's episodes, sampled meanwhile
            self.pending = self.pending.result()
            tick("wait_next_rollout")
            exposed += times["wait_next_rollout"]
        self.push_weights()
        tick("push_weights")
        self.step += 1
        times["step"] = time.monotonic() - t0
        times["generation_wall"] = got.seconds
        times["generation_exposed"] = exposed
        if got.engine_busy is not None:
            times["engine_busy"] = got.engine_busy
        times.update(episode_seconds(trajs))
        flat = step_metrics(self.step, batch, counts, stats, gap, times)
        flat.update(integrity_metrics(trajs))
        flat.update(timing_metrics(trajs))
        flat.update(extra)
        flat.update(staleness_metrics(trajs, self.step - 1))
        record = StepRecord.from_flat(flat).flat()  # typed: a key no section declares is kept
        self.log.write(record)
        if self.step % self.cfg.run.save_every == 0 or self.step == self.cfg.run.steps:
            pending = self.pending if isinstance(self.pending, Collected) else None
            save_checkpoint(
                self.run_dir / "checkpoints",
                self.step,
                self.backend,
                self.cursor,
                self.cfg.run.keep_checkpoints,
                self.engine.tokenizer,
                files={PENDING: pending.dumps()} if pending is not None else None,
            )
        return record

    def _take_batch(self) -> Collected:
        """This step's batch: the one sampled during the last step (max_staleness 1, or read
        back from the checkpoint), else sampled now by the engine's weights."""
        pending, self.pending = self.pending, None
        if isinstance(pending, Future):
            pending = pending.result()
        if pending is not None:
            if pending.step != self.step:
                raise RuntimeError(
                    f"the pending batch was sampled for step {pending.step + 1}, not "
                    f"{self.step + 1}: the checkpoint and the run disagree"
                )
            return pending
        return self._sample(self.cursor.take(self.cfg.rollout.tasks_per_step), self.step, self.step)

    def _start_next(self) -> None:
        """Sample step self.step + 1's batch in the background on the engine's weights (the
        tasks are taken now, in order: the cursor a checkpoint saves already holds them)."""
        task_ids = self.cursor.take(self.cfg.rollout.tasks_per_step)
        if self._background is None:
            self._background = ThreadPoolExecutor(1, thread_name_prefix="next-rollout")
        self.pending = self._background.submit(self._sample, task_ids, self.step + 1, self.step)

    def _sample(self, task_ids: list[int], step: int, version: int) -> Collected:
        """Step `step`'s episodes on the weights the engine holds now: `version`, the optimizer
        steps they have seen."""
        start, busy = time.monotonic(), getattr(self.engine, "busy_s", None)
        trajs, groups = self.collect(task_ids, step)
        trajs = [t.model_copy(update={"policy_version": version}) for t in trajs]
        after = getattr(self.engine, "busy_s", None)
        engine = after - busy if busy is not None and after is not None else None
        return Collected(step, trajs, groups, time.monotonic() - start, engine)

    def _save_trajectories(self, trajs: list[Trajectory]) -> None:
        folder = self.run_dir / "trajectories"
        folder.mkdir(exist_ok=True)
        lines = "".join(t.model_dump_json() + "\n" for t in trajs)
        (folder / f"step-{self.step + 1:06d}.jsonl").write_text(lines)

    def train(self, progress: Any = None) -> list[dict[str, Any]]:
        """Run the remaining steps; returns their metrics records."""
        out = []
        try:
            while self.step < self.cfg.run.steps:
                out.append(self.run_step())
                if progress is not None:
                    progress(out[-1])
        finally:
            self.close()
        return out

    def close(self) -> None:
        """Close the metrics log, let a background batch's episodes end (their sandboxes are
        closed by their own episodes) and stop the scheduler's actors (idempotent)."""
        if self._background is not None:
            self._background.shutdown(wait=True, cancel_futures=True)
            self._background = None
        if self.log is not None:
            self.log.close()
        if self.scheduler is not None:
            self.scheduler.shutdown()


def recompute_old_logprobs(
    backend: Any, cfg: TrainConfig, batch: RolloutBatch
) -> tuple[float, torch.Tensor]:
    """The trainer's log-probs [B, T] of `batch`'s sampled tokens, made its pi_old unless
    rollout.old_logprobs is `engine`; with the mean |engine - trainer| gap on them."""
    mask = batch.loss_mask.bool()
    trainer_lp = backend.forward_logprobs(batch, positions=batch.loss_mask)
    diff = (trainer_lp - batch.old_logprobs)[mask].abs()
    if cfg.rollout.old_logprobs == "recompute":
        batch.old_logprobs = torch.where(mask, trainer_lp, 0.0)
    return (float(diff.mean()) if diff.numel() else 0.0), trainer_lp


def train_from_files(
    config: str | Path, overrides: list[str], out: str | Path | None = None, resume: bool = False
) -> Path:
    """Load and validate a profile + overrides, then `train_run`; returns runs/ID."""
    return train_run(load_config(config, overrides), out, resume)


def train_run(cfg: TrainConfig, out: str | Path | None = None, resume: bool = False) -> Path:
    """`deepswe-train train` on a validated config: set up (or resume) runs/ID, train, export
    the final model; returns runs/ID."""
    run_dir = Path(out) if out is not None else Path("runs") / cfg.run.name
    if not resume and latest_checkpoint(run_dir / "checkpoints") is not None:
        raise ConfigError(f"{run_dir} already holds checkpoints: pass --resume or another --out")
    trainer = Trainer.setup(cfg, run_dir, resume=resume)
    records = trainer.train()
    fired = [r["step"] for r in records if r.get("limits/fired") or r.get("reward/infra_rows")]
    if fired:  # the seed alone no longer decides these steps: say so where the run ends
        print(
            f"note: wall-clock limits fired or infrastructure failed in step(s) "
            f"{', '.join(map(str, fired))} (metrics.jsonl limits/*, reward/infra_rows): another "
            "run with the same seed may differ from there on",
            file=sys.stderr,
        )
    export_final(run_dir)
    return run_dir


def export_final(run_dir: Path) -> Path:
    """Copy the last checkpoint's HF-format model to runs/ID/final, which `make eval` loads."""
    ckpt = latest_checkpoint(run_dir / "checkpoints")
    if ckpt is None or not (ckpt / "model").is_dir():
        raise FileNotFoundError(f"{run_dir}/checkpoints holds no model to export")
    final, tmp = run_dir / "final", run_dir / ".final.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(ckpt / "model", tmp)
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    return final
