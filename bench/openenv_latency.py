"""Per-step latency through the OpenEnv server against our in-process loop (issue #46: <= 1.2x).

Baseline "in-process": what `run_task` does for an episode, in this process: the task's sandbox
started (`open_sandbox`) and prepared (`ToolEnv.prepare`), each scripted reply taken by
`ToolEnv.take` (parse, run the tool in the sandbox, the observation and reminder), and the end
(`ToolEnv.finish`: the patch; the sandbox closed; `grade_trajectory`: the reward run). Ours
"server": the same replies sent by openenv's client (`SWEEnvClient`, WebSocket) to a
`deepswe-eval serve` process on this machine, which runs the same `ToolEnv` and grader: each
`reset` and `step` timed from the client's call to its return, so the ratio is what the door
(serialisation, the socket, openenv's session and the server's event loop) adds to a step.

The same tasks (the toy tasks: one repository, one image, four bugs) and the same replies for
both: view the buggy file, a search, a shell command, the gold patch's edits through
file_editor, the tests, then finish. Episodes alternate between the two paths (which goes first
swaps every round), so drift on a shared machine falls on both alike. Printed per phase (reset:
sandbox start to ready; tool step, all and by kind; end: finish and grading): median, mean and
p90 in ms, and the server / in-process ratios of medians (and of means); the headline is the
tool step's median ratio.

Run: .venv/bin/python bench/openenv_latency.py [--rounds 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from deepswe.data.task import Task
from deepswe.data.toy import make_toy_tasks, write_tasks
from deepswe.env.agent.loop import EpisodeEnd, EpisodeLimits, ToolEnv
from deepswe.env.episode import grade_trajectory, open_sandbox
from deepswe.env.policies import Reply
from deepswe.env.policies.scripted import FINISH, patch_to_actions
from deepswe.env.sandbox import SandboxLimits
from deepswe.eval.openenv.client import SWEEnvClient
from deepswe.eval.openenv.models import SWEAction
from deepswe.eval.openenv.process import ServerDidNotStart, start_serve

LIMITS = EpisodeLimits(max_steps=30, scaffold="deepswe", prompt_variant="train")
SANDBOX = SandboxLimits(cpus=1, memory="1g", pids=256)
PHASES = ("reset", "step", "end")


def _call(name: str, **params: str) -> str:
    body = "".join(f"<parameter={k}>{v}</parameter>\n" for k, v in params.items())
    return f"<function={name}>\n{body}</function>"


def script(task: Task) -> list[tuple[str, str]]:
    """The replies of one episode, each with a label: reads, a shell command, the fix, the
    tests (then finish)."""
    return [
        ("view", _call("file_editor", command="view", path="/testbed/toycalc/ops.py")),
        ("search", _call("search", search_term="def ", path="/testbed/toycalc")),
        ("bash", _call("execute_bash", cmd="cd /testbed && git status --short && ls tests")),
        *[("edit", a) for a in patch_to_actions(task.gold_patch or "")],
        ("pytest", _call("execute_bash", cmd="cd /testbed && python -m pytest -q tests")),
    ]


def in_process(task: Task, replies: list[tuple[str, str]]) -> dict[str, list[float]]:
    """One episode through ToolEnv in this process: seconds per phase."""
    t0 = time.perf_counter()
    image, sandbox = open_sandbox(task, "docker", SANDBOX)
    env = ToolEnv(task, "bench", sandbox, LIMITS)
    env.prepare()
    out = {"reset": [time.perf_counter() - t0], "step": [], "end": []}
    for label, text in replies:
        t = time.perf_counter()
        env.take(Reply(text=text))
        _add(out, label, time.perf_counter() - t)
    t = time.perf_counter()
    try:
        env.take(Reply(text=FINISH))
    except EpisodeEnd as exc:
        env.end(exc)
    traj = env.finish()
    sandbox.close()
    traj = grade_trajectory(traj, task, image, "docker", SANDBOX)
    out["end"].append(time.perf_counter() - t)
    assert traj.reward == 1.0, (traj.outcome, traj.ending_detail)
    return out


def through_server(url: str, task: Task, replies: list[tuple[str, str]]) -> dict[str, list[float]]:
    """The same episode as a session of the server: seconds per phase, client side."""
    out: dict[str, list[float]] = {"reset": [], "step": [], "end": []}
    with SWEEnvClient(base_url=url, message_timeout_s=600).sync() as env:
        t = time.perf_counter()
        env.reset(task_id=task.instance_id)
        out["reset"].append(time.perf_counter() - t)
        for label, text in replies:
            t = time.perf_counter()
            env.step(SWEAction(message=text))
            _add(out, label, time.perf_counter() - t)
        t = time.perf_counter()
        result = env.step(SWEAction(message=FINISH))
        out["end"].append(time.perf_counter() - t)
    assert result.done and result.reward == 1.0, result.observation.reason
    return out


def _add(out: dict[str, list[float]], label: str, seconds: float) -> None:
    out["step"].append(seconds)
    out.setdefault(f"step:{label}", []).append(seconds)


def start_server(folder: Path, tasks_file: Path) -> tuple[str, subprocess.Popen]:
    section = {
        "tasks": str(tasks_file),
        "episode": LIMITS.model_dump(),
        "sandbox": SANDBOX.model_dump(),
    }
    try:
        server = start_serve(section, folder)
    except ServerDidNotStart as exc:
        raise SystemExit(str(exc)) from None
    return server.url, server.proc


def _stats(xs: list[float]) -> dict[str, float]:
    xs = sorted(xs)
    return {
        "n": len(xs),
        "median_ms": 1000 * statistics.median(xs),
        "mean_ms": 1000 * statistics.fmean(xs),
        "p90_ms": 1000 * xs[min(len(xs) - 1, int(0.9 * len(xs)))],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5, help="episodes per task and path")
    p.add_argument("--tasks", type=int, default=4, help="toy tasks (1-4)")
    p.add_argument("--json", type=Path, help="also write the numbers here")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="openenv-latency-") as tmp:
        folder = Path(tmp)
        tasks = make_toy_tasks(folder, n=args.tasks)
        tasks_file = write_tasks(tasks, folder / "tasks.jsonl")
        open_sandbox(tasks[0], "docker", SANDBOX)[1].close()  # the image built, a start warmed
        url, proc = start_server(folder, tasks_file)
        times = {path: {ph: [] for ph in PHASES} for path in ("in-process", "server")}
        try:
            through_server(url, tasks[0], script(tasks[0]))  # warm the server's imports
            for r in range(args.rounds):
                for task in tasks:
                    replies = script(task)
                    runs = [
                        ("in-process", lambda t=task, x=replies: in_process(t, x)),
                        ("server", lambda t=task, x=replies: through_server(url, t, x)),
                    ]
                    for path, run in runs if r % 2 == 0 else runs[::-1]:
                        for ph, xs in run().items():
                            times[path].setdefault(ph, []).extend(xs)
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    report(times, args)
    return 0


def report(times: dict[str, dict[str, list[float]]], args: argparse.Namespace) -> None:
    stats = {path: {ph: _stats(xs) for ph, xs in phs.items()} for path, phs in times.items()}
    phases = [*PHASES, *sorted(k for k in stats["server"] if k.startswith("step:"))]
    ratios = {
        ph: stats["server"][ph]["median_ms"] / stats["in-process"][ph]["median_ms"] for ph in phases
    }
    print(f"openenv latency: {args.tasks} toy tasks x {args.rounds} rounds, alternating paths")
    print(f"{'phase':<12} {'path':<11} {'n':>4} {'median ms':>10} {'mean ms':>9} {'p90 ms':>8}")
    for ph in phases:
        for path in ("in-process", "server"):
            st = stats[path][ph]
            print(
                f"{ph:<12} {path:<11} {st['n']:>4} {st['median_ms']:>10.1f} "
                f"{st['mean_ms']:>9.1f} {st['p90_ms']:>8.1f}"
            )
    for ph in phases:
        srv, own = stats["server"][ph], stats["in-process"][ph]
        extra = srv["median_ms"] - own["median_ms"]
        print(
            f"ratio server / in-process, {ph}: medians {ratios[ph]:.3f}x ({extra:+.1f} ms), "
            f"means {srv['mean_ms'] / own['mean_ms']:.3f}x"
        )
    verdict = "meets" if ratios["step"] <= 1.2 else "misses"
    print(f"tool step: {ratios['step']:.3f}x, {verdict} the goal of <= 1.2x")
    if args.json:
        args.json.write_text(json.dumps({"stats": stats, "ratios": ratios}, indent=1))


if __name__ == "__main__":
    sys.exit(main())
