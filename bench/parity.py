"""Observation parity with R2E-Gym: recorded R2E-Gym agent trajectories replayed through our
agent loop and tools, in each row's image built from source, step by step.

Needs $DEEPSWE_R2E_TRAJECTORIES, a file or folder of R2E-Gym runner output (`trajectory_*.json`:
`trajectory_steps` with each step's thought, action and observation, the dataset row in `ds` or
`env_args.ds`; tests/data/r2e-gym holds five), $DEEPSWE_R2E_MIRROR (clones of the
rows' repositories, as for bench/r2e_gym.py, whose docstring says how incomplete snapshots were
repaired) and, for rows installed with Python 3.7, 3.8 or 3.10, $DEEPSWE_HOST_PYTHONS. The
rewards R2E-Gym recorded come from its run's collection_summary.json: --summary, else
$DEEPSWE_R2E_SUMMARY, else one beside the trajectories, else the trajectory's own `reward`.

For each trajectory: the row's image is built (deepswe.env.recipes.r2e_gym.environment, as bench/r2e_gym.py does),
the recorded assistant messages are replayed (deepswe.env.policies.replay.ReplayPolicy) by
deepswe.env.episode.run_task with max_steps = the recorded steps, prompt_variant "eval", no
context limit and a generous wall time, then the patch is graded as usual. Step i's observation
is compared with R2E-Gym's recorded observation of step i, raw and after this normalisation
(applied to both sides, nothing else):

1. test-runner timings: in a pytest summary line (`=== ... ===`) every number followed by `s`
   and every `(h:mm:ss)`; each pytest `--durations` line (`0.12s call  test_x.py::t`) whole,
   since which tests are slowest is a timing too; unittest's `Ran N tests in 0.123s`. They
   measure the machine, not the tools.
2. directory-walk order: an observation listing what a walk of the tree found (the `search`
   tool, file_editor's directory view, an execute_bash command that is a `grep -r`/`find`) is
   compared as a multiset of lines, trailing blanks dropped: the order is the filesystem's
   readdir order, not the tool's (and the blank R2E-Gym's runner leaves at the end of its
   output falls on whichever line comes last). pytest's `plugins:` header is compared with its
   items sorted, for the same reason: pytest lists plugins in the order importlib.metadata
   finds their distributions, the order site-packages' directory is read.
3. the interpreter's path: R2E-Gym's images ran uv's CPython (`/root/.local/share/uv/python/
   <name>/lib/pythonX.Y/`) in a venv (`.../lib/pythonX.Y/site-packages/`, `/root/.venv/bin/
   python`); ours run Debian's or a host build from other prefixes (/usr/lib/python3.X,
   /opt/venv). Every `<prefix>/lib/pythonX.Y/site-packages/` (and `/usr/lib/python3/
   dist-packages/`) becomes `<site-packages>/`, every other `<prefix>/lib/pythonX.Y/`
   `<stdlib>/`, every `<prefix>/bin/pythonX.Y` `<python>`; and its patch release, `Python
   X.Y.Z` (pytest's header) as `Python X.Y.<patch>`: uv's builds are 3.9.21 and 3.7.9, ours
   pyenv's 3.9.18 and 3.7.16, and neither python.org nor GitHub, where those releases are, can
   be reached from the machine this was built on. The report says how many steps only this
   rule made equal.
4. run-to-run randomness: object addresses (`0x` and 8 to 16 hex digits) and tempfile names
   (`/tmp/tmp` and 8 characters) differ between any two runs on one machine.

Every other difference counts, and is put in the first category whose rule holds: "not
replayed" (our episode ended before the step); "walk order (both cut to 40+40 lines)" (a walk
whose output both sides cut in the middle: which lines survive depends on the order); "image
contents" (a walk's lines on one side, trailing blanks aside, are a sub-multiset of the
other's, or the command is an `ls`: files, sizes or dates one image has and the other lacks);
"invalid function" (the call names no tool of ours); "finish" (finish/submit); "decoding"
(either side mentions a decode error or holds U+FFFD); "timeout"; "exit code" (only the `Exit
code:` line differs); "truncation" (one side is cut in the middle, the other not); "traceback
paths" (equal once every `File "...", line N` location is blanked and caret-only lines are
dropped: another build of the same Python); "warnings/environment" (equal once lines naming
warnings, pytest's platform/plugins/rootdir/cachedir header or versions are dropped); "core
dump" (equal once bash's " (core dumped)" is dropped: whether an aborted process leaves a core
is the host kernel's core_pattern and the container's core limit, not the image's); else
"other".

Prints one table row per trajectory (steps, identical raw, identical after normalisation,
R2E-Gym's recorded reward vs ours), the share identical, then every differing step by category
with an excerpt (the first differing line of each side). Writes results.json under --out (one
entry per trajectory and scaffold; a rerun with the same --out skips those replayed, tries the
others again, and compares the stored texts again) and each replay's texts and patch under
--out/<scaffold>/. --scaffold picks EpisodeLimits.scaffold ("r2e-gym"
mimics R2E-Gym's observations, "deepswe" is ours) where that field exists. Baseline named for
the ratio: R2E-Gym's recorded observations (share identical 1.0 expected).

Run: DEEPSWE_R2E_TRAJECTORIES=DIR DEEPSWE_R2E_MIRROR=DIR DEEPSWE_HOST_PYTHONS=DIR
     .venv/bin/python bench/parity.py --out runs/bench-parity [--ids ...]
     [--scaffold r2e-gym|deepswe] [--no-grade]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from parity_rules import TIMING, compare  # noqa: E402  (normalisation and categories)
from r2e_gym import build, load_rows  # noqa: E402  (bench/r2e_gym.py: rows and image builds)

# --- one trajectory -------------------------------------------------------------------------


def _log(msg: str) -> None:
    print(f"  {msg}", file=sys.stderr, flush=True)


class _Progress:
    """The replay policy, saying which step it is at."""

    def __init__(self, policy, iid: str) -> None:
        self.policy, self.iid, self.name = policy, iid, policy.name

    def reply(self, messages, *, timeout):
        total = len(self.policy.replies)
        _log(f"{self.iid}: step {self.policy.turn + 1}/{total}")
        return self.policy.reply(messages, timeout=timeout)

    def count_tokens(self, messages):
        return None


def recorded_rewards(path: Path | None) -> dict[str, float | None]:
    """{instance_id: reward} from R2E-Gym's collection_summary.json (empty if none is found)."""
    if path is None or not path.is_file():
        return {}
    doc = json.loads(path.read_text())
    return {r["instance_id"]: r.get("reward") for r in doc.get("results", [])}


