"""Recorded R2E-Gym trajectories replayed through the OpenEnv server and through our own loop
(issue #46: "replayed trajectories give identical observations through the server and through
deepswe-env").

Each `trajectory_*.json` of tests/data/r2e-gym (or $DEEPSWE_R2E_TRAJECTORIES) is an R2E-Gym
agent run whose `ds` holds its dataset row. The row is loaded as deepswe-eval loads it
(deepswe.data.loaders), its environment prepared from the clones in $DEEPSWE_R2E_MIRROR
(deepswe.env.recipes.r2e_gym.environment.prepare_all, what `deepswe-eval serve` runs at start),
and the model's recorded replies (deepswe.env.policies.replay.recorded_replies, fed by a
ScriptedPolicy) are played twice: by `deepswe.env.episode.run_task`, the code deepswe-eval and
training run, and through a `deepswe-eval serve` process (given the raw rows as a task file and
the mirror) by openenv's unmodified EnvClient over /ws. Both must give the same opening
messages, the same user message and tool output (and exit code) at every step, and the same
ending, outcome, reward and patch.

Twice per trajectory, each under its own server: every recorded reply played (max_steps 31,
the longest recording's length: the episode ends where the recording did, at its `finish`),
and cut at max_steps 12 (the long ones end `max_steps`, the patch so far graded). The context
budget is the client's (a ScriptedPolicy counts no tokens) and the wall time generous, so
neither limit can end one side and not the other.

Nothing is normalised: every tool output of these trajectories came out byte-identical on both
sides in every run here (their commands print no timing, object address or temp path). If one
ever does, add the smallest rule that covers it here, applied to both sides, and say so in this
docstring.

Skipped without $DEEPSWE_R2E_MIRROR (CI has no mirror and no budget for these images), and per
trajectory when the mirror holds no clone of its repository (orange3's, here). Rows installed
with Python 3.7, 3.8 or 3.10 also need $DEEPSWE_HOST_PYTHONS (bench/r2e_gym.py's docstring).
A row whose image this engine lacks is built first (bench/r2e_gym.py builds them): minutes.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from deepswe.data.loaders.files import iter_raw_rows
from deepswe.data.loaders.r2e_gym import r2e_row_to_task
from deepswe.data.toy import write_tasks
from deepswe.env.agent.loop import EpisodeLimits
from deepswe.env.episode import run_task
from deepswe.env.policies.replay import recorded_replies
from deepswe.env.policies.scripted import ScriptedPolicy
from deepswe.env.recipes.r2e_gym.environment import mirror_path, prepare_all
from deepswe.env.sandbox import SandboxLimits

pytest.importorskip("openenv", reason="the openenv extra (evaluation[openenv]) is not installed")

sys.path.insert(0, str(Path(__file__).parent))
from openenv_fixtures import play, start_server  # noqa: E402

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
TRAJECTORIES = Path(os.environ.get("DEEPSWE_R2E_TRAJECTORIES") or ROOT / "tests/data/r2e-gym")
FILES = sorted(TRAJECTORIES.glob("trajectory_*.json"))
MIRROR = os.environ.get("DEEPSWE_R2E_MIRROR")
STEP_LIMITS = {"all": 31, "cut": 12}  # 31: the longest recording here, every reply played
EPISODE = {"wall_timeout_s": 3600.0, "action_timeout_s": 120.0}
SANDBOX = {"memory": "2g", "pids": 1024}


def _task(path: Path):
    (raw,) = [r for r in iter_raw_rows(path) if r.data is not None]
    return r2e_row_to_task(raw.data)


@pytest.fixture(scope="module", params=list(STEP_LIMITS))
def served(request, tmp_path_factory):
    """The episode limits, the rows whose repository the mirror holds ({instance_id: (raw
    task, trajectory file)}) and a server over them, given the raw rows and the mirror as a
    user would."""
    if not MIRROR:
        pytest.skip("set DEEPSWE_R2E_MIRROR to a folder of git clones <owner>__<name>")
    rows = {}
    for path in FILES:
        task = _task(path)
        if mirror_path(Path(MIRROR), task).is_dir():
            rows[task.instance_id] = (task, path)
    if not rows:
        pytest.skip(f"$DEEPSWE_R2E_MIRROR ({MIRROR}) holds none of these rows' repositories")
    limits = {"max_steps": STEP_LIMITS[request.param], **EPISODE}
    root = tmp_path_factory.mktemp("openenv-replay")
    data = write_tasks([t for t, _ in rows.values()], root / "tasks.jsonl")
    srv = start_server(
        root,
        data,
        repo_mirror=MIRROR,
        episode=limits,
        sandbox=SANDBOX,
        max_sessions=2,
        session_ttl_s=900.0,
    )
    yield EpisodeLimits(**limits), rows, srv
    srv.stop()
    assert not srv.wait_for_no_containers(), "the server left sandboxes behind"


@pytest.mark.parametrize("path", FILES, ids=[p.stem.removeprefix("trajectory_") for p in FILES])
def test_a_recorded_trajectory_gives_identical_observations(served, path):
    limits, rows, server = served
    raw = _task(path)
    if raw.instance_id not in rows:
        pytest.skip(f"$DEEPSWE_R2E_MIRROR has no clone of {raw.repo} ({mirror_path(MIRROR, raw)})")
    (task,), unsupported = prepare_all([raw], mode="auto", mirror=Path(MIRROR))
    assert not unsupported, unsupported
    replies = recorded_replies(path)
    ours = run_task(
        task,
        ScriptedPolicy(replies),
        limits=limits,
        sandbox_limits=SandboxLimits(**SANDBOX),
    )
    first, seen = play(server.url, ScriptedPolicy(replies), task.instance_id, timeout=900)
    assert ours.steps, ours.ending_detail
    assert len(seen) == len(ours.steps) == min(len(replies), limits.max_steps)
    assert first.messages == ours.messages[:2]
    user = [m["content"] for m in ours.messages[2:] if m["role"] == "user"]
    assert [o.text for o in seen if o.text] == user
    for i, (o, s) in enumerate(zip(seen, ours.steps, strict=True)):
        assert o.tool_output == s.observation, f"step {i}: {s.assistant[-300:]}"
        if not o.done:  # the last observation carries the verdict, not an exit code
            assert o.exit_code == s.exit_code, f"step {i}"
    end = seen[-1]
    assert (end.ending, end.outcome, end.reward, end.patch) == (
        ours.ending.value,
        ours.outcome.value,
        ours.reward,
        ours.patch,
    )
    assert end.outcome != "infra_error", end.reason
    if len(replies) > limits.max_steps:
        assert end.ending == "max_steps"
    print(f"{task.instance_id}: {len(seen)} steps identical, {end.ending}, {end.outcome}")
