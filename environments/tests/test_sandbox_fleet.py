"""A fleet of Docker sandboxes that does not fall over (issue 26): starts wait their turn in
arrival order, and nothing is orphaned: not by a create whose answer is lost, not by a killed
owner, not by a `gc` that meets a slow engine. Real containers; the slow engine is the real one
behind docker_proxy.SlowDocker, driven by the unmodified docker SDK."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path

import docker
import pytest

from deepswe.env.sandbox import SandboxLimits, SandboxStartError
from deepswe.env.sandbox.admission import Admission
from deepswe.env.sandbox.docker import DockerSandbox
from deepswe.env.sandbox.docker_reaper import REAPER

sys.path.insert(0, str(Path(__file__).parent))
from docker_proxy import SlowDocker  # noqa: E402

LIMITS = SandboxLimits(command_timeout_s=30, pids=128, memory="256m")
# the API version is pinned so that importing this file asks the engine nothing: without one the
# docker tests skip (conftest) instead of failing collection
REAL = docker.DockerClient(base_url="unix:///var/run/docker.sock", timeout=120, version="1.41")
CLI = str(Path(sys.executable).with_name("deepswe-env"))


def _containers(run: str) -> list[str]:
    """Names of every container (running or not) with this test's label, on the real socket."""
    found = REAL.api.containers(all=True, filters={"label": f"deepswe.test={run}"})
    return [c["Names"][0].lstrip("/") for c in found]


def _wait_for_none(run: str, seconds: float) -> list[str]:
    end = time.monotonic() + seconds
    while (left := _containers(run)) and time.monotonic() < end:
        time.sleep(0.5)
    return left


@pytest.fixture
def run_label():
    run = uuid.uuid4().hex[:10]
    yield run
    for name in _containers(run):  # whatever a failing test left
        REAL.api.remove_container(name, force=True)


@pytest.fixture
def slow_engine(tmp_path, monkeypatch):
    """Point this process's DOCKER_HOST at a SlowDocker; yields the proxy to set its knobs."""
    proxy = SlowDocker(tmp_path / "docker.sock")
    monkeypatch.setenv("DOCKER_HOST", proxy.url)
    yield proxy
    proxy.close()


# --- admission ----------------------------------------------------------------------------------


def test_admission_is_first_come_first_served_and_bounded():
    gate = Admission("test", limit=2)
    order, inside, most = [], [0], [0]
    lock = threading.Lock()

    def start(i: int) -> None:
        with gate.slot():
            with lock:
                order.append(i)
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            time.sleep(0.05)
            with lock:
                inside[0] -= 1

    threads = []
    for i in range(12):
        threads.append(threading.Thread(target=start, args=(i,)))
        threads[-1].start()
        time.sleep(0.01)  # arrival order is the order of the calls
    for t in threads:
        t.join()
    assert order == list(range(12))
    assert most[0] == 2
    status = gate.status()
    assert (status.queued, status.starting, status.failed) == (0, 0, 0)


def test_admission_reports_queued_starting_ready_and_failed():
    gate = Admission("test", limit=1)
    seen = []
    gate.watch(seen.append)
    let_go = threading.Event()

    def second() -> None:
        with gate.slot():
            let_go.wait(10)

    with gate.slot():
        waiting = threading.Thread(target=second)
        waiting.start()
        while gate.status().queued == 0:
            time.sleep(0.01)
        assert (gate.status().queued, gate.status().starting) == (1, 1)
    let_go.set()
    waiting.join()
    gate.ready()
    with pytest.raises(RuntimeError), gate.slot():
        raise RuntimeError("engine said no")
    status = gate.status()
    assert (status.queued, status.starting, status.ready, status.failed) == (0, 0, 1, 1)
    assert "1 ready" in status.line() and seen[-1] == status