def replay(path: Path, mirror: Path, out: Path, scaffold: str, grade: bool) -> dict:
    from deepswe.env.agent.loop import EpisodeLimits
    from deepswe.env.agent.parser import parse_action
    from deepswe.env.episode import run_task
    from deepswe.env.policies.replay import ReplayPolicy
    from deepswe.env.recipes.r2e_gym.environment import (
        R2EEnvError,
        R2EUnsupported,
        build_from_source,
    )
    from deepswe.env.sandbox import SandboxLimits
    from deepswe.env.tools import TOOL_NAMES

    record = json.loads(path.read_text())
    recorded = record["trajectory_steps"]
    ((iid, (task, _execution)),) = load_rows(path).items()
    res: dict = {"instance_id": iid, "file": path.name, "scaffold": scaffold}
    res["steps"] = len(recorded)
    res["recorded_exit"] = record.get("exit_reason")
    try:
        task = build_from_source(task, mirror)
    except (R2EUnsupported, R2EEnvError) as exc:
        return {**res, "status": "not_replayed", "why": str(exc)}
    t0 = time.monotonic()
    try:
        res["image"] = build(task)["image"]
    except Exception as exc:  # a benchmark records every failure and goes on
        return {**res, "status": "not_replayed", "why": f"build failed: {str(exc)[-600:]}"}
    res["build_s"] = round(time.monotonic() - t0, 1)
    fields = {
        "max_steps": len(recorded),
        "max_context_tokens": 1 << 30,  # the recording's own limit ended it; never ours
        "wall_timeout_s": 4 * 3600.0,
        "prompt_variant": "eval",
    }
    res["scaffold_applied"] = "scaffold" in EpisodeLimits.model_fields
    if res["scaffold_applied"]:
        fields["scaffold"] = scaffold
    limits = EpisodeLimits(**fields)
    policy = _Progress(ReplayPolicy(path), iid)
    sandbox = SandboxLimits(memory="4g", pids=2048, command_timeout_s=1800)
    t0 = time.monotonic()
    traj = run_task(
        task, policy, limits=limits, backend="docker", sandbox_limits=sandbox, grade=grade
    )
    res["replay_s"] = round(time.monotonic() - t0, 1)
    res["ending"] = traj.ending.value
    res["ending_detail"] = traj.ending_detail[:300]
    res["our_reward"] = traj.reward
    res["our_outcome"] = traj.outcome.value if traj.outcome else None
    texts = []
    for i, rec in enumerate(recorded):
        parsed = parse_action(f"{rec.get('thought', '')}\n\n{rec.get('action', '')}")
        ours = traj.steps[i].observation if i < len(traj.steps) else None
        texts.append(
            {
                "step": i,
                "function": parsed.function_name,
                "parameters": parsed.parameters,
                "recorded": rec["observation"],
                "ours": ours,
            }
        )
    folder = out / scaffold
    folder.mkdir(parents=True, exist_ok=True)
    res["steps_file"] = f"{scaffold}/{iid}.json"
    (out / res["steps_file"]).write_text(json.dumps(texts, indent=1))
    (folder / f"{iid}.patch").write_text(traj.patch)
    res.update(compare(texts, TOOL_NAMES), status="replayed")
    return res


