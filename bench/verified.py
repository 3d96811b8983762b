"""Real SWE-Bench-Verified rows built from source, offline: gold must resolve, empty must not, and
our verdict must equal swebench's own `get_eval_report` on the same test log.

Needs a folder named by $DEEPSWE_VERIFIED_DIR holding `verified.jsonl` (rows in the Hugging Face
dataset's columns) and `mirror/<owner>__<name>` git clones with the rows' commits (SWE-bench's
own mirrors, e.g. github.com/swe-bench/django__django, hold them; a clone missing old objects,
as a snapshot can, is cut above them when a row is built (deepswe/env/images/history.py); a
gap in a row's own base tree fails that row). Rows whose
spec names a Python the Debian images lack need $DEEPSWE_HOST_PYTHONS
(deepswe/env/images/hostpython.py).

For each row: translate swebench 4.1.0's spec (deepswe.env.recipes.swebench.environment), build the images
(timed: "build s" includes the shared layers the first row of a spec builds), grade the gold
patch and the empty patch in fresh sandboxes (timed), and grade both logs with swebench's
get_eval_report too. Prints one table row per instance and writes results.json under --out.
Baseline named for the ratios: swebench's verdict on the same log (agreement = 1.0 expected).

Rows: --ids, or --draw N --seed S (one row per repository drawn uniformly within it, the
repositories in name order, then N minus that many drawn uniformly from the rest; Python's
random.Random(S) over instance ids in sorted order), or --every-spec: the first row (by instance
id; one not known to need the internet where the spec has one) of each (repository, version) spec of verified.jsonl, 80 in all, specs in name order; a spec
is only as eligible as its build, so each is built and graded once (hours on 2 cores: resumable). Each row's result is kept in
--out/<instance_id>/result.json (with both test logs beside it): a rerun with the same --out
skips the rows already there but unsupported ones (--retry-failed redoes those that failed to
build too), so a long run resumes where it stopped. After the rows: the image budget, each
layer's MB measured on the rows built and extrapolated to every eligible row of verified.jsonl
(verified_budget.py).

Network: a graded row whose gold fails with a line showing its tests reached for the internet
(deepswe.eval.network, the detector health uses) is reported `needs_network` with that line. The
rows already known to (NEEDS_NETWORK) are listed, not graded, unless --network: offline each of
their requests waits out the resolver, and gold and empty both run.

Fresh draws: --exclude-named draws outside every instance id this repository's tracked files
name (earlier draws, tables, tests); --mirrored-only draws among the repositories that have a
clone under mirror/ (the others are named).

--rules strict grades the same rows under strict rules (the grader's own launcher, as the
tester; environments/README.md), where a command the grader cannot own or a row whose runner is
the code under test ends `infra_error` with the refusal as its reason; give it its own --out.

Run: DEEPSWE_VERIFIED_DIR=/data/verified .venv/bin/python bench/verified.py [--ids ID ...]
     [--draw 41 --seed 27 [--exclude-named] [--mirrored-only] | --every-spec]
     [--out runs/bench-verified]
     [--retry-failed] [--network] [--rules strict]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
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


# Rows known to need the internet (evaluation/README.md), found by the detector when graded
# (--network); skipped otherwise: offline, each request waits out the resolver, twice.
NEEDS_NETWORK = {
    "psf__requests-1724": "its tests reach httpbin.org",
    "psf__requests-1766": "its tests reach httpbin.org",
    "psf__requests-1921": "its tests reach httpbin.org",
    "psf__requests-2317": "its tests reach httpbin.org",
    "sphinx-doc__sphinx-7985": "its linkcheck tests resolve www.google.com, www.sphinx-doc.org",
}

# Rows whose gold patch fails in the reference harness's own images too, with the cause and where
# that is reported; graded and counted apart (our verdict must still equal swebench's).
REFERENCE_GOLD_FAILS = {
    "astropy__astropy-7606": "a graded test the dataset names differs from the test patch's",
    "astropy__astropy-8707": "pytest 7.4's nose `setup(self)` deprecation, raised as an error by "
    "astropy's own enable_deprecations_as_exceptions; NumPy 1.24+",
    "astropy__astropy-8872": "distutils' deprecation raised as an error; NumPy 1.24+",
}  # all three: SWE-bench/SWE-bench issue 484 (2025-10-16)


def named_in_repository() -> set[str]:
    """Every SWE-bench-style instance id this repository's tracked files name (earlier draws,
    tables, tests): `--exclude-named` draws outside them."""
    out = subprocess.run(
        ["git", "grep", "-ohE", r"[A-Za-z0-9_.-]+__[A-Za-z0-9_.-]+-[0-9]+"],
        cwd=Path(__file__).resolve().parents[1],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return set(out.split())


def draw(ids_by_repo: dict[str, list[str]], n: int, seed: int) -> list[str]:
    """The documented draw: one id per repository (uniform within it, repositories in name
    order), then n minus that many uniform from the rest; random.Random(seed), ids sorted."""
    rng = random.Random(seed)
    picked = [rng.choice(sorted(ids_by_repo[repo])) for repo in sorted(ids_by_repo)]
    rest = sorted({i for ids in ids_by_repo.values() for i in ids} - set(picked))
    return picked + rng.sample(rest, max(0, n - len(picked)))


def every_spec(rows: dict[str, dict]) -> list[str]:
    """The first instance id of each (repository, version) spec, specs in name order."""
    first: dict[tuple[str, str], str] = {}
    # a row known to need the internet only where its spec has no other
    for iid in sorted(rows, key=lambda i: (i in NEEDS_NETWORK, i)):
        first.setdefault((rows[iid]["repo"], str(rows[iid]["version"])), iid)
    return [first[k] for k in sorted(first)]


def swebench_verdict(task, patch: str, log: str, path: Path) -> bool:
    """swebench 4.1.0's own `resolved` for this log (its parser, its markers, its rule)."""
    from swebench.harness.grading import get_eval_report

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


