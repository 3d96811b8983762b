"""The image budget of SWE-Bench-Verified built from source, extrapolated from measured rows.

Each eligible row needs its task layer; each distinct environment image (its tag: specs that
translate to the same pip steps, Python and Debian packages share one, as requests' and sympy's
do) one; each environment and base-commit year one history layer (images/history.py). A layer's
MB and build seconds come from bench/verified.py's results: the spec's own measurement where one
was built, else the mean of its repository's, else the mean of all. Printed as a markdown table
per repository and a total, beside Epoch's 30 GiB for all of Verified as a ratio.

Debian base images (images/base.py: one debootstrap rootfs per suite and extra-package set, one
layer) are shared by every environment built on them, and the engine stores each once: each
distinct base is counted once, on its own line, at its size in the engine, and an environment
counts only what it adds to its base (a measured env MB, the whole image, less its base's MB:
the row's own `base_mb`, else its base's size in the engine now). A base not in the engine is
built with --build-bases, else its environments count whole (the line says which).

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


def env_tags(row: dict, mirror: Path) -> tuple[str, str, str, tuple[str, ...]]:
    """The environment image tag `row` builds, its base image's tag, the base's suite and extra
    packages (no probe: a compiler a wheel gap would add is not foreseen, so two such
    environments may count as one)."""
    from deepswe.data.loaders.swebench import swebench_row_to_task
    from deepswe.env.images.recipe import base_image_tag
    from deepswe.env.images.task import env_image_tag
    from deepswe.env.recipes.swebench.environment import build_from_source

    spec = build_from_source(swebench_row_to_task(row), mirror, probe=False).environment
    base = base_image_tag(spec.base, spec.apt)
    return env_image_tag(spec), base, spec.base, tuple(sorted(set(spec.apt)))


def base_sizes(bases: dict[str, tuple[str, tuple[str, ...]]], build: bool) -> dict[str, float]:
    """MB of each base image (tag -> (suite, extra packages)) the engine holds; with `build`,
    the missing ones are built first (images/base.py: debootstrap, minutes each)."""
    from deepswe.env.images.base import ensure_base_image
    from deepswe.env.sandbox.docker import client

    out = {}
    for tag, (suite, extra) in sorted(bases.items()):
        if build:
            ensure_base_image(suite, extra=extra)
        try:
            out[tag] = client().images.get(tag).attrs["Size"] / 1e6
        except Exception:  # not built here: docker.errors.ImageNotFound
            continue
    return out


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
    with trees; or this table's own, with bases). An env GB carried from a table without bases
    is the environments whole, their bases included."""
    out = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 8 or "/" not in cells[0] or cells[0] in skip:
            continue
        nums = [0.0 if c == "-" else float(c) for c in cells[1:]]
        keys = ["rows", "envs", "histories", "env_mb", "history_mb", "task_mb"]
        if len(nums) == 9:  # with trees
            keys = ["rows", "envs", "histories", "trees", "env_mb", "history_mb", "tree_mb"]
            keys.append("task_mb")
        elif len(nums) == 11:  # with bases (this table's own)
            keys = ["rows", "bases", "envs", "histories", "trees", "base_mb", "env_mb"]
            keys += ["history_mb", "tree_mb", "task_mb"]
        acc = dict(zip(keys, nums, strict=False))
        acc.pop("bases", None)
        acc.pop("base_mb", None)  # counted once, on the shared line
        out[cells[0]] = {k: v * 1000 if k.endswith("_mb") else v for k, v in acc.items()}
    return out


def _env_own(built: list[dict], base_of: dict[str, str], base_mb: dict[str, float]) -> set[str]:
    """Set each built row's `env_own_mb`: its environment's MB less its base's (the row's own
    `base_mb`, else its base's size in the engine), or whole where neither is known. Returns the
    bases whose size was not known."""
    unknown = set()
    for r in built:
        base = r.get("base") or base_of.get(r["instance_id"], "")
        size = r.get("base_mb") or base_mb.get(base)
        if not size:
            unknown.add(base or f"(no base for {r['instance_id']})")
        r["env_own_mb"] = max(r["env_mb"] - (size or 0), 0)
    return unknown


