"""Sandbox overheads against raw Docker, on the same base image and the same commands.

Baseline ("raw docker"): `docker run -d ... sleep infinity` to start, one `docker exec` per
command, `docker rm -f` to tear down: what a harness without a resident helper does.
Ours: DockerSandbox (create + start + copy the helper + one `docker exec -i` stream), then one
JSON message per command over that stream, then close().

Prints medians over N repetitions and ratios ours / raw (below 1 means ours is faster).
Run: .venv/bin/python bench/sandbox.py [--n 10] [--calls 50]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time

from deepswe.env.images import ensure_base_image
from deepswe.env.sandbox import SandboxLimits
from deepswe.env.sandbox.docker import DockerSandbox

COMMANDS = ["true", "ls /usr/lib > /dev/null", "python3 -c 'print(1)'", "cat /etc/os-release"]


def _docker(*args: str) -> str:
    return subprocess.run(["docker", *args], check=True, capture_output=True, text=True).stdout


def raw_round(image: str, calls: int) -> tuple[float, float, float]:
    t0 = time.perf_counter()
    cid = _docker("run", "-d", "--init", "--network", "none", image, "sleep", "infinity").strip()
    _docker("exec", cid, "true")  # ready = first command answered, as for ours
    ready = time.perf_counter() - t0
    t1 = time.perf_counter()
    for i in range(calls):
        _docker("exec", "-w", "/", cid, "bash", "-c", COMMANDS[i % len(COMMANDS)])
    per_call = (time.perf_counter() - t1) / calls
    t2 = time.perf_counter()
    _docker("rm", "-f", cid)
    return ready, per_call, time.perf_counter() - t2


def our_round(image: str, calls: int) -> tuple[float, float, float]:
    t0 = time.perf_counter()
    sb = DockerSandbox(image, SandboxLimits(), workdir="/")
    ready = time.perf_counter() - t0
    t1 = time.perf_counter()
    for i in range(calls):
        sb.run(COMMANDS[i % len(COMMANDS)])
    per_call = (time.perf_counter() - t1) / calls
    t2 = time.perf_counter()
    sb.close()
    return ready, per_call, time.perf_counter() - t2


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=5, help="repetitions (medians are printed)")
    ap.add_argument("--calls", type=int, default=40, help="commands per sandbox")
    args = ap.parse_args()
    image = ensure_base_image("bookworm")
    raw = [raw_round(image, args.calls) for _ in range(args.n)]
    ours = [our_round(image, args.calls) for _ in range(args.n)]
    print(f"image {image}; {args.n} sandboxes x {args.calls} commands each; medians")
    print(f"{'metric':<22}{'raw docker':>12}{'deepswe':>12}{'ratio':>8}")
    for i, name in enumerate(["ready (s)", "per tool call (ms)", "teardown (s)"]):
        r = statistics.median(x[i] for x in raw)
        o = statistics.median(x[i] for x in ours)
        scale = 1000 if "ms" in name else 1
        print(f"{name:<22}{r * scale:>12.3f}{o * scale:>12.3f}{o / r:>8.2f}")


if __name__ == "__main__":
    main()