def _log(msg: str) -> None:
    print(f"  {msg}", file=sys.stderr, flush=True)


def one(row: dict, mirror: Path, folder: Path, rules: str | None = None) -> dict:
    from deepswe.data.loaders.swebench import swebench_row_to_task
    from deepswe.env.episode import grade_patch
    from deepswe.env.images.sizes import layer_sizes
    from deepswe.env.images.task import ensure_env_image, ensure_task_image
    from deepswe.env.recipes.swebench.environment import (
        UnsupportedEnv,
        build_from_source,
        specs_for,
    )
    from deepswe.env.sandbox import SandboxLimits
    from deepswe.eval.network import network_sign

    task = swebench_row_to_task(row)
    res: dict = {"instance_id": task.instance_id, "repo": task.repo, "version": task.version}
    res["python"] = str(specs_for(task).get("python"))
    try:
        task = build_from_source(task, mirror)
    except UnsupportedEnv as exc:
        return {**res, "status": "unsupported_env", "why": str(exc)}
    except Exception as exc:  # the translation's own probe failed: recorded, the rest go on
        return {**res, "status": "build_failed", "why": str(exc)[-3000:]}
    folder.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    try:
        ensure_env_image(task.environment, log=_log)
        res["env_s"] = round(time.monotonic() - t0, 1)
        image = ensure_task_image(task, log=_log)
    except Exception as exc:  # a benchmark records every failure and goes on
        return {**res, "status": "build_failed", "why": str(exc)[-3000:]}
    res["build_s"] = round(time.monotonic() - t0, 1)
    res["task_s"] = round(res["build_s"] - res["env_s"], 1)
    sizes = layer_sizes(image)
    res["env_mb"], res["history_mb"], res["task_layer_mb"] = (
        sizes.env_mb,
        sizes.history_mb,
        sizes.task_mb,
    )
    if sizes.tree_mb:  # the shared working tree (images/worktree.py); absent in older results
        res["tree_mb"] = sizes.tree_mb
    if sizes.base:  # the Debian base inside env_mb, shared (bench/verified_budget.py)
        res["base"], res["base_mb"] = sizes.base, sizes.base_mb
    if rules is not None:  # --rules: the same row graded under other rules (issue #42: strict)
        task = task.model_copy(
            update={"test_spec": task.test_spec.model_copy(update={"rules": rules})}
        )
        res["rules"] = task.test_spec.grading_rules
    limits = SandboxLimits(memory="4g", pids=2048, command_timeout_s=1800)
    grades = {}
    for name, patch in (("gold", task.gold_patch or ""), ("empty", "")):
        t0 = time.monotonic()
        run = grade_patch(task, patch, image=image, sandbox_limits=limits)
        result, log = run.grade, run.log
        grades[name] = result
        (folder / f"{name}.log").write_text(run.text)
        res[f"{name}"] = result.outcome.value
        res[f"{name}_grade_s"] = round(time.monotonic() - t0, 1)
        res[f"{name}_reason"] = result.reason
        res[f"{name}_swebench_resolved"] = swebench_verdict(
            task, patch, log, folder / f"{name}_test_output.txt"
        )
    res["status"] = "ok" if (res["gold"], res["empty"]) == ("resolved", "unresolved") else "wrong"
    sign = None
    if res["gold"] != "resolved":  # found by the detector (deepswe.eval.network), not by a list
        g = grades["gold"]
        failed = [*g.f2p_failed, *g.p2p_failed, *g.mismatched]
        sign = network_sign((folder / "gold.log").read_text(), failed)
    if sign:
        res.update(status="needs_network", why=f"detected: {sign}")
    res["agrees"] = (res["gold"] == "resolved") == res["gold_swebench_resolved"] and (
        res["empty"] == "resolved"
    ) == res["empty_swebench_resolved"]
    return res


HEADER = (
    "| repository (version) | instance | Python | gold | empty | build s (env + task) | grade s (gold) "
    "| env MB | history (+ tree) MB | task layer MB | agrees with swebench |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|"
)


def _shared(r: dict) -> str:
    """The history MB, and the shared working tree's beside it where the task image has one."""
    tree = f" + {r['tree_mb']} tree" if r.get("tree_mb") else ""
    return f"{r.get('history_mb', 0)}{tree}"


