"""Fleets of Docker sandboxes at once: ours against raw docker SDK calls, and the rollout engine.

Modes (each prints a table; ratios below 1 mean ours is faster):
  fleet    N sandboxes requested at the same moment, each: start, 5-10 tool calls, close.
           Baseline "raw SDK": containers.create + start, one exec_run per call, remove(force),
           from N threads with the SDK's 300 s read timeout (what a harness without admission
           does). Ours: DockerSandbox (admission gate, attach-started helper). Columns: ok,
           failed, orphans (the run's containers still there DRAIN_S after every thread
           returned), start p50/p95 (request to ready, queueing included), wall (until every
           thread returned), drained (seconds more until the engine had none of the run's
           containers: removals confirmed in the background). `--light`: 1 call each.
  ready    one sandbox at a time, alternating: bare `docker run -d --init` on the offline
           network + `docker exec CID true` (ready = first command answered) against
           DockerSandbox + its first run("true"); medians.
  sweep    start throughput against starts in flight (the admission limit): N sandboxes
           (start, 1 call, close) per limit; starts a second and admission-to-ready p50/p95.
  rollout  deepswe.env.episode.run_task with the gold scripted policy over the toy tasks, C
           episodes in flight (E in all). Ideal = C / mean(episode seconds outside sandbox
           start and close): the rate if sandboxes cost nothing, the rest of each episode as
           measured under the same load.
Run: .venv/bin/python bench/fleet.py fleet --n 64 256 [--light] [--no-raw]
     .venv/bin/python bench/fleet.py ready|sweep|rollout [options]
Every container carries the label deepswe.bench=<run id>; the run removes its own at the end.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import docker

from deepswe.env.images import ensure_base_image
from deepswe.env.sandbox import SandboxLimits, backend_class
from deepswe.env.sandbox.admission import set_limit, status
from deepswe.env.sandbox.docker import DockerSandbox
from deepswe.env.sandbox.docker_gc import collect
from deepswe.env.sandbox.offline import ensure_offline_network
from deepswe.env.sandbox.owner import own_labels

COMMANDS = ["true", "ls /usr/lib > /dev/null", "python3 -c 'print(1)'", "cat /etc/os-release"]
LIMITS = SandboxLimits(memory="512m", pids=256)
RUN = uuid.uuid4().hex[:10]
BENCH = "deepswe.bench"
TOY_DATE = "2025-01-01T00:00:00+00:00"
DRAIN_S = 30.0


@dataclass
class Column:
    name: str
    n: int
    starts: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    wall: float = 0.0
    drained: float | None = None  # seconds after `wall` until the engine had none of the run's
    orphans: int = 0

    def row(self) -> str:
        p50, p95 = _pct(self.starts, 50), _pct(self.starts, 95)
        drained = "never" if self.drained is None else f"+{self.drained:.1f}"
        return (
            f"{self.name:<14}{self.n:>6}{len(self.starts):>6}{len(self.errors):>8}"
            f"{self.orphans:>9}{p50:>10.2f}{p95:>10.2f}{self.wall:>9.1f}{drained:>9}"
        )


def _pct(xs: list[float], q: int) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(q / 100 * (len(xs) - 1)))]


def _calls(i: int, light: bool) -> list[str]:
    k = 1 if light else random.Random(i).randint(5, 10)
    return [COMMANDS[(i + j) % len(COMMANDS)] for j in range(k)]


def ours(cls: type, image: str, i: int, light: bool, col: Column) -> None:
    t0 = time.monotonic()
    sb = cls(image, LIMITS, workdir="/", labels={BENCH: RUN})
    col.starts.append(time.monotonic() - t0)
    try:
        for cmd in _calls(i, light):
            if sb.run(cmd).exit_code != 0:
                raise RuntimeError(f"{cmd!r} failed")
    finally:
        sb.close()


def raw(api: docker.APIClient, image: str, network: str, i: int, light: bool, col: Column):
    t0 = time.monotonic()
    host_config = api.create_host_config(
        init=True,
        network_mode=network,
        mem_limit="512m",
        memswap_limit="512m",
        pids_limit=256,
        nano_cpus=10**9,
    )
    labels = {**own_labels(), BENCH: RUN}  # gc'able like ours if this process dies
    cid = api.create_container(image, ["sleep", "infinity"], labels=labels, host_config=host_config)
    api.start(cid["Id"])
    col.starts.append(time.monotonic() - t0)
    try:
        for cmd in _calls(i, light):
            ex = api.exec_create(cid["Id"], ["bash", "-c", cmd])
            api.exec_start(ex["Id"])
            if api.exec_inspect(ex["Id"])["ExitCode"] != 0:
                raise RuntimeError(f"{cmd!r} failed")
    finally:
        api.remove_container(cid["Id"], force=True)


def _mine() -> int:
    engine = docker.from_env(timeout=600).api
    return len(engine.containers(all=True, filters={"label": f"{BENCH}={RUN}"}))


def at_once(name: str, n: int, one: Callable[[int, Column], None], watch: bool) -> Column:
    """`n` threads released together, each running `one(i, col)`."""
    col, gate = Column(name, n), threading.Barrier(n + 1)

    def worker(i: int) -> None:
        gate.wait()
        try:
            one(i, col)
        except Exception as exc:
            col.errors.append(f"{type(exc).__name__}: {str(exc)[:120]}")

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    stop = threading.Event()
    if watch:
        threading.Thread(target=_progress, args=(stop,), daemon=True).start()
    gate.wait()
    t0 = time.monotonic()
    for t in threads:
        t.join()
    col.wall = time.monotonic() - t0
    stop.set()
    # Removals confirmed in the background (ours) or by the engine (auto-remove) count as done
    # once they are; what is still there after DRAIN_S is orphaned.
    while (left := _mine()) and time.monotonic() - t0 - col.wall < DRAIN_S:
        time.sleep(0.5)
    col.orphans = left
    col.drained = None if left else time.monotonic() - t0 - col.wall
    return col


def _progress(stop: threading.Event) -> None:
    while not stop.wait(10.0):
        now = status("docker")
        if now is not None:
            print(f"  [{time.strftime('%H:%M:%S')}] {now.line()}", file=sys.stderr, flush=True)


def _clean(label: str) -> str:
    t0 = time.monotonic()
    report = collect(everything=True, selector={BENCH: RUN}, max_seconds=900, call_timeout_s=60)
    left, until = _mine(), time.monotonic() + 10
    while left and time.monotonic() < until:  # removals the engine had in progress finish
        time.sleep(0.5)
        left = _mine()
    return f"{label}: removed {len(report.removed)} in {time.monotonic() - t0:.1f}s, {left} left"


def fleet(args) -> None:
    image = ensure_base_image("bookworm")
    network = ensure_offline_network(docker.from_env())
    api = docker.from_env(timeout=300, max_pool_size=max(args.n) + 8).api
    print(f"image {image}; run {RUN}; admission limit {DockerSandbox.admission().limit}")
    print(
        f"{'column':<14}{'N':>6}{'ok':>6}{'failed':>8}{'orphans':>9}{'p50 s':>10}{'p95 s':>10}"
        f"{'wall s':>9}{'drained':>9}"
    )
    cls = backend_class(args.ours)
    for n in args.n:
        name = "deepswe" if args.ours == "docker" else args.ours.partition(":")[0]
        cols = [at_once(name, n, lambda i, c: ours(cls, image, i, args.light, c), True)]
        print(cols[-1].row(), flush=True)
        print("  " + _clean("cleanup"), file=sys.stderr)
        if args.raw:
            one = lambda i, c: raw(api, image, network, i, args.light, c)  # noqa: E731
            cols.append(at_once("raw SDK", n, one, False))
            print(cols[-1].row(), flush=True)
            print("  " + _clean("cleanup of raw's orphans (gc)"), file=sys.stderr)
            a, b = cols
            print(
                f"  deepswe / raw SDK: wall {a.wall / b.wall:.2f}, start p95 "
                f"{_pct(a.starts, 95) / _pct(b.starts, 95):.2f}"
            )
        for col in cols:
            for err in sorted(set(col.errors))[:3]:
                print(f"  {col.name} error ({col.errors.count(err)}x): {err}", file=sys.stderr)


def ready(args) -> None:
    image = ensure_base_image("bookworm")
    network = ensure_offline_network(docker.from_env())

    def docker_cli(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run(["docker", *argv], check=True, capture_output=True, text=True)

    def bare() -> float:
        t0 = time.perf_counter()
        cid = docker_cli(
            "run",
            "-d",
            "--init",
            "--network",
            network,
            "--label",
            f"{BENCH}={RUN}",
            image,
            "sleep",
            "infinity",
        ).stdout.strip()
        docker_cli("exec", cid, "true")
        took = time.perf_counter() - t0
        docker_cli("rm", "-f", cid)
        return took

    def mine() -> float:
        t0 = time.perf_counter()
        sb = DockerSandbox(image, LIMITS, workdir="/", labels={BENCH: RUN})
        sb.run("true")
        took = time.perf_counter() - t0
        sb.close()
        return took

    mine()  # the first start of a process sweeps and checks the network: not a start's cost
    times = {"bare docker run": [], "deepswe": []}
    for _ in range(args.n):
        times["bare docker run"].append(bare())
        times["deepswe"].append(mine())
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"image {image}; network {network}; {args.n} alternating starts each; medians")
    for k, v in med.items():
        print(f"  {k:<16} ready {v:.3f} s (min {min(times[k]):.3f})")
    print(f"  deepswe / bare docker run: {med['deepswe'] / med['bare docker run']:.2f}")


def sweep(args) -> None:
    image = ensure_base_image("bookworm")
    print(f"{args.n} sandboxes (start, 1 call, close) per limit; run {RUN}")
    print(f"{'limit':>6}{'starts/s':>10}{'ready p50':>11}{'ready p95':>11}{'failed':>8}")
    for limit in args.limits:
        set_limit("docker", limit)

        def one(i: int, col: Column) -> None:
            sb = DockerSandbox(image, LIMITS, workdir="/", labels={BENCH: RUN})
            col.starts.append(sb.ready_seconds)  # admission to ready
            try:
                sb.run("true")
            finally:
                sb.close()

        col = at_once(f"limit {limit}", args.n, one, False)
        rate = args.n / col.wall
        p50, p95 = _pct(col.starts, 50), _pct(col.starts, 95)
        print(f"{limit:>6}{rate:>10.2f}{p50:>11.2f}{p95:>11.2f}{len(col.errors):>8}", flush=True)


_episode = threading.local()  # sandbox seconds of the episode this thread runs


class TimedDockerSandbox(DockerSandbox):
    """DockerSandbox that adds its start (queue included) and close to its thread's episode."""

    def __init__(self, *args, **kwargs) -> None:
        t0 = time.monotonic()
        try:
            super().__init__(*args, **{"labels": {BENCH: RUN}, **kwargs})
        finally:
            _episode.start += time.monotonic() - t0
            _episode.starts += 1

    def close(self) -> None:
        t0 = time.monotonic()
        super().close()
        _episode.close += time.monotonic() - t0


