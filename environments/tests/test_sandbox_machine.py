"""What a sandbox shows the tests of the machine, against the reference harness's containers
(swebench's: no CPU quota, a network). Real containers.

- pylint counts CPUs from the cgroup (quota, else shares / 1024, cgroup v1; cpu.max on v2) and
  skips its parallel tests below two: the grading sandbox must read as the host's CPUs;
- requests' TestTimeout connects to an unroutable address and wants a timeout, not an
  immediate "Network is unreachable": an offline sandbox's connects hang until their timeout,
  with no route out (nothing reached, not the host, not another sandbox).
"""

from __future__ import annotations

import os

import pytest

from deepswe.data.task import EnvironmentSpec, HiddenTests, Task, TaskSource, TestSpec
from deepswe.data.toy import git
from deepswe.env.episode import grade_patch
from deepswe.env.grading.outcomes import Outcome
from deepswe.env.sandbox import SandboxLimits
from deepswe.env.sandbox.docker import DockerSandbox

pytestmark = pytest.mark.docker

# pylint 2.15's _query_cpu / _cpu_count (pylint/lint/run.py), restated, then its skip.
CPU_TEST = """
import os
from pathlib import Path

import pytest


def cgroup_cpus():
    v1 = Path("/sys/fs/cgroup/cpu")
    if (v1 / "cpu.cfs_quota_us").is_file():
        quota = int((v1 / "cpu.cfs_quota_us").read_text())
        if quota not in (0, -1):
            return max(1, quota // int((v1 / "cpu.cfs_period_us").read_text()))
        if (v1 / "cpu.shares").is_file():
            return max(1, int((v1 / "cpu.shares").read_text()) // 1024)
    v2 = Path("/sys/fs/cgroup/cpu.max")
    if v2.is_file():
        quota, period = v2.read_text().split()
        if quota != "max":
            return max(1, int(quota) // int(period))
    return None


def cpu_count():
    share, affinity = cgroup_cpus(), len(os.sched_getaffinity(0))
    return affinity if share is None else min(share, affinity)


def test_jobs_score():
    if cpu_count() < 2:
        pytest.skip("Need 2 or more cores.")
    assert cpu_count() == HOST_CPUS
"""


@pytest.fixture(scope="module")
def cpu_task(tmp_path_factory) -> Task:
    host = len(os.sched_getaffinity(0))
    if host < 2:
        pytest.skip("this machine has one CPU: the test would skip under the reference too")
    repo = tmp_path_factory.mktemp("cpus") / "cpus"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "test_cpus.py").write_text(CPU_TEST.replace("HOST_CPUS", str(host)))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "cpus")
    return Task(
        instance_id="cpus__cpus-1",
        repo="cpus/cpus",
        base_commit=git(repo, "rev-parse", "HEAD").strip(),
        problem_statement="-",
        source=TaskSource.CUSTOM,
        environment=EnvironmentSpec(source=str(repo), pip=["pytest"]),
        test_spec=TestSpec(command="python -m pytest -rA test_cpus.py", log_parser="pytest"),
        hidden=HiddenTests(pass_to_pass=["test_cpus.py::test_jobs_score"]),
    )


def test_a_test_that_skips_on_one_cpu_passes_in_the_grading_sandbox(cpu_task):
    """The agent's sandbox keeps its 1-CPU quota; grading has none (SandboxLimits.for_grading)."""
    limits = SandboxLimits(cpus=1.0, memory="1g")
    run = grade_patch(cpu_task, "", sandbox_limits=limits)
    assert run.grade.outcome is Outcome.RESOLVED, run.text
    from deepswe.env.images.task import ensure_task_image

    with DockerSandbox(ensure_task_image(cpu_task, log=lambda _: None), limits) as sb:
        r = sb.run("python -m pytest -rA test_cpus.py")
    assert "SKIPPED" in r.stdout  # a quota of one CPU reads as one CPU, as pylint would see it


CONNECT = (
    'python3 -c "import socket, time; t = time.time()\n'
    "try:\n    socket.create_connection(('{host}', 80), timeout=2); print('connected')\n"
    'except OSError as e: print(type(e).__name__, round(time.time() - t, 1))"'
)


def test_a_connect_to_an_outside_address_times_out(cpu_task):
    from deepswe.env.images.task import ensure_task_image

    image = ensure_task_image(cpu_task, log=lambda _: None)
    with (
        DockerSandbox(image, SandboxLimits(memory="512m")) as a,
        DockerSandbox(image, SandboxLimits(memory="512m")) as b,
    ):
        gateway = a.run("ip route 2>/dev/null | awk '/default/ {print $3}'").stdout.strip()
        peer = b.run("hostname -I").stdout.split()[0]
        for host in ("10.255.255.1", "1.1.1.1", gateway or "172.17.0.1", peer):
            out = a.run(CONNECT.format(host=host), timeout=30).stdout.split()
            assert out[0] == "TimeoutError" and float(out[1]) >= 1.9, (host, out)
    # the network's bridge is this engine's own: a second engine on the host (which once took
    # over a shared name and moved the gateway, turning these timeouts into "No route to host")
    # makes another
    from deepswe.env.sandbox.docker import client
    from deepswe.env.sandbox.offline import BRIDGE, NETWORK, bridge_name

    engine = client()
    name = bridge_name(engine)
    assert name.startswith("deepswe-") and len(name) <= 15 and name != BRIDGE
    made = engine.networks.get(NETWORK).attrs["Options"]["com.docker.network.bridge.name"]
    assert made in (name, BRIDGE)  # BRIDGE: a network made before bridge_name, kept as it is
    with DockerSandbox(image, SandboxLimits(memory="512m", offline="unreachable")) as c:
        out = c.run(CONNECT.format(host="10.255.255.1"), timeout=30).stdout.split()
        assert out[0] == "OSError" and float(out[1]) < 1.0  # no interface: fails at once


def test_where_the_host_cannot_drop_packets_auto_falls_back_and_drop_refuses(monkeypatch, capsys):
    """A remote engine (or a user without root): its host's iptables are out of reach."""
    from deepswe.env.sandbox import SandboxStartError, offline
    from deepswe.env.sandbox.docker import client

    engine = client()
    monkeypatch.setattr(offline, "_ready", None)
    monkeypatch.setattr(offline, "_fallback_said", False)
    monkeypatch.setenv("DOCKER_HOST", "tcp://engine.example:2376")
    with pytest.raises(SandboxStartError, match="sandbox.offline=unreachable"):
        offline.offline_network_mode(engine, required=True)
    assert offline.offline_network_mode(engine, required=False) == "none"
    assert offline.offline_network_mode(engine, required=False) == "none"
    assert capsys.readouterr().err.count("sandboxes without network get no interface") == 1