def table_row(r: dict) -> str:
    repo = f"{r['repo']} ({r['version']})" if r.get("version") else r["repo"]
    if r["status"] in ("unsupported_env", "build_failed", "needs_network"):
        why = r["why"].strip().splitlines()[-1][:120] if r["why"].strip() else ""
        return f"| {repo} | {r['instance_id']} | {r['python']} | {r['status']}: {why} |"
    build = f"{r['build_s']} ({r.get('env_s', '?')} + {r.get('task_s', '?')})"
    return (
        f"| {repo} | {r['instance_id']} | {r['python']} | {r['gold']} | {r['empty']} | "
        f"{build} | {r['gold_grade_s']} | {r['env_mb']} | {_shared(r)} | "
        f"{r['task_layer_mb']} | {'yes' if r['agrees'] else 'NO'} |"
        + (" gold fails in the reference too |" if r["instance_id"] in REFERENCE_GOLD_FAILS else "")
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ids", nargs="*", default=None, help="instance ids (default: DEFAULT_IDS)")
    ap.add_argument("--draw", type=int, default=0, help="draw this many rows (module doc)")
    ap.add_argument("--seed", type=int, default=27, help="the draw's seed")
    ap.add_argument(
        "--every-spec", action="store_true", help="the first row of each (repo, version) spec"
    )
    ap.add_argument("--out", type=Path, default=Path("runs/bench-verified"))
    ap.add_argument("--retry-failed", action="store_true", help="redo rows that failed to build")
    ap.add_argument("--network", action="store_true", help="grade NEEDS_NETWORK rows too")
    ap.add_argument(
        "--rules",
        choices=["strict", "swebench"],
        default=None,
        help="grade under these rules instead of the task's own (use its own --out)",
    )
    ap.add_argument(
        "--exclude-named", action="store_true", help="draw outside every id this repository names"
    )
    ap.add_argument(
        "--mirrored-only",
        action="store_true",
        help="draw only among repositories with a clone under mirror/",
    )
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
    by_repo: dict[str, list[str]] = {}
    for iid, row in rows.items():
        by_repo.setdefault(row["repo"], []).append(iid)
    if args.exclude_named:
        named = named_in_repository()
        by_repo = {r: [i for i in ids if i not in named] for r, ids in by_repo.items()}
    if args.mirrored_only:
        held = {r for r in by_repo if (Path(root) / "mirror" / r.replace("/", "__")).is_dir()}
        print(f"repositories without a clone, left out of the draw: {sorted(set(by_repo) - held)}")
        by_repo = {r: ids for r, ids in by_repo.items() if r in held}
    by_repo = {r: ids for r, ids in by_repo.items() if ids}
    ids = draw(by_repo, args.draw, args.seed) if args.draw else (args.ids or DEFAULT_IDS)
    if args.every_spec:
        ids = every_spec(rows)
        print(f"{len(ids)} specs, one row each", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "ids.json").write_text(json.dumps(ids, indent=1))
    results = []
    print(HEADER, flush=True)
    for iid in ids:
        stored = args.out / iid / "result.json"
        r = json.loads(stored.read_text()) if stored.exists() else None
        # unsupported_env costs nothing to ask again (the translation may serve it now)
        if iid in NEEDS_NETWORK and not args.network:
            r = {"instance_id": iid, "repo": rows[iid]["repo"], "status": "needs_network"}
            r.update(python="-", why=NEEDS_NETWORK[iid])
        elif (
            r is None
            or r["status"] == "unsupported_env"
            or (args.retry_failed and r["status"] == "build_failed")
        ):
            _log(f"{iid}: building and grading")
            r = one(rows[iid], Path(root) / "mirror", args.out / iid, args.rules)
            stored.parent.mkdir(parents=True, exist_ok=True)
            tmp = stored.with_suffix(".tmp")
            tmp.write_text(json.dumps(r, indent=1))
            os.replace(tmp, stored)  # a kill leaves the whole result or none
        results.append(r)
        (args.out / "results.json").write_text(json.dumps(results, indent=1))
        print(table_row(r), flush=True)
    graded = [r for r in results if "gold" in r]
    ok = sum(r["status"] == "ok" for r in graded)
    agree = sum(bool(r.get("agrees")) for r in graded)
    known = [r for r in graded if r["instance_id"] in REFERENCE_GOLD_FAILS]
    print(
        f"\n{len(graded)} of {len(results)} rows graded; gold resolved and empty unresolved: "
        f"{ok}/{len(graded)}; verdicts equal to swebench's get_eval_report: {agree}/{len(graded)}"
        f"; rows whose gold fails in the reference harness too (REFERENCE_GOLD_FAILS): "
        f"{len(known)}, {sum(r['status'] == 'ok' for r in known)} of them resolved here"
    )
    if any("env_mb" in r for r in results):
        from verified_budget import budget  # bench/ is this script's own folder on sys.path

        print("\n" + budget(Path(root), results))


if __name__ == "__main__":
    main()
