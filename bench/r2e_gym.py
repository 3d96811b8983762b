"""Real R2E-Gym rows built from source, offline: gold must resolve, empty must not, and every
test's status under gold must equal the row's expected_output_json (what R2E-Gym's own image
gave).

Needs $DEEPSWE_R2E_ROWS, a file or folder of R2E-Gym rows (dataset rows, or R2E-Gym trajectory
files whose `ds` holds the row: tests/data/r2e-gym is one), and $DEEPSWE_R2E_MIRROR,
a folder of git clones `<owner>__<name>` holding the rows' commits (aio-libs__aiohttp,
biolab__orange3, python-pillow__Pillow, numpy__numpy, tornadoweb__tornado, ...). Rows whose
install used Python 3.7, 3.8 or 3.10 need $DEEPSWE_HOST_PYTHONS (deepswe/env/images/hostpython.py).

A clone must hold every object of its rows' base trees; history objects it lacks are cut away at
build time (deepswe/env/images/history.py: the fetched numpy snapshot is cut at 8b48eb0bad by
itself now). The snapshots this was measured on lacked a few large blobs; the bench's clones
were repaired as follows (before the automatic cut), nothing else changed: orange3's Orange/datasets/adult.tab of 2013 (in the 2018 base trees) and
Pillow's Tests/fonts/NotoColorEmoji.ttf, NotoSansJP-Regular.otf and Tests/images/fujifilm.mpo
(in the 2021 base tree) written back with `git hash-object -w` from the Orange3 3.17.0 and
Pillow 8.2.0 sdists on PyPI (same blob ids); Pillow's NotoColorEmoji.ttf of 2020-03 (history
only) behind a shallow boundary at 786eaf11e (the commit that replaced it), its main reset to
10.0.1 and tags from 10.1.0 on dropped (they reach lcms2 tarballs the snapshot lacks); numpy's
f2py research PDF of 2006 behind a shallow boundary at 8b48eb0bad, tags v1.0* dropped.

For each row: the Python R2E-Gym's install kept (the row's setup log), the recipe mapped onto our
images (deepswe.env.recipes.r2e_gym.environment), the environment image built (timed: "env s"; 0 when an earlier row
built it), then history and task layers ("task s"), the layers' sizes, then the gold patch and
the empty patch graded in fresh sandboxes (deepswe.env.episode.grade_patch). Prints one table
row per instance and writes results.json under --out. Baseline named for the ratio: R2E-Gym's
expected statuses (agreement 1.0 expected).

Run: DEEPSWE_R2E_ROWS=DIR DEEPSWE_R2E_MIRROR=DIR .venv/bin/python bench/r2e_gym.py [--ids ...]
     [--build-only]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path


def _log(msg: str) -> None:
    print(f"  {msg}", file=sys.stderr, flush=True)


def load_rows(path: Path) -> dict[str, tuple[object, dict]]:
    """{instance_id: (Task, execution_result_content)} of every R2E-Gym row under `path`."""
    from deepswe.data.loaders.files import iter_raw_rows
    from deepswe.data.loaders.r2e_gym import r2e_row_to_task
    from deepswe.data.loaders.r2e_setup import setup_python

    out = {}
    for raw in iter_raw_rows(path):
        if raw.data is None:
            continue
        task = r2e_row_to_task(raw.data)
        execution = raw.data.get("execution_result_content") or {}
        execution = json.loads(execution) if isinstance(execution, str) else execution
        python = setup_python(execution)
        if python and "r2e_setup_python" not in task.metadata:  # until the loader records it
            task = task.model_copy(
                update={"metadata": {**task.metadata, "r2e_setup_python": python}}
            )
        out[task.instance_id] = (task, execution)
    return out


def agreement(expected: dict[str, str], got: dict[str, object]) -> tuple[int, int, list[str]]:
    """(tests whose status equals R2E-Gym's, tests R2E-Gym lists, the first differences)."""
    from deepswe.data.loaders.r2e_test_log import decolor

    want = {decolor(k): v for k, v in expected.items()}
    have = {decolor(k): getattr(v, "value", str(v)) for k, v in got.items()}
    same = [k for k, v in want.items() if have.get(k) == v]
    diffs = [
        f"{k}: {have.get(k, 'absent')} (R2E-Gym: {v})" for k, v in want.items() if k not in same
    ]
    diffs += [f"{k}: {v} (not in R2E-Gym's)" for k, v in have.items() if k not in want]
    return len(same), len(want), diffs[:5]


def build(task) -> dict:
    """Build the environment image, then the history and task layers; times and sizes."""
    from deepswe.env.images.sizes import layer_sizes
    from deepswe.env.images.task import ensure_env_image, ensure_task_image

    t0 = time.monotonic()
    ensure_env_image(task.environment, log=_log)
    t1 = time.monotonic()
    image = ensure_task_image(task, log=_log)
    t2 = time.monotonic()
    sizes = layer_sizes(image)
    return {
        "image": image,
        "env_s": round(t1 - t0, 1),
        "task_s": round(t2 - t1, 1),
        "env_mb": sizes.env_mb,
        "history_mb": sizes.history_mb,
        "task_layer_mb": sizes.task_mb,
    }


def one(task, mirror: Path, out: Path, build_only: bool) -> dict:
    from deepswe.env.episode import grade_patch
    from deepswe.env.recipes.r2e_gym.environment import (
        R2EEnvError,
        R2EUnsupported,
        build_from_source,
    )
    from deepswe.env.sandbox import SandboxLimits

    res: dict = {"instance_id": task.instance_id, "repo": task.repo}
    res["python"] = task.metadata.get("r2e_setup_python", "?")
    try:
        task = build_from_source(task, mirror)
    except (R2EUnsupported, R2EEnvError) as exc:
        return {**res, "status": "unsupported_env", "why": str(exc)}
    try:
        res.update(build(task))
    except Exception as exc:  # a benchmark records every failure and goes on
        return {**res, "status": "build_failed", "why": str(exc)[-1500:]}
    if build_only:
        return {**res, "status": "built"}
    folder = out / task.instance_id
    folder.mkdir(parents=True, exist_ok=True)
    limits = SandboxLimits(memory="4g", pids=2048, command_timeout_s=1800)
    for name, patch in (("gold", task.gold_patch or ""), ("empty", "")):
        t0 = time.monotonic()
        run = grade_patch(task, patch, image=res["image"], sandbox_limits=limits)
        (folder / f"{name}.log").write_text(run.text)
        res[name] = run.grade.outcome.value
        res[f"{name}_grade_s"] = round(time.monotonic() - t0, 1)
        res[f"{name}_reason"] = run.grade.reason
        if name == "gold":
            same, total, diffs = agreement(task.hidden.expected_statuses or {}, run.grade.statuses)
            res["statuses_same"], res["statuses_expected"], res["status_diffs"] = same, total, diffs
    ok = (res["gold"], res["empty"]) == ("resolved", "unresolved")
    res["status"] = "ok" if ok else "wrong"
    return res


def _line(r: dict) -> str:
    head = f"| {r['repo']} | {r['instance_id']} | {r['python']} |"
    if r["status"] in ("unsupported_env", "build_failed"):
        return f"{head} {r['status']}: {r['why'][-160:]!r} | | | | | | | |"
    sizes = (
        f"{r['env_s']} / {r['task_s']} | {r['env_mb']} | {r['history_mb']} | {r['task_layer_mb']}"
    )
    if r["status"] == "built":
        return f"{head} {sizes} | (built) | | |"
    agree = f"{r['statuses_same']}/{r['statuses_expected']}"
    return f"{head} {sizes} | {r['gold']} | {r['empty']} | {agree} |"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ids", nargs="*", help="instance ids (default: every row)")
    ap.add_argument("--out", type=Path, default=Path("runs/bench-r2e-gym"))
    ap.add_argument("--build-only", action="store_true", help="build and measure, grade nothing")
    args = ap.parse_args()
    rows_dir, mirror = os.environ.get("DEEPSWE_R2E_ROWS"), os.environ.get("DEEPSWE_R2E_MIRROR")
    if not rows_dir or not mirror:
        # no data here is not a failure of `make bench`: say so and skip
        print(
            "bench/r2e_gym.py: set DEEPSWE_R2E_ROWS and DEEPSWE_R2E_MIRROR (see the docstring); skipped"
        )
        return
    rows = load_rows(Path(rows_dir))
    ids = args.ids or sorted(rows)
    args.out.mkdir(parents=True, exist_ok=True)
    print(
        "| repository | instance | Python | build s (env / task) | env MB | history MB "
        "| task layer MB | gold | empty | statuses as R2E-Gym's |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    results = []
    for iid in ids:
        results.append(one(rows[iid][0], Path(mirror), args.out, args.build_only))
        (args.out / "results.json").write_text(json.dumps(results, indent=1))
        print(_line(results[-1]), flush=True)
    graded = [r for r in results if r["status"] in ("ok", "wrong")]
    ok = sum(r["status"] == "ok" for r in graded)
    same = sum(r["statuses_same"] for r in graded)
    total = sum(r["statuses_expected"] for r in graded)
    built = sum(r["status"] in ("ok", "wrong", "built") for r in results)
    print(
        f"\nbuilt {built}/{len(results)}; gold resolved and empty unresolved: {ok}/{len(graded)}; "
        f"test statuses equal to R2E-Gym's expected_output_json: {same}/{total}"
        + (f" (ratio {same / total:.2f})" if total else "")
    )


if __name__ == "__main__":
    main()