@pytest.mark.docker
def test_a_start_times_out_from_its_admission_not_from_its_queueing(base_image):
    """A start that waited longer than its own timeout for a slot still starts."""
    gate = DockerSandbox.admission()
    limit = gate.limit
    gate.set_limit(1)
    # 6 s to start once admitted: on a loaded engine (CI, the other test worker busy) a create and
    # start took more than 3 s
    limits = LIMITS.model_copy(update={"start_timeout_s": 6.0})
    made: list = []
    try:
        with gate.slot():  # every slot taken for longer than the start's timeout
            t = threading.Thread(target=lambda: made.append(DockerSandbox(base_image, limits)))
            t.start()
            time.sleep(7.0)
        t.join(60)
    finally:
        gate.set_limit(limit)
    (sb,) = made
    try:
        assert sb.queued_seconds >= 6.5
        assert sb.run("echo up").stdout == "up\n"
    finally:
        sb.close()


# --- nothing orphaned ---------------------------------------------------------------------------


@pytest.mark.docker
def test_a_create_whose_answer_is_lost_leaves_no_container(base_image, run_label, slow_engine):
    """The daemon makes the container; its answer comes after the client's timeout."""
    slow_engine.create_answer_delay_s = 6.0
    limits = LIMITS.model_copy(update={"start_timeout_s": 2.0})
    with pytest.raises(SandboxStartError, match="did not start"):
        DockerSandbox(base_image, limits, labels={"deepswe.test": run_label})
    assert slow_engine.creates == 1
    assert REAPER.wait_idle(30)
    assert _wait_for_none(run_label, 5) == []


@pytest.mark.docker
def test_a_create_that_lands_after_the_client_gave_up_is_removed(
    base_image, run_label, slow_engine
):
    """The create reaches the daemon only after the client's timeout: nothing exists when the
    start fails; the container appears later and the reaper removes it."""
    slow_engine.create_request_delay_s = 3.0
    limits = LIMITS.model_copy(update={"start_timeout_s": 1.0})
    with pytest.raises(SandboxStartError):
        DockerSandbox(base_image, limits, labels={"deepswe.test": run_label})
    assert REAPER.pending(), "a lost create must stay wanted until its container is found"
    assert REAPER.wait_idle(60)
    assert _wait_for_none(run_label, 5) == []


OWNER = """
import os, signal, sys
from deepswe.env.sandbox import SandboxLimits
from deepswe.env.sandbox.docker import DockerSandbox
boxes = [DockerSandbox(sys.argv[1], SandboxLimits(memory="256m"), labels={"deepswe.test": sys.argv[2]})
         for _ in range(3)]
boxes[0].run("sleep 1000 > /dev/null 2>&1 &")
print("ready", flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.docker
def test_a_killed_owner_leaves_no_running_sandbox(base_image, run_label):
    """SIGKILL: the helper's input ends, it exits, the engine removes the container."""
    out = subprocess.run(
        [sys.executable, "-c", OWNER, base_image, run_label], capture_output=True, text=True
    )
    assert out.returncode == -signal.SIGKILL and "ready" in out.stdout, out.stderr
    assert _wait_for_none(run_label, 30) == []


ORPHANS = """
import os, signal, sys
from concurrent.futures import ThreadPoolExecutor
import docker
from deepswe.env.sandbox.owner import SANDBOX_ID, own_labels
api = docker.from_env(timeout=120).api
image, run, n, started = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
def make(i):
    name = f"deepswe-orphan-{run}-{i}"
    labels = {**own_labels(), SANDBOX_ID: name, "deepswe.test": run}
    c = api.create_container(image, ["sleep", "infinity"], name=name, labels=labels)
    if i < started:
        api.start(c["Id"])
with ThreadPoolExecutor(8) as pool:
    list(pool.map(make, range(n)))
os.kill(os.getpid(), signal.SIGKILL)
"""


