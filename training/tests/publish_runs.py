"""Run folders for the publish tests, in the exact shape the trainer and `deepswe-eval run`
write them: the evaluation's card, episodes, SWE-bench files and report come from deepswe.eval's
own writers (make_card + open_run, RunStore.save, write_swebench_files, build_report), over two
real toy tasks. Imported by the publish tests beside hub_server.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from deepswe.data.toy import make_toy_tasks, write_tasks
from deepswe.env.grading.outcomes import Outcome
from deepswe.env.policies import PolicySpec
from deepswe.env.trajectory import Ending, Trajectory
from deepswe.eval.card import make_card, open_run, served_weights
from deepswe.eval.config import EvalConfig
from deepswe.eval.report import build_report
from deepswe.eval.store import EpisodeRecord, EpisodeStatus
from deepswe.eval.swebench_io import write_swebench_files

CLI = str(Path(sys.executable).with_name("deepswe-train"))
TOKEN = "hf_SENTINELtokenNEVERwritten0123456789"
MODEL = "tiny-swe"  # the name the endpoint serves the model under


def train_run(root: Path) -> Path:
    """A training run folder: final/ and one kept checkpoint, HF files plus optimizer state."""
    run = root / "train-run"
    for folder, weights in (
        (run / "final", b"W" * 4096),
        (run / "checkpoints" / "step-000005" / "model", b"V" * 2048),
    ):
        folder.mkdir(parents=True)
        (folder / "config.json").write_text('{"model_type": "qwen3"}')
        (folder / "model.safetensors").write_bytes(weights)
        (folder / "tokenizer.json").write_text("{}")
        (folder / "optimizer.pt").write_bytes(b"not published")
    (run / "config.yaml").write_text("run: {name: t, steps: 5}\nmodel: {path: Qwen/Qwen3-32B}\n")
    (run / "metrics.jsonl").write_text('{"step": 1, "loss": 0.5}\n')
    return run


def _record(task, run: int, ok: bool, infra: bool) -> EpisodeRecord:
    """One stored episode as the runner records it (runner.run_episode's two shapes)."""
    ending = Ending.INFRA_ERROR if infra else Ending.SUBMITTED
    outcome = Outcome.INFRA_ERROR if infra else Outcome.RESOLVED if ok else Outcome.UNRESOLVED
    traj = Trajectory(
        instance_id=task.instance_id,
        policy="openai",
        ending=ending,
        messages=[{"role": "user", "content": "fix"}],
        outcome=outcome,
        patch=task.gold_patch if ok else "",
        reward=None if infra else float(ok),
    )
    status = EpisodeStatus.INFRA_ERROR if infra else EpisodeStatus.GRADED
    return EpisodeRecord(
        instance_id=task.instance_id,
        run=run,
        repo=task.repo,
        status=status,
        outcome=outcome,
        reason="docker: sandbox died" if infra else "",
        started_at=1.0,
        finished_at=2.5,
        trajectory=traj,
    )


def eval_run(
    root: Path,
    served: Path | None,
    *,
    name: str = "eval-run",
    policy: str = "openai",
    missing: int = 0,
    infra: int = 0,
) -> Path:
    """An evaluation of 2 toy tasks x 2 runs (Pass@1 0.75) by an endpoint serving the folder
    `served` (None: an endpoint whose weights could not be read); the last `missing` episodes
    never stored, the first `infra` ones infra errors after every retry."""
    tasks = make_toy_tasks(root / f"{name}-src", n=2)
    spec = (
        PolicySpec(name="openai", model=MODEL, base_url="http://127.0.0.1:8000/v1", seed=1)
        if policy == "openai"
        else PolicySpec(name=policy)
    )
    cfg = EvalConfig(
        dataset=str(write_tasks(tasks, root / f"{name}-tasks.jsonl")), policy=spec, runs=2
    )
    record = served_weights(MODEL, str(served) if served else None) if policy == "openai" else None
    store, card = open_run(root / name, make_card(cfg, tasks, record))
    episodes = [(t, k) for t in tasks for k in range(card.runs)]
    for n, (task, k) in enumerate(episodes[: len(episodes) - missing]):
        store.save(_record(task, k, ok=k == 0 or task is tasks[0], infra=n < infra))
    write_swebench_files(store, tasks, card.runs, MODEL)
    build_report(store.root)
    return store.root


def env(endpoint: str, home: Path) -> dict:
    return {
        **os.environ,
        "HF_ENDPOINT": endpoint,
        "HF_TOKEN": TOKEN,
        "HF_HUB_DISABLE_XET": "1",
        "HF_HOME": str(home),
        "HF_HUB_DISABLE_TELEMETRY": "1",
    }


def publish(
    root: Path, environ: dict, *extra: str, ev: str = "eval-run", repo: str = "tester/tiny-swe"
) -> subprocess.CompletedProcess:
    """`deepswe-train publish root/train-run --eval root/<ev> --repo <repo> ...`."""
    argv = [
        CLI,
        "publish",
        str(root / "train-run"),
        "--eval",
        str(root / ev),
        "--repo",
        repo,
        "--staging",
        str(root / "stage"),
        *extra,
    ]
    return subprocess.run(argv, capture_output=True, text=True, env=environ, timeout=120)