def rollout(args) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from deepswe.data.toy import make_toy_tasks
    from deepswe.env.episode import run_task
    from deepswe.env.images.task import ensure_task_image
    from deepswe.env.policies import PolicySpec, make_policy

    limits = SandboxLimits(memory="1g", pids=256)
    # The same repository, path and commit dates each run: the same task image, built once.
    root = Path(tempfile.gettempdir()) / "deepswe-bench-fleet"
    shutil.rmtree(root, ignore_errors=True)
    os.environ.update(GIT_AUTHOR_DATE=TOY_DATE, GIT_COMMITTER_DATE=TOY_DATE)
    tasks = make_toy_tasks(root, n=4)
    image = ensure_task_image(tasks[0], log=lambda _: None)

    def episode(k: int) -> tuple[float, float, float, int, str]:
        task = tasks[k % len(tasks)]
        _episode.start = _episode.close = 0.0
        _episode.starts = 0
        t0 = time.monotonic()
        traj = run_task(
            task,
            make_policy(PolicySpec(name="gold"), task, k),
            backend="__main__:TimedDockerSandbox",
            sandbox_limits=limits,
        )
        took = time.monotonic() - t0
        return took, _episode.start, _episode.close, _episode.starts, traj.outcome.value

    stop = threading.Event()
    threading.Thread(target=_progress, args=(stop,), daemon=True).start()
    t0 = time.monotonic()
    with ThreadPoolExecutor(args.concurrency) as pool:
        done = list(pool.map(episode, range(args.episodes)))
    wall = time.monotonic() - t0
    stop.set()
    outcomes = {o: sum(1 for *_, x in done if x == o) for o in {x for *_, x in done}}
    per_ep, start, close = (statistics.fmean(d[i] for d in done) for i in range(3))
    ideal = args.concurrency / (per_ep - start - close)
    print(
        f"image {image}; {args.episodes} gold episodes over {len(tasks)} toy tasks, "
        f"{args.concurrency} in flight; outcomes {outcomes}"
    )
    print(
        f"  wall {wall:.1f} s, {args.episodes / wall:.3f} episodes/s; mean episode "
        f"{per_ep:.2f} s, of which sandbox starts (queue included) {start:.2f} s, closes "
        f"{close:.2f} s"
    )
    starts = sum(d[3] for d in done)
    print(
        f"  ideal (sandboxes free): {ideal:.3f} episodes/s; measured / ideal "
        f"{args.episodes / wall / ideal:.2f}"
    )
    print(
        f"  sandboxes started: {starts / len(done):.1f} an episode, {starts / wall:.2f} starts/s "
        f"(the engine's ceiling: `sweep`'s best starts/s); episodes/s at that ceiling = "
        f"starts/s / {starts / len(done):.1f}"
    )


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    p = sub.add_parser("fleet", help="N sandboxes at once, ours against raw SDK calls")
    p.add_argument("--n", type=int, nargs="+", default=[64, 256])
    p.add_argument("--light", action="store_true", help="one tool call per sandbox")
    p.add_argument("--no-raw", dest="raw", action="store_false", help="our column only")
    p.add_argument("--ours", default="docker", help="the backend: docker, or module:Class")
    p.set_defaults(run=fleet)
    p = sub.add_parser("ready", help="one sandbox's start against a bare docker run")
    p.add_argument("--n", type=int, default=15)
    p.set_defaults(run=ready)
    p = sub.add_parser("sweep", help="start throughput against the admission limit")
    p.add_argument("--n", type=int, default=48)
    p.add_argument("--limits", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32])
    p.set_defaults(run=sweep)
    p = sub.add_parser("rollout", help="run_task episodes in flight against the ideal")
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--episodes", type=int, default=128)
    p.set_defaults(run=rollout)
    ARGS = ap.parse_args()
    try:
        ARGS.run(ARGS)
    finally:
        print(_clean("final cleanup of this run's containers"), file=sys.stderr)
