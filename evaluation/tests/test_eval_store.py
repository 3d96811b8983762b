"""The run folder: atomic episode files under SIGKILL, resume bookkeeping, protocol refusal."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from deepswe.data.toy import make_toy_tasks, write_tasks
from deepswe.env.agent.loop import EpisodeLimits
from deepswe.env.policies import PolicySpec
from deepswe.env.sandbox import SandboxLimits
from deepswe.eval.card import ProtocolMismatch, check_resume, make_card
from deepswe.eval.config import EvalConfig
from deepswe.eval.store import EpisodeRecord, EpisodeStatus, RunStore

WRITER = """
import sys
from deepswe.eval.store import EpisodeRecord, EpisodeStatus, RunStore
from deepswe.env.trajectory import Trajectory
store = RunStore(sys.argv[1])
big = "x" * 2_000_000  # large records make a kill mid-write likely
k = 0
while True:
    store.save(EpisodeRecord(instance_id=f"t{k % 5}", run=k // 5, repo="a/b",
               status=EpisodeStatus.GRADED, outcome="resolved",
               trajectory=Trajectory(instance_id="t", policy="p", messages=[],
                                     ending="submitted", patch=big)))
    k += 1
"""


def test_records_survive_sigkill_whole_or_not_at_all(tmp_path):
    """Kills a writer at random moments: every episode file on disk must parse in full."""
    rng = random.Random(7)
    for _ in range(4):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)])
        time.sleep(rng.uniform(0.3, 1.2))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    store = RunStore(tmp_path)
    files = list(store.episodes_dir.glob("*/run-*.json"))
    assert files, "the writer never finished a record"
    for rec in store.records():  # raises on a torn file
        assert rec.trajectory.patch == "x" * 2_000_000
    stray = len(list(store.episodes_dir.glob("*/.*.tmp")))
    assert store.clean() == stray and not list(store.episodes_dir.glob("*/.*.tmp"))


def test_done_lists_exactly_the_stored_results(tmp_path):
    """An infra_error record is stored (nothing is lost) but is not a result: a resumed run
    tries that episode again; a graded record replaces it."""
    store = RunStore(tmp_path)
    for iid, k in [("a", 0), ("a", 1), ("b", 1)]:
        store.save(
            EpisodeRecord(instance_id=iid, run=k, repo="r", status=EpisodeStatus.INFRA_ERROR)
        )
    store.save(
        EpisodeRecord(
            instance_id="a", run=1, repo="r", status=EpisodeStatus.GRADED, outcome="resolved"
        )
    )
    assert store.done() == {("a", 1)}
    assert len(store.records()) == 3
    assert [r.status for r in store.records() if (r.instance_id, r.run) == ("a", 1)] == [
        EpisodeStatus.GRADED
    ]
    with pytest.raises(ValueError):
        store.episode_path("../evil", 0)


def test_resume_refuses_a_changed_protocol_naming_each_field(tmp_path):
    """A resume with a changed run count, step limit or sandbox limit is refused, each field
    named; operational settings (workers, endpoint, tolerated infra errors) may change."""
    tasks = make_toy_tasks(tmp_path, n=2)
    base = EvalConfig(runs=2, policy=PolicySpec(name="gold"))
    moved = base.model_copy(update={"workers": 8, "max_infra_errors": 3})
    check_resume(make_card(base, tasks), make_card(moved, tasks))
    changed = base.model_copy(
        update={
            "runs": 3,
            "episode": EpisodeLimits(max_steps=50),
            "sandbox": SandboxLimits(memory="1g"),
        }
    )
    with pytest.raises(ProtocolMismatch) as err:
        check_resume(make_card(base, tasks), make_card(changed, tasks))
    msg = str(err.value)
    assert "eval.runs: on disk 2, asked 3" in msg
    assert "eval.episode: on disk" in msg and '"max_steps": 50' in msg
    assert "eval.sandbox: on disk" in msg and '"memory": "1g"' in msg
    with pytest.raises(ProtocolMismatch, match="dataset_sha256"):
        check_resume(make_card(base, tasks), make_card(base, tasks[:1] + tasks[:1]))
    seeded = base.model_copy(update={"policy": PolicySpec(name="gold", seed=1)})
    with pytest.raises(ProtocolMismatch, match="eval.policy.seed: on disk null, asked 1"):
        check_resume(make_card(base, tasks), make_card(seeded, tasks))


def test_cli_refuses_to_resume_with_a_different_protocol(tmp_path):
    """Regression: a resume with another eval.runs must stop before touching the run folder."""
    tasks = make_toy_tasks(tmp_path / "src", n=2)
    data = write_tasks(tasks, tmp_path / "tasks.jsonl")
    out = tmp_path / "run"
    out.mkdir()
    cfg = EvalConfig(dataset=str(data), policy=PolicySpec(name="gold"), runs=2)
    card = make_card(cfg, sorted(tasks, key=lambda t: t.instance_id))
    (out / "config.json").write_text(card.model_dump_json())
    before = (out / "config.json").read_text()
    cli = Path(sys.executable).with_name("deepswe-eval")
    args = [str(cli), "run", "--dataset", str(data), "eval.policy.name=gold", "--out", str(out)]
    res = subprocess.run([*args, "eval.runs=3"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2, res.stderr
    assert "different protocol" in res.stderr and "eval.runs: on disk 2, asked 3" in res.stderr
    assert (out / "config.json").read_text() == before and not (out / "episodes").exists()
    env = dict(os.environ, DOCKER_HOST="unix:///nonexistent.sock")  # no episode can start
    res = subprocess.run(
        [*args, "eval.runs=2"], capture_output=True, text=True, timeout=120, env=env
    )
    # the same protocol is accepted; every episode is then an infra error (no engine): the
    # report is written and counts them apart, and the run exits 3, not 0
    assert "resuming" in res.stderr and res.returncode == 3, res.stderr
    assert "4 episode(s) are still infra_error after 2 retries" in res.stderr
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["counts"] == {"infra_error": 4}
    res = subprocess.run(  # the same command again retries them, and says so
        [*args, "eval.runs=2", "eval.max_infra_errors=4"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert "retrying 4 infra_error episodes" in res.stderr and res.returncode == 0, res.stderr
