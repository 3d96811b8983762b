"""The image budget of SWE-Bench-Verified built from source, extrapolated from measured rows.

Each eligible row needs its task layer; each distinct environment image (its tag: specs that
translate to the same pip steps, Python and Debian packages share one, as requests' and sympy's
do) one; each environment and base-commit year one history layer (images/history.py). A layer's
MB and build seconds come from bench/verified.py's results: the spec's own measurement where one
was built, else the mean of its repository's, else the mean of all. Base images (Debian variants) are
shared and not counted. Printed as a markdown table per repository and a total, beside Epoch's
30 GiB for all of Verified as a ratio.

Task layers built over a shared working tree (images/worktree.py; their results carry
`tree_mb`) hold only what their base commit changes: in a repository with any such row, the
task layer is estimated from those rows alone (the older, whole-checkout rows would overstate
it), and each environment and base-commit quarter counts one tree layer. A repository with
none is counted as it was measured, whole checkouts in every task layer. Several --out folders
may be given; a later one's row replaces an earlier one's of the same instance.

Measured rows kept only as a table (evaluation/README.md's, in bench/verified.py's columns) are
read with --table FILE (the table's lines saved to FILE); --out folders' rows replace them.

A repository with no clone under mirror/ cannot be counted here (its environments are read
from its clone); --carry FILE takes its line from an earlier budget table saved to FILE, marked
"carried", into the total.

Run: DEEPSWE_VERIFIED_DIR=DIR .venv/bin/python bench/verified_budget.py [--out DIR ...]
     [--table FILE] [--carry FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
from collections import defaultdict
from pathlib import Path
from statistics import mean


def env_tag(row: dict, mirror: Path) -> str:
    """The environment image tag `row` builds (no probe: a compiler a wheel gap would add is not
    foreseen, so two such environments may count as one)."""
    from deepswe.data.loaders.swebench import swebench_row_to_task
    from deepswe.env.images.task import env_image_tag
    from deepswe.env.recipes.swebench.environment import build_from_source

    task = build_from_source(swebench_row_to_task(row), mirror, probe=False)
    return env_image_tag(task.environment)


def eligible_rows(root: Path) -> list[dict]:
    """The rows of verified.jsonl that `deepswe-eval envs` calls eligible (with the mirror)."""
    from deepswe.data.loaders.swebench import swebench_row_to_task
    from deepswe.env.recipes.swebench.coverage import spec_rows

    rows = [json.loads(x) for x in (root / "verified.jsonl").read_text().splitlines()]
    tasks = [swebench_row_to_task(r) for r in rows]
    ok = set()
    for spec in spec_rows(tasks, root / "mirror"):
        if spec.verdict == "eligible":
            ok.add((spec.repo, spec.version, frozenset(spec.excluded)))
    good = {(repo, version): out for repo, version, out in ok}
    return [
        r
        for r in rows
        if (r["repo"], r["version"]) in good
        and r["instance_id"] not in good[(r["repo"], r["version"])]
    ]


EPOCH_GIB = 30  # Epoch AI's slimmed SWE-Bench-Verified images, all 500 rows (issue #45)


def _year(root: Path, row: dict) -> str:
    repo = root / "mirror" / row["repo"].replace("/", "__")
    res = subprocess.run(
        [
            "git",
            "-C",
            str(repo),
            "show",
            "-s",
            "--format=%cd",
            "--date=format:%Y %m",
            row["base_commit"],
        ],
        capture_output=True,
        text=True,
    )
    return res.stdout.strip()


def _quarter(year_month: str) -> tuple[str, int]:
    year, month = year_month.split()
    return year, (int(month) - 1) // 3


def _estimate(measured: dict, key: tuple[str, str], repo: str, field: str) -> float:
    """The spec's own value, else its repository's mean, else the mean of all."""
    own = [r[field] for r in measured.get(key, [])]
    if own:
        return mean(own)
    same_repo = [r[field] for k, rs in measured.items() if k[0] == repo for r in rs]
    return mean(same_repo or [r[field] for rs in measured.values() for r in rs])


def _tree_rows(measured: dict) -> dict:
    """The rows built over a shared working tree, in the repositories that have any."""
    out: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for key, rs in measured.items():
        for r in rs:
            if "tree_mb" in r:
                out[key].append(r)
    return out


def carried_lines(text: str, skip: set[str]) -> dict[str, dict[str, float]]:
    """Per repository not in `skip`, the counts and GB of an earlier budget table's line (its
    columns before the tree layer: rows, environments, histories, env, history, task, total;
    or this table's own)."""
    out = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 8 or "/" not in cells[0] or cells[0] in skip:
            continue
        nums = [float(c) for c in cells[1:]]
        keys = ["rows", "envs", "histories", "env_mb", "history_mb", "task_mb"]
        if len(nums) == 9:  # with trees
            keys = ["rows", "envs", "histories", "trees", "env_mb", "history_mb", "tree_mb"]
            keys.append("task_mb")
        acc = dict(zip(keys, nums, strict=False))
        out[cells[0]] = {k: v * 1000 if k.endswith("_mb") else v for k, v in acc.items()}
    return out


