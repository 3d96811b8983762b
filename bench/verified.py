"""Real SWE-Bench-Verified rows built from source, offline: gold must resolve, empty must not, and
our verdict must equal swebench's own `get_eval_report` on the same test log.

Needs a folder named by $DEEPSWE_VERIFIED_DIR holding `verified.jsonl` (rows in the Hugging Face
dataset's columns) and `mirror/<owner>__<name>` git clones with the rows' commits (SWE-bench's
own mirrors, e.g. github.com/swe-bench/django__django, hold them). Rows whose spec names a Python
the Debian images lack need $DEEPSWE_HOST_PYTHONS (deepswe/env/images/hostpython.py).

For each row: translate swebench 4.1.0's spec (deepswe.eval.swebench_env), build the images
(timed: "build s" includes the shared layers the first row of a spec builds), grade the gold
patch and the empty patch in fresh sandboxes (timed), and grade both logs with swebench's
get_eval_report too. Prints one table row per instance and writes results.json under --out.
Baseline named for the ratios: swebench's verdict on the same log (agreement = 1.0 expected).

Run: DEEPSWE_VERIFIED_DIR=/data/verified .venv/bin/python bench/verified.py [--ids ID ...]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace

# One row per class of install problem (specs-analysis: requirements files, conda lists,
# setuptools-scm tags, sequential pins, missing install_requires, a C extension).
DEFAULT_IDS = [
    "sympy__sympy-23534",
    "django__django-15863",
    "django__django-16485",
    "pytest-dev__pytest-7432",
    "pylint-dev__pylint-4970",
    "sphinx-doc__sphinx-10323",
    "sphinx-doc__sphinx-9673",
    "pallets__flask-5014",
    "psf__requests-6028",
    "mwaskom__seaborn-3069",
    "astropy__astropy-12907",
    # Pythons Debian lacks ($DEEPSWE_HOST_PYTHONS): django 3.0 and 3.2 (3.6), 4.0 (3.8)
    "django__django-11333",
    "django__django-13568",
    "django__django-14315",
]


def swebench_verdict(task, patch: str, log: str, folder: Path) -> bool:
    """swebench 4.1.0's own `resolved` for this log (its parser, its markers, its rule)."""
    from swebench.harness.grading import get_eval_report

    path = folder / "test_output.txt"
    path.write_text(log)
    spec = SimpleNamespace(
        instance_id=task.instance_id,
        repo=task.repo,
        version=task.version,
        FAIL_TO_PASS=list(task.hidden.fail_to_pass),
        PASS_TO_PASS=list(task.hidden.pass_to_pass),
    )
    pred = {"instance_id": task.instance_id, "model_name_or_path": "gold", "model_patch": patch}
    report = get_eval_report(spec, pred, str(path), include_tests_status=False)
    return bool(report[task.instance_id]["resolved"])


def one(row: dict, mirror: Path, out: Path) -> dict:
    from deepswe.data.loaders.swebench import swebench_row_to_task
    from deepswe.env.episode import grade_patch
    from deepswe.env.images.sizes import layer_sizes
    from deepswe.env.images.task import ensure_task_image
    from deepswe.env.sandbox import SandboxLimits
    from deepswe.eval.swebench_env import UnsupportedEnv, build_from_source, specs_for

    task = swebench_row_to_task(row)
    res: dict = {"instance_id": task.instance_id, "repo": task.repo, "version": task.version}
    res["python"] = str(specs_for(task).get("python"))
    try:
        task = build_from_source(task, mirror)
    except UnsupportedEnv as exc:
        return {**res, "status": "unsupported_env", "why": str(exc)}
    folder = out / task.instance_id
    folder.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    try:
        image = ensure_task_image(task, log=lambda m: print(f"  {m}", file=sys.stderr))
    except Exception as exc:  # a benchmark records every failure and goes on
        return {**res, "status": "build_failed", "why": str(exc)[-1500:]}
    res["build_s"] = round(time.monotonic() - t0, 1)
    sizes = layer_sizes(image)
    res["env_mb"], res["history_mb"], res["task_layer_mb"] = (
        sizes.env_mb,
        sizes.history_mb,
        sizes.task_mb,
    )
    limits = SandboxLimits(memory="4g", pids=2048, command_timeout_s=1800)
    for name, patch in (("gold", task.gold_patch or ""), ("empty", "")):
        t0 = time.monotonic()
        run = grade_patch(task, patch, image=image, sandbox_limits=limits)
        result, log = run.grade, run.log
        (folder / f"{name}.log").write_text(run.text)
        res[f"{name}"] = result.outcome.value
        res[f"{name}_grade_s"] = round(time.monotonic() - t0, 1)
        res[f"{name}_reason"] = result.reason
        res[f"{name}_swebench_resolved"] = swebench_verdict(task, patch, log, folder)
    res["status"] = "ok" if (res["gold"], res["empty"]) == ("resolved", "unresolved") else "wrong"
    res["agrees"] = (res["gold"] == "resolved") == res["gold_swebench_resolved"] and (
        res["empty"] == "resolved"
    ) == res["empty_swebench_resolved"]
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ids", nargs="*", default=DEFAULT_IDS)
    ap.add_argument("--out", type=Path, default=Path("runs/bench-verified"))
    args = ap.parse_args()
    root = os.environ.get("DEEPSWE_VERIFIED_DIR")
    if not root:
        # no data here is not a failure of `make bench`: say so and skip
        print("bench/verified.py: set DEEPSWE_VERIFIED_DIR (see the docstring); skipped")
        return
    rows = {}
    for line in (Path(root) / "verified.jsonl").read_text().splitlines():
        row = json.loads(line)
        rows[row["instance_id"]] = row
    args.out.mkdir(parents=True, exist_ok=True)
    results = []
    print(
        "| repository | instance | Python | gold | empty | build s | grade s (gold) | env MB "
        "| history MB | task layer MB | agrees with swebench |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for iid in args.ids:
        r = one(rows[iid], Path(root) / "mirror", args.out)
        results.append(r)
        (args.out / "results.json").write_text(json.dumps(results, indent=1))
        if r["status"] in ("unsupported_env", "build_failed"):
            print(
                f"| {r['repo']} | {iid} | {r['python']} | {r['status']}: {r['why'][:80]} | | | | |"
            )
            continue
        print(
            f"| {r['repo']} | {iid} | {r['python']} | {r['gold']} | {r['empty']} | "
            f"{r['build_s']} | {r['gold_grade_s']} | {r['env_mb']} | {r.get('history_mb', 0)} | {r['task_layer_mb']} | "
            f"{r['agrees']} |",
            flush=True,
        )
    ok = sum(r["status"] == "ok" for r in results)
    agree = sum(bool(r.get("agrees")) for r in results)
    print(
        f"\ngold resolved and empty unresolved: {ok}/{len(results)}; verdicts equal to "
        f"swebench's get_eval_report: {agree}/{len(results)} (ratio {agree / len(results):.2f})"
    )


if __name__ == "__main__":
    main()
