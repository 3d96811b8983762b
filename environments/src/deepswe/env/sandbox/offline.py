"""The offline network: sandboxes with no way out whose connects hang, as on a machine with no
route out that answers nothing.

The reference harness's containers (swebench's) have a network, and some tests expect what
that gives: requests' TestTimeout connects to an unroutable address and wants its ConnectTimeout.
Without any interface (`network_mode: none`) such a connect fails at once ("Network is
unreachable") and the test fails where the reference passes it. So sandboxes without network
join this Docker bridge network instead, whose every packet the host drops:

- `iptables -I DOCKER-USER -s SUBNET -j DROP` and `-d SUBNET`: nothing forwarded leaves or
  arrives (DOCKER-USER runs before Docker's own forwarding rules);
- `iptables -I INPUT -s SUBNET -j DROP`: the host's own services (an inference server on
  0.0.0.0) are out of reach too;
- inter-container traffic off and no masquerading (`enable_icc`, `enable_ip_masquerade`), so
  two sandboxes cannot talk;
- its Linux bridge named after the engine (`bridge_name`): a second engine on the same host (a
  second dockerd, rootless beside rootful) makes its own network and must not take over this
  one's bridge, which once moved the first engine's gateway to another subnet.
A connect to any address then times out; a name lookup fails after the resolver's timeout.

The rules are the host's: this needs root on the machine the engine runs on (the engine is on
a local socket). `SandboxLimits.offline`: "drop" requires it; "auto" (the default) falls back to
no interface at all where this host cannot set the rules, said once on stderr (a docker-group
user, a remote engine); "unreachable" always runs with no interface. The Kubernetes backend's equivalent is the deny-all
NetworkPolicy (infra/kubernetes/networkpolicy.yaml): packets dropped by the CNI.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading

import docker.errors

from deepswe.env.sandbox import SandboxStartError

NETWORK = "deepswe-offline"
BRIDGE = "deepswe-off0"  # the name before bridge_name; a network made with it stays as it is
LABEL = "deepswe.offline"
_lock = threading.Lock()
_ready: str | None = None  # the network's name once its rules are in place (this process)


def _iptables(*args: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["iptables", "-w", *args], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return subprocess.CompletedProcess(["iptables", *args], 127, "", str(exc))


def _rules(subnet: str) -> list[tuple[str, ...]]:
    return [
        ("DOCKER-USER", "-s", subnet, "-j", "DROP"),
        ("DOCKER-USER", "-d", subnet, "-j", "DROP"),
        ("INPUT", "-s", subnet, "-j", "DROP"),
    ]


def _local_engine() -> bool:
    """The engine answers on a local socket (DOCKER_HOST unset or unix://), not over TCP/SSH."""
    return os.environ.get("DOCKER_HOST", "unix://").startswith("unix://")


def ensure_offline_network(client) -> str:
    """The offline network's name, created and its drop rules in place (once per process)."""
    global _ready
    with _lock:
        if _ready is not None:
            return _ready
        if not _local_engine():
            raise SandboxStartError(
                "the offline network needs the Docker engine on this machine (its packets are "
                "dropped by this host's iptables); set sandbox.offline=unreachable to run "
                "sandboxes with no network interface instead"
            )
        try:
            net = client.networks.get(NETWORK)
        except docker.errors.NotFound:
            net = _create(client)
        subnet = net.attrs["IPAM"]["Config"][0]["Subnet"]
        for rule in _rules(subnet):
            if _iptables("-C", *rule).returncode == 0:
                continue
            added = _iptables("-I", *rule)
            if added.returncode != 0:
                raise SandboxStartError(
                    f"cannot drop the offline network's packets (iptables -I {' '.join(rule)}: "
                    f"{added.stderr.strip() or 'exit ' + str(added.returncode)}); run as root on "
                    "the engine's machine, or set sandbox.offline=unreachable"
                )
        _ready = NETWORK
        return _ready


def bridge_name(client) -> str:
    """The Linux bridge of this engine's offline network: `deepswe-` and the start of the
    engine's ID, so two engines on one host never share it (15 characters at most: IFNAMSIZ)."""
    engine = re.sub(r"[^a-z0-9]", "", str(client.info().get("ID", "")).lower())
    return f"deepswe-{engine[:7]}" if engine else BRIDGE


def _create(client):
    try:
        client.networks.create(
            NETWORK,
            driver="bridge",
            labels={LABEL: "1"},
            options={
                "com.docker.network.bridge.name": bridge_name(client),
                "com.docker.network.bridge.enable_icc": "false",
                "com.docker.network.bridge.enable_ip_masquerade": "false",
            },
        )
    except docker.errors.APIError as exc:
        if exc.status_code != 409:  # 409: another process made it first
            raise SandboxStartError(f"cannot create the offline network: {exc}") from exc
    return client.networks.get(NETWORK)


_fallback_said = False


def offline_network_mode(client, *, required: bool) -> str:
    """The network mode of a sandbox without network: the offline network, or with `required`
    false and no way to set it up here, "none" (no interface), said once on stderr."""
    global _fallback_said
    if _fallback_said and not required:
        return "none"
    try:
        return ensure_offline_network(client)
    except SandboxStartError as exc:
        if required:
            raise
        with _lock:
            if not _fallback_said:
                _fallback_said = True
                print(
                    f"deepswe: sandboxes without network get no interface ({exc}); connects "
                    "fail at once instead of hanging until their timeout",
                    file=sys.stderr,
                )
        return "none"


__all__ = ["NETWORK", "bridge_name", "ensure_offline_network", "offline_network_mode"]