def budget(root: Path, results: list[dict], carry: str = "", build_bases: bool = False) -> str:
    built = [dict(r) for r in results if "env_mb" in r]
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
    counted = []  # (row, env tag, base tag, year month)
    bases: dict[str, tuple[str, tuple[str, ...]]] = {}
    base_of: dict[str, str] = {}
    for row in eligible_rows(root):
        if row["repo"].replace("/", "__") not in cloned:  # its environments cannot be read here
            uncloned.add(row["repo"])
            continue
        env, base, suite, extra = env_tags(row, root / "mirror")
        bases[base] = (suite, extra)
        base_of[row["instance_id"]] = base
        counted.append((row, env, base, _year(root, row)))
    sizes = base_sizes(bases, build_bases)
    unknown = _env_own(built, base_of, sizes)
    repo_bases: dict[str, set[str]] = defaultdict(set)
    for row, env, base, year_month in counted:
        key, repo = (row["repo"], row["version"]), row["repo"]
        acc = per_repo[repo]
        acc["rows"] += 1
        repo_bases[repo].add(base)
        layout = treed if repo in treed_repos else measured  # see the module doc
        acc["task_mb"] += _estimate(layout, key, repo, "task_layer_mb")
        acc["task_s"] += _estimate(measured, key, repo, "task_s")
        year, quarter = _quarter(year_month)
        if repo in treed_repos and (env, (year, quarter)) not in trees:
            trees.add((env, (year, quarter)))
            acc["trees"] += 1
            acc["tree_mb"] += _estimate(treed, key, repo, "tree_mb")
        if env not in envs:
            envs.add(env)
            acc["envs"] += 1
            acc["env_mb"] += _estimate(measured, key, repo, "env_own_mb")
        hist = (env, year)
        if hist not in histories:
            histories.add(hist)
            acc["histories"] += 1
            acc["history_mb"] += _estimate(measured, key, repo, "history_mb")
    for repo, used in repo_bases.items():
        per_repo[repo]["bases"] = len(used)
    shared = {"bases": len(bases), "base_mb": sum(sizes.get(b, 0.0) for b in bases)}
    if carry:  # repositories with no clone here: an earlier table's line (module doc)
        for repo, acc in carried_lines(carry, set(per_repo)).items():
            per_repo[f"{repo} (carried)"] = defaultdict(float, acc)
            uncloned.discard(repo)
    return _table(
        per_repo, shared, treed_repos, env_s, len(built), len(measured), uncloned, unknown
    )


def _table(per_repo, shared, treed_repos, env_s, n_built, n_specs, uncloned, unknown) -> str:
    layers = ("base_mb", "env_mb", "history_mb", "tree_mb", "task_mb")
    counts = ("rows", "bases", "envs", "histories", "trees")
    lines = [
        "| repository | rows | bases | environments | histories | trees | base GB | env GB "
        "| history GB | tree GB | task GB | total GB |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    total: dict[str, float] = defaultdict(float)
    for repo, acc in sorted(per_repo.items()):
        gb = {k: acc[k] / 1000 for k in layers}
        for k in (*counts, "task_s"):
            total[k] += acc[k]
        for k, v in gb.items():
            total[k] += v
        lines.append(
            f"| {repo} | {' | '.join(f'{acc[k]:.0f}' for k in counts)} | "
            f"- | {' | '.join(f'{gb[k]:.1f}' for k in layers[1:])} | {sum(gb.values()):.1f} |"
        )
    base_gb = shared["base_mb"] / 1000
    lines.append(
        f"| Debian bases, each once | - | {shared['bases']} | - | - | - | {base_gb:.1f} | - | - "
        f"| - | - | {base_gb:.1f} |"
    )
    total["base_mb"] = base_gb
    all_gb = sum(total[k] for k in layers)
    lines.append(
        f"| all | {total['rows']:.0f} | {shared['bases']} | "
        f"{' | '.join(f'{total[k]:.0f}' for k in counts[2:])} | "
        f"{' | '.join(f'{total[k]:.1f}' for k in layers)} | {all_gb:.1f} |"
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
        f"\nfrom {n_built} rows built ({n_specs} specs): mean environment build "
        f"{env_s:.0f} s, mean task build {timed['task_s'] / max(timed['rows'], 1):.0f} s; "
        f"building the {timed['rows']:.0f} rows counted here (not carried) one at a time: "
        f"about {hours:.1f} h on this machine"
    )
    if unknown:
        lines.append(
            f"\nEnvironments counted whole, their base unknown (a row not eligible here) or not "
            f"in the engine (--build-bases builds it): {', '.join(sorted(unknown))}."
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
    ap.add_argument(
        "--build-bases", action="store_true", help="build the Debian bases the engine lacks"
    )
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
    print(budget(Path(root), list(by_id.values()), carry, args.build_bases))


if __name__ == "__main__":
    main()