def budget(root: Path, results: list[dict], carry: str = "") -> str:
    built = [r for r in results if "env_mb" in r]
    measured: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in built:
        measured[(r["repo"], r["version"])].append(r)
    env_builds = [r["env_s"] for r in built if r.get("env_s", 0) > 5]  # 0: an earlier row built it
    env_s = mean(env_builds) if env_builds else 0.0
    per_repo: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    histories: set[tuple[str, str]] = set()
    trees: set[tuple[str, tuple[str, int]]] = set()
    treed = _tree_rows(measured)
    treed_repos = {k[0] for k in treed}
    envs: set[str] = set()
    cloned = {p.name for p in (root / "mirror").iterdir()}
    uncloned: set[str] = set()
    for row in eligible_rows(root):
        key, repo = (row["repo"], row["version"]), row["repo"]
        if repo.replace("/", "__") not in cloned:  # its environments cannot be read here
            uncloned.add(repo)
            continue
        acc = per_repo[repo]
        acc["rows"] += 1
        layout = treed if repo in treed_repos else measured  # see the module doc
        acc["task_mb"] += _estimate(layout, key, repo, "task_layer_mb")
        acc["task_s"] += _estimate(measured, key, repo, "task_s")
        env = env_tag(row, root / "mirror")
        year, quarter = _quarter(_year(root, row))
        if repo in treed_repos and (env, (year, quarter)) not in trees:
            trees.add((env, (year, quarter)))
            acc["trees"] += 1
            acc["tree_mb"] += _estimate(treed, key, repo, "tree_mb")
        if env not in envs:
            envs.add(env)
            acc["envs"] += 1
            acc["env_mb"] += _estimate(measured, key, repo, "env_mb")
        hist = (env, year)
        if hist not in histories:
            histories.add(hist)
            acc["histories"] += 1
            acc["history_mb"] += _estimate(measured, key, repo, "history_mb")
    if carry:  # repositories with no clone here: an earlier table's line (module doc)
        for repo, acc in carried_lines(carry, set(per_repo)).items():
            per_repo[f"{repo} (carried)"] = defaultdict(float, acc)
            uncloned.discard(repo)
    lines = [
        "| repository | rows | environments | histories | trees | env GB | history GB | tree GB "
        "| task GB | total GB |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    total: dict[str, float] = defaultdict(float)
    layers = ("env_mb", "history_mb", "tree_mb", "task_mb")
    for repo, acc in sorted(per_repo.items()):
        gb = {k: acc[k] / 1000 for k in layers}
        for k in ("rows", "envs", "histories", "trees", "task_s"):
            total[k] += acc[k]
        for k, v in gb.items():
            total[k] += v
        lines.append(
            f"| {repo} | {acc['rows']:.0f} | {acc['envs']:.0f} | {acc['histories']:.0f} | "
            f"{acc['trees']:.0f} | {' | '.join(f'{gb[k]:.1f}' for k in layers)} | "
            f"{sum(gb.values()):.1f} |"
        )
    all_gb = sum(total[k] for k in layers)
    lines.append(
        f"| all | {total['rows']:.0f} | {total['envs']:.0f} | {total['histories']:.0f} | "
        f"{total['trees']:.0f} | {' | '.join(f'{total[k]:.1f}' for k in layers)} | {all_gb:.1f} |"
    )
    epoch_gb = EPOCH_GIB * 2**30 / 1e9
    lines.append(
        f"\n{all_gb:.1f} GB against Epoch's {EPOCH_GIB} GiB ({epoch_gb:.1f} GB): "
        f"{all_gb / epoch_gb:.2f}x; shared working trees measured in: "
        f"{', '.join(sorted(treed_repos)) or 'none'}"
    )
    timed = {k: sum(a[k] for r, a in per_repo.items() if "(carried)" not in r) for k in total}
    hours = (timed["envs"] * env_s + timed["task_s"]) / 3600
    lines.append(
        f"\nfrom {len(built)} rows built ({len(measured)} specs): mean environment build "
        f"{env_s:.0f} s, mean task build {timed['task_s'] / max(timed['rows'], 1):.0f} s; "
        f"building the {timed['rows']:.0f} rows counted here (not carried) one at a time: "
        f"about {hours:.1f} h on this machine"
    )
    if uncloned:
        lines.append(f"\nNot counted (no clone under mirror/): {', '.join(sorted(uncloned))}.")
    return "\n".join(lines)


def _mb(cell: str) -> int:
    return int(cell.split()[0].rstrip("*"))


def table_rows(text: str, root: Path) -> list[dict]:
    """The built rows of markdown tables in bench/verified.py's columns (repository, instance,
    Python, gold, empty, build s (env + task), grade s, env MB, history (+ tree) MB, task layer
    MB, agrees), as its result.json holds them; the version read from verified.jsonl."""
    rows = {}
    for x in (root / "verified.jsonl").read_text().splitlines():
        row = json.loads(x)
        rows[row["instance_id"]] = row
    out = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 11 or cells[1] not in rows or not cells[7].isdigit():
            continue
        build = cells[5].replace("(", " ").replace(")", " ").replace("+", " ").split()
        env_s, task_s = (
            (float(build[1]), float(build[2])) if len(build) == 3 else (0.0, float(build[0]))
        )
        r = {"instance_id": cells[1], "repo": rows[cells[1]]["repo"], "env_s": env_s}
        r.update(version=str(rows[cells[1]]["version"]), task_s=task_s, env_mb=_mb(cells[7]))
        r.update(history_mb=_mb(cells[8]), task_layer_mb=_mb(cells[9]))
        if "tree" in cells[8]:
            r["tree_mb"] = int(cells[8].split("+")[1].split()[0])
        out.append(r)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, nargs="+", default=[Path("runs/bench-verified")])
    ap.add_argument("--table", type=Path, default=None, help="rows from a saved table")
    ap.add_argument("--carry", type=Path, default=None, help="an earlier budget table's lines")
    args = ap.parse_args()
    root = os.environ.get("DEEPSWE_VERIFIED_DIR")
    if not root:
        print("bench/verified_budget.py: set DEEPSWE_VERIFIED_DIR (bench/verified.py); skipped")
        return
    by_id = {}  # a later folder's row replaces an earlier one's (module doc)
    if args.table is not None:
        by_id = {r["instance_id"]: r for r in table_rows(args.table.read_text(), Path(root))}
    for out in args.out:
        for p in sorted(out.glob("*/result.json")):
            r = json.loads(p.read_text())
            by_id[r["instance_id"]] = r
    carry = args.carry.read_text() if args.carry else ""
    print(budget(Path(root), list(by_id.values()), carry))


if __name__ == "__main__":
    main()
