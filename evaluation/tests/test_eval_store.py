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

from deepswe.env.agent.loop import EpisodeLimits
from deepswe.eval import protocol as P
from deepswe.eval.store import EpisodeRecord, EpisodeStatus, RunStore

WRITER = """
import sys
from deepswe.eval.store import EpisodeRecord, EpisodeStatus, RunStore
store = RunStore(sys.argv[1])
big = "x" * 2_000_000  # large records make a kill mid-write likely
k = 0
while True:
    store.save(EpisodeRecord(instance_id=f"t{k % 5}", run=k // 5, repo="a/b",
               status=EpisodeStatus.GRADED, outcome="resolved", trajectory={"patch": big}))
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
        assert rec.trajectory["patch"] == "x" * 2_000_000
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


def _card(**over) -> P.ProtocolCard:
    base = dict(
        dataset="d.jsonl",
        dataset_sha256="abc",
        instance_ids=["t1", "t2"],
        policy="gold",
        runs=2,
        limits=EpisodeLimits(),
        prompt_sha256=P.prompt_sha256("eval"),
        infra_retries=2,
    )
    return P.ProtocolCard(**{**base, **over})


def test_resume_refuses_another_protocol_but_not_other_workers():
    P.check_resume(_card(), _card(workers=8, base_url="http://x", code_version="v2"))
    with pytest.raises(P.ProtocolMismatch) as err:
        P.check_resume(_card(), _card(runs=3, limits=EpisodeLimits(max_steps=50)))
    msg = str(err.value)
    assert "runs: on disk 2, asked 3" in msg and "limits" in msg


def test_cli_refuses_to_resume_with_a_different_protocol(tmp_path):
    """Regression: a resume with other --runs must stop before touching the run folder."""
    from deepswe.eval.toy import make_toy_tasks, write_tasks

    tasks = make_toy_tasks(tmp_path / "src", n=2)
    data = write_tasks(tasks, tmp_path / "tasks.jsonl")
    out = tmp_path / "run"
    out.mkdir()
    card = _card(
        dataset=str(data),
        dataset_sha256=P.tasks_sha256(sorted(tasks, key=lambda t: t.instance_id)),
        instance_ids=sorted(t.instance_id for t in tasks),
    )
    (out / "config.json").write_text(card.model_dump_json())
    before = (out / "config.json").read_text()
    cli = Path(sys.executable).with_name("deepswe-eval")
    args = [str(cli), "run", "--dataset", str(data), "--policy", "gold", "--out", str(out)]
    res = subprocess.run([*args, "--runs", "3"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2, res.stderr
    assert "different protocol" in res.stderr and "runs: on disk 2, asked 3" in res.stderr
    assert (out / "config.json").read_text() == before and not (out / "episodes").exists()
    env = dict(os.environ, DOCKER_HOST="unix:///nonexistent.sock")  # no episode can start
    res = subprocess.run(
        [*args, "--runs", "2"], capture_output=True, text=True, timeout=120, env=env
    )
    # the same protocol is accepted; every episode is then an infra error (no engine): the
    # report is written and counts them apart, and the run exits 3, not 0
    assert "resuming" in res.stderr and res.returncode == 3, res.stderr
    assert "4 episode(s) are still infra_error after 2 retries" in res.stderr
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["counts"] == {"infra_error": 4}
    res = subprocess.run(  # the same command again retries them, and says so
        [*args, "--runs", "2", "--max-infra-errors", "4"],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert "retrying 4 infra_error episodes" in res.stderr and res.returncode == 0, res.stderr