# --- report ---------------------------------------------------------------------------------


def _reward(value) -> str:
    return "-" if value is None else f"{value:.1f}"


def _line(r: dict) -> str:
    if r["status"] != "replayed":
        return f"| {r['instance_id']} | {r['steps']} | not replayed: {r['why'][-120:]!r} | | | | |"
    n = r["steps"]
    return (
        f"| {r['instance_id']} | {n} | {r['raw_same']}/{n} | {r['norm_same']}/{n} "
        f"| {_reward(r.get('recorded_reward'))} | {_reward(r['our_reward'])} | {r['ending']} |"
    )


def report(results: list[dict], scaffold: str) -> None:
    print(f"\n## scaffold {scaffold}\n")
    applied = {r.get("scaffold_applied") for r in results if r["status"] == "replayed"}
    if False in applied:
        print("(EpisodeLimits has no `scaffold` field in some runs: those ran our default loop)\n")
    print(
        "| instance | steps | identical raw | identical normalised | reward R2E-Gym | reward ours "
        "| our ending |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in results:
        print(_line(r))
    done = [r for r in results if r["status"] == "replayed"]
    steps = sum(r["steps"] for r in done)
    raw = sum(r["raw_same"] for r in done)
    norm = sum(r["norm_same"] for r in done)
    if steps:
        print(
            f"\nreplayed {len(done)}/{len(results)} trajectories, {steps} steps: identical raw "
            f"{raw}/{steps} ({raw / steps:.3f}), after normalisation {norm}/{steps} "
            f"({norm / steps:.3f}); baseline R2E-Gym's recorded observations (1.0)"
        )
    print(
        f"normalised on both sides: test timings as {TIMING} (--durations lines whole); "
        "walk outputs (search, directory view, grep -r, find) as multisets of lines, pytest's "
        "plugins: header sorted; the "
        "interpreter's paths (R2E-Gym: uv's CPython under /root/.local/share/uv/python, venvs "
        "/testbed/.venv and /root/.venv; ours: /usr/lib/python3.X, /opt/venv, ...) as "
        "<stdlib>/, <site-packages>/, <python>; its patch release (Python X.Y.Z as "
        "X.Y.<patch>); object addresses and tempfile names"
    )
    used = Counter(rule for r in done for s in r["step_results"] for rule in s.get("rules", []))
    if used:
        print(
            "steps made identical by normalisation, with the rules that applied: "
            + ", ".join(f"{k} {v}" for k, v in used.items())
        )
    both = [(r, s) for r in done for s in r["step_results"] if not s["same_norm"]]
    counts = Counter(s["category"] for _, s in both)
    print(
        "\ndifferences by category: "
        + (", ".join(f"{k} {v}" for k, v in counts.most_common()) or "none")
    )
    for cat, _ in counts.most_common():
        print(f"\n### {cat} ({counts[cat]})")
        for r, s in both:
            if s["category"] == cat:
                print(
                    f"- {r['instance_id']} step {s['step']} [{s['function'] or '-'}]: "
                    f"{s['excerpt']}"
                )
    skipped = [r for r in results if r["status"] != "replayed"]
    if skipped:
        print("\nnot replayed:")
        for r in skipped:
            print(f"- {r['instance_id']}: {r['why'][:300]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ids", nargs="*", help="instance ids (default: every trajectory)")
    ap.add_argument("--out", type=Path, default=Path("runs/bench-parity"))
    ap.add_argument("--scaffold", choices=("r2e-gym", "deepswe"), default="r2e-gym")
    ap.add_argument("--summary", type=Path, help="R2E-Gym's collection_summary.json")
    ap.add_argument("--no-grade", action="store_true", help="compare observations only")
    args = ap.parse_args()
    from deepswe.env.tools import TOOL_NAMES

    trajs, mirror = os.environ.get("DEEPSWE_R2E_TRAJECTORIES"), os.environ.get("DEEPSWE_R2E_MIRROR")
    if not trajs or not mirror:
        # no data here is not a failure of `make bench`: say so and skip
        print(
            "bench/parity.py: set DEEPSWE_R2E_TRAJECTORIES and DEEPSWE_R2E_MIRROR "
            "(see the docstring); skipped"
        )
        return
    root = Path(trajs)
    files = sorted(root.glob("trajectory_*.json")) if root.is_dir() else [root]
    by_id = {f.stem.removeprefix("trajectory_"): f for f in files}
    ids = args.ids or sorted(by_id)
    beside = (root if root.is_dir() else root.parent) / "collection_summary.json"
    summary = args.summary or os.environ.get("DEEPSWE_R2E_SUMMARY") or beside
    rewards = recorded_rewards(Path(summary))
    args.out.mkdir(parents=True, exist_ok=True)
    store = args.out / "results.json"
    results = json.loads(store.read_text()) if store.is_file() else []
    done = {(r["instance_id"], r["scaffold"]) for r in results if r["status"] == "replayed"}
    for n, iid in enumerate(ids, 1):
        if (iid, args.scaffold) in done:
            print(f"[{n}/{len(ids)}] {iid}: done in {store}, skipped", file=sys.stderr)
            continue
        print(f"[{n}/{len(ids)}] {iid}: building and replaying", file=sys.stderr, flush=True)
        r = replay(by_id[iid], Path(mirror), args.out, args.scaffold, not args.no_grade)
        r["recorded_reward"] = rewards.get(iid, json.loads(by_id[iid].read_text()).get("reward"))
        results = [x for x in results if (x["instance_id"], x["scaffold"]) != (iid, args.scaffold)]
        results.append(r)
        store.write_text(json.dumps(results, indent=1))
        if r["status"] == "replayed":
            print(
                f"[{n}/{len(ids)}] {iid}: {r['norm_same']}/{r['steps']} steps identical "
                f"(normalised), reward {_reward(r['our_reward'])} "
                f"(R2E-Gym {_reward(r['recorded_reward'])})",
                file=sys.stderr,
                flush=True,
            )
        else:
            print(f"[{n}/{len(ids)}] {iid}: not replayed", file=sys.stderr, flush=True)
    chosen = [
        r
        for iid in ids
        for r in results
        if (r["instance_id"], r["scaffold"]) == (iid, args.scaffold)
    ]
    for r in chosen:  # compared again: the rules above may be newer than the run
        if r["status"] == "replayed" and (args.out / r.get("steps_file", "-")).is_file():
            r.update(compare(json.loads((args.out / r["steps_file"]).read_text()), TOOL_NAMES))
    store.write_text(json.dumps(results, indent=1))
    report(chosen, args.scaffold)


if __name__ == "__main__":
    main()