def _orphans(image: str, run: str, n: int, started: int) -> None:
    """`n` sandbox containers of a process that was then killed (`started` of them running):
    what a killed fleet leaves when its creates were answered but nothing else happened."""
    out = subprocess.run(
        [sys.executable, "-c", ORPHANS, image, run, str(n), str(started)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == -signal.SIGKILL, out.stderr
    assert len(_containers(run)) == n


def _gc(url: str, run: str, cache: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "DOCKER_HOST": url, "XDG_CACHE_HOME": str(cache)}
    argv = [CLI, "gc", "--selector", f"deepswe.test={run}", *args]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.docker
def test_gc_removes_50_orphans_on_a_slow_engine_within_its_bound(base_image, run_label, tmp_path):
    """Every answer 0.25 s late: a gc bounded to 2 s says what it did not reach and exits 1;
    the next run continues and removes the rest."""
    _orphans(base_image, run_label, 50, started=10)
    proxy = SlowDocker(tmp_path / "slow.sock", delay_s=0.25)
    try:
        first = _gc(proxy.url, run_label, tmp_path, "--max-seconds", "2", "--parallel", "4")
        second = _gc(proxy.url, run_label, tmp_path, "--max-seconds", "120", "--parallel", "8")
    finally:
        proxy.close()
    assert first.returncode == 1, first.stderr
    assert "not tried" in first.stderr and "run gc again to continue" in first.stderr
    removed_first = int(first.stdout.split()[1])
    not_tried = first.stderr.split("continue): ")[1].split()
    assert removed_first + len(not_tried) == 50
    assert second.returncode == 0, second.stderr
    assert int(second.stdout.split()[1]) == 50 - removed_first
    assert set(not_tried) <= set(second.stdout.split())
    assert _containers(run_label) == []


@pytest.mark.docker
def test_gc_says_what_it_could_not_reach(tmp_path):
    """No engine behind DOCKER_HOST: exit 2 and the reason, nothing claimed removed."""
    env = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/nothing.sock"}
    out = subprocess.run([CLI, "gc"], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 2
    assert "could not list" in out.stderr or "no Docker engine" in out.stderr


FIRST_START = """
import sys, time
import docker
from deepswe.env.sandbox import SandboxLimits
from deepswe.env.sandbox.docker import DockerSandbox
api = docker.from_env().api
with DockerSandbox(sys.argv[1], SandboxLimits(memory="256m")):
    end = time.monotonic() + 60
    while api.containers(all=True, filters={"label": "deepswe.test=" + sys.argv[2]}):
        assert time.monotonic() < end, "the first start's sweep did not remove the orphans"
        time.sleep(0.2)
"""


@pytest.mark.docker
def test_the_next_process_s_first_start_sweeps_a_killed_one_s_sandboxes(base_image, run_label):
    _orphans(base_image, run_label, 3, started=1)
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(FIRST_START), base_image, run_label],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert out.returncode == 0, out.stderr
    assert _containers(run_label) == []


@pytest.mark.docker
def test_kubernetes_starts_wait_at_their_own_gate(base_image, k8s_cluster):
    """Against the test API server: with one slot, two pods asked for at once start one after
    the other, and the gate's status says so."""
    from deepswe.env.sandbox.kubernetes import KubernetesSandbox

    gate = KubernetesSandbox.admission()
    limit, seen = gate.limit, []
    stop = gate.watch(seen.append)
    gate.set_limit(1)
    boxes: list = []

    def start() -> None:
        boxes.append(
            KubernetesSandbox(base_image, LIMITS, workdir="/", kubeconfig=k8s_cluster.kubeconfig)
        )

    try:
        threads = [threading.Thread(target=start) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    finally:
        gate.set_limit(limit)
        stop()
    try:
        assert len(boxes) == 2
        assert max(s.starting for s in seen) == 1 and max(s.queued for s in seen) == 1
        assert max(s.ready for s in seen) >= 2
        assert sorted(round(b.queued_seconds, 1) > 0 for b in boxes) == [False, True]
    finally:
        for b in boxes:
            b.close()
