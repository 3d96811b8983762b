"""Hostile input against real Docker sandboxes: after each, the sandbox (or at least the host and
the other sandboxes) is unaffected and the failure is reported for what it is."""

from __future__ import annotations

import subprocess

import docker
import pytest

from deepswe.env.sandbox import SandboxDied, SandboxLimits, SandboxStartError
from deepswe.env.sandbox.docker import LABEL, DockerSandbox, client, gc

pytestmark = pytest.mark.docker
LIMITS = SandboxLimits(command_timeout_s=30, pids=200, memory="256m", cpus=1.0)


@pytest.fixture
def box(base_image):
    with DockerSandbox(base_image, LIMITS, workdir="/") as sb:
        yield sb


def test_fork_bomb_is_contained(box, base_image):
    with DockerSandbox(base_image, LIMITS, workdir="/") as neighbour:
        box.run(":(){ :|:& };:", timeout=5)
        # The call returned and took the whole bomb with it: only init, sleep, the helper, ps.
        procs = box.run("ps -e --no-headers | wc -l", timeout=10)
        assert int(procs.stdout) < 10, procs
        assert neighbour.run("echo fine").stdout == "fine\n"
    assert subprocess.run(["true"]).returncode == 0  # the host can still fork


def test_no_network_by_default(box):
    """The offline network: an interface whose every packet the host drops (sandbox/offline.py;
    test_sandbox_machine.py times the connects)."""
    from deepswe.env.sandbox.docker import client
    from deepswe.env.sandbox.offline import NETWORK

    networks = client().containers.get(box.id).attrs["NetworkSettings"]["Networks"]
    assert set(networks) == {NETWORK}
    # one 1 s DNS attempt, not glibc's 2 x 5 s: every packet is dropped, the lookup fails alike
    r = box.run(
        "RES_OPTIONS='timeout:1 attempts:1' python3 -c \"import urllib.request; "
        "urllib.request.urlopen('http://deb.debian.org', timeout=5)\"",
        timeout=20,
    )
    assert r.exit_code != 0


LOOPBACK_V6 = """
import socket
server = socket.socket(socket.AF_INET6)
server.bind(("::1", 0))
server.listen(1)
client = socket.create_connection(server.getsockname()[:2], timeout=5)
print("connected", server.accept()[1][0])
"""


@pytest.mark.parametrize("offline", ["auto", "unreachable"])
def test_the_loopback_has_ipv6_with_no_way_out(base_image, offline):
    """Tests that bind `::1` pass here as where their statuses were recorded (R2E-Gym's
    aiohttp rows): the loopback has IPv6 on either offline network; nothing else changes."""
    limits = LIMITS.model_copy(update={"offline": offline})
    with DockerSandbox(base_image, limits, workdir="/") as sb:
        sb.write_file("/tmp/v6.py", LOOPBACK_V6)
        r = sb.run("python3 /tmp/v6.py", timeout=20)
        assert r.stdout.strip() == "connected ::1", r.output
        out = sb.run(
            "python3 -c \"import urllib.request; urllib.request.urlopen('http://[2001:db8::1]', timeout=3)\"",
            timeout=20,
        )
        assert out.exit_code != 0


def test_memory_hog_is_killed_not_the_sandbox(box):
    r = box.run("python3 -c 'b = bytearray(1024 * 1024 * 1024)'", timeout=30)
    assert r.exit_code != 0
    assert box.run("echo alive").stdout == "alive\n"


def test_sleeping_forever_ends_at_the_timeout(box):
    r = box.run("sleep 100000", timeout=2)
    assert r.timed_out
    assert "sleep 100000" not in box.run("ps -eo args").stdout


def test_killed_from_outside_raises_sandbox_died(box):
    client().containers.get(box.id).kill()
    with pytest.raises(SandboxDied):
        box.run("echo hi", timeout=5)


def test_missing_image_is_a_start_error():
    with pytest.raises(SandboxStartError, match="not on this engine"):
        DockerSandbox("deepswe/no-such-image:never", LIMITS)


def test_close_removes_the_container(base_image):
    """close() confirms the removal in the background; wait=True waits for it."""
    sb = DockerSandbox(base_image, LIMITS)
    name = sb.id
    sb.close(wait=True)
    with pytest.raises(docker.errors.NotFound):
        client().containers.get(name)


def test_gc_removes_leftovers_of_dead_owners_only(box, base_image):
    orphan = client().containers.run(
        base_image,
        ["sleep", "infinity"],
        detach=True,
        labels={
            LABEL: "1",
            "deepswe.host": __import__("socket").gethostname(),
            "deepswe.owner-pid": "999999999",
        },
    )
    removed = gc()
    assert orphan.name in removed
    assert box.run("echo still here").stdout == "still here\n"
