"""Sandbox overheads: ours against a harness without a resident helper, Docker and Kubernetes.

Baselines (what a harness that execs once per command does):
- "raw docker": `docker run -d ... sleep infinity` on the same offline network as ours, one
  `docker exec` per command, `docker rm -f`.
- "k8s exec/cmd": a pod from the same spec, one `pods/exec` per command through the client's
  `stream()` helper (as R2E-Gym's pod backend does), then delete.
Ours: DockerSandbox / KubernetesSandbox: one helper stream per sandbox, one JSON message per
command. Kubernetes runs against the test API server (environments/tests/k8s_server.py, whose
pods are Docker containers), so its numbers are the protocol's overhead on one machine, not a
cluster's: no scheduling, pulls or network hops.

Prints medians over N repetitions and ratios (below 1 means the first is faster).
Run: .venv/bin/python bench/sandbox.py [--n 5] [--calls 40] [--no-k8s]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from deepswe.env.images import ensure_base_image
from deepswe.env.sandbox import SandboxLimits
from deepswe.env.sandbox.docker import DockerSandbox, client
from deepswe.env.sandbox.offline import ensure_offline_network

COMMANDS = ["true", "ls /usr/lib > /dev/null", "python3 -c 'print(1)'", "cat /etc/os-release"]
METRICS = ["ready (s)", "per tool call (ms)", "teardown (s)"]
Round = tuple[float, float, float]


def _docker(*args: str) -> str:
    return subprocess.run(["docker", *args], check=True, capture_output=True, text=True).stdout


def _timed(start, call, stop) -> Round:
    """(seconds to ready, seconds per call, seconds to tear down) of one sandbox's life."""
    t0 = time.perf_counter()
    handle = start()
    ready = time.perf_counter() - t0
    t1 = time.perf_counter()
    for i in range(ARGS.calls):
        call(handle, COMMANDS[i % len(COMMANDS)])
    per_call = (time.perf_counter() - t1) / ARGS.calls
    t2 = time.perf_counter()
    stop(handle)
    return ready, per_call, time.perf_counter() - t2


def raw_docker(image: str) -> Round:
    network = ensure_offline_network(client())

    def start() -> str:
        cid = _docker("run", "-d", "--init", "--network", network, image, "sleep", "infinity")
        _docker("exec", cid.strip(), "true")  # ready = first command answered, as for ours
        return cid.strip()

    return _timed(
        start,
        lambda cid, cmd: _docker("exec", "-w", "/", cid, "bash", "-c", cmd),
        lambda cid: _docker("rm", "-f", cid),
    )


def ours(cls, image: str, **kw) -> Round:
    # Docker's close() confirms the removal in the background; teardown waits for it here, to
    # compare with `docker rm -f`.
    return _timed(
        lambda: cls(image, SandboxLimits(), workdir="/", **kw),
        lambda sb, cmd: sb.run(cmd),
        lambda sb: sb.close(wait=True) if isinstance(sb, DockerSandbox) else sb.close(),
    )


def k8s_exec_per_command(image: str, kubeconfig: str) -> Round:
    from kubernetes import client as k8s
    from kubernetes.stream import stream

    from deepswe.env.sandbox.kubernetes import load_configuration, pod_manifest

    cfg, ns = load_configuration(kubeconfig)
    api = k8s.CoreV1Api(k8s.ApiClient(cfg))  # its own client: stream() patches the one it gets

    def exec_(name: str, cmd: str) -> str:
        argv = ["bash", "-c", cmd]
        return stream(api.connect_get_namespaced_pod_exec, name, ns, command=argv, stdout=True)

    def start() -> str:
        name = f"bench-{time.monotonic_ns()}"
        api.create_namespaced_pod(ns, pod_manifest(name, image, SandboxLimits(), {"bench": "1"}))
        while api.read_namespaced_pod(name, ns).status.phase != "Running":
            time.sleep(0.2)  # the backend's own poll interval
        exec_(name, "true")
        return name

    return _timed(start, exec_, lambda name: api.delete_namespaced_pod(name, ns))


def _test_cluster(folder: Path):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "environments" / "tests"))
    from k8s_server import serve

    server, cluster = serve(folder / "kubeconfig")
    return server, cluster, str(folder / "kubeconfig")


def _table(columns: dict[str, list[Round]], ratios: list[tuple[str, str]]) -> None:
    med = {c: [statistics.median(r[i] for r in rs) for i in range(3)] for c, rs in columns.items()}
    head = f"{'metric':<22}" + "".join(f"{c:>16}" for c in med)
    head += "".join(f"{a + ' / ' + b:>34}" for a, b in ratios)
    print(head)
    for i, name in enumerate(METRICS):
        scale = 1000 if "ms" in name else 1
        row = f"{name:<22}" + "".join(f"{m[i] * scale:>16.3f}" for m in med.values())
        row += "".join(f"{med[a][i] / med[b][i]:>34.2f}" for a, b in ratios)
        print(row)


def main() -> None:
    image = ensure_base_image("bookworm")
    columns = {
        "raw docker": [raw_docker(image) for _ in range(ARGS.n)],
        "deepswe docker": [ours(DockerSandbox, image) for _ in range(ARGS.n)],
    }
    ratios = [("deepswe docker", "raw docker")]
    if ARGS.k8s:
        from deepswe.env.sandbox.kubernetes import KubernetesSandbox

        with tempfile.TemporaryDirectory() as tmp:
            server, cluster, kubeconfig = _test_cluster(Path(tmp))
            try:
                columns["k8s exec/cmd"] = [
                    k8s_exec_per_command(image, kubeconfig) for _ in range(ARGS.n)
                ]
                columns["deepswe k8s"] = [
                    ours(KubernetesSandbox, image, kubeconfig=kubeconfig) for _ in range(ARGS.n)
                ]
            finally:
                server.shutdown()
                cluster.shutdown()
        ratios += [("deepswe k8s", "k8s exec/cmd"), ("deepswe k8s", "deepswe docker")]
    print(f"image {image}; {ARGS.n} sandboxes x {ARGS.calls} commands each; medians")
    _table(columns, ratios)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=5, help="repetitions (medians are printed)")
    ap.add_argument("--calls", type=int, default=40, help="commands per sandbox")
    ap.add_argument("--no-k8s", dest="k8s", action="store_false", help="Docker columns only")
    ARGS = ap.parse_args()
    main()
