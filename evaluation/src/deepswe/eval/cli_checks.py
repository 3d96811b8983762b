"""deepswe-eval's checks of a task set: `validate` (gold resolves, empty does not), `audit` (plus
every attack on the reward) and `health` (gold N times, the network, flakiness). Registered on
the app in cli.py."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from deepswe.eval.cli_common import (
    CONFIG,
    DATASET,
    IDS,
    LIMIT,
    OVERRIDES,
    REPO_MIRROR,
    fail,
    read_config,
    say_unsupported,
    task_set_flags,
    tasks_to_check,
)


def validate(
    out: Path = typer.Option(
        ..., help="folder for the gold/, empty/ and tools/ run folders; resumable"
    ),
    config: Path = CONFIG,
    overrides: list[str] = OVERRIDES,
    dataset: str = DATASET,
    rounds: int = typer.Option(None, min=1, help="runs of each baseline per task"),
    limit: int = LIMIT,
    ids: list[str] = IDS,
    repo_mirror: Path = REPO_MIRROR,
    tools: bool = typer.Option(
        True, help="also replay the gold patch through the agent's tools (reported apart)"
    ),
) -> None:
    """Gold resolves every task and the empty patch none: the check a task set must pass."""
    from deepswe.eval.card import ProtocolMismatch
    from deepswe.eval.validate import validate_tasks

    cfg = read_config(
        config,
        overrides,
        {
            **task_set_flags(dataset, repo_mirror),
            "baseline_runs": rounds,
        },
    )
    tasks, unsupported = tasks_to_check(cfg, ids, limit)
    try:
        result = validate_tasks(tasks, out, cfg, tools=tools, unsupported=unsupported)
    except (ProtocolMismatch, ValueError) as exc:
        fail(str(exc))
    typer.echo(json.dumps(result.summary(), indent=1))
    say_unsupported(result.unsupported, cfg.dataset)
    if not result.ok:
        fail(
            f"{len(result.failed)} failed, {len(result.undecided)} undecided, "
            f"{len(result.unsupported)} not graded here",
            code=1,
        )


def audit(
    out: Path = typer.Option(
        None, help="folder for the gold/, empty/ and attack-<name>/ run folders; resumable"
    ),
    config: Path = CONFIG,
    overrides: list[str] = OVERRIDES,
    dataset: str = DATASET,
    limit: int = LIMIT,
    ids: list[str] = IDS,
    repo_mirror: Path = REPO_MIRROR,
    attacks: list[str] = typer.Option(
        None, "--attacks", help="only this attack (repeat the option); default: every attack"
    ),
    list_attacks: bool = typer.Option(False, "--list", help="print the attacks and exit"),
) -> None:
    """Gold and empty baselines plus every attack patch over a task set: exit 0 only when no
    attack resolved a task and every task is healthy. Writes OUT/audit.json and OUT/audit.md."""
    from deepswe.eval.attacks import ATTACKS

    if list_attacks:
        for a in ATTACKS.values():
            typer.echo(f"{a.name}\t{a.family}\t{a.why}")
        return
    if out is None:
        fail("--out is required (or --list)")
    unknown = [a for a in attacks or [] if a not in ATTACKS]
    if unknown:
        fail(f"--attacks: unknown {', '.join(unknown)}; see --list")
    cfg = read_config(
        config,
        overrides,
        task_set_flags(dataset, repo_mirror),
    )
    result = _manifest(cfg, out, ids, limit, attacks or None)
    s = result.summary
    problems = [f"HOLE: {n} resolved {', '.join(i)}" for n, i in s.holes.items()]
    problems += [f"unhealthy: {i}: {'; '.join(result.tasks[i].reasons)}" for i in s.unhealthy]
    problems += [
        f"infra_error in {f}: {', '.join(i)} (run again to retry)" for f, i in s.undecided.items()
    ]
    if problems:
        fail(f"audit of {cfg.dataset} failed:\n  " + "\n  ".join(problems), code=1)


def _manifest(cfg, out: Path, ids, limit, attacks: list[str] | None):
    """Run an audit (attacks None: all of them; []: none, a health check) and print its table."""
    from deepswe.eval.audit import audit_tasks
    from deepswe.eval.card import ProtocolMismatch

    tasks, unsupported = tasks_to_check(cfg, ids, limit)
    if not tasks:
        fail(f"dataset {cfg.dataset}: no tasks selected")
    try:
        result = audit_tasks(tasks, out, cfg, attacks=attacks, unsupported=unsupported)
    except (ProtocolMismatch, ValueError) as exc:
        fail(str(exc))
    typer.echo((out / f"{result.kind}.md").read_text())
    say_unsupported(unsupported, cfg.dataset)
    return result


def health(
    out: Path = typer.Option(..., help="folder for the gold/ and empty/ run folders; resumable"),
    config: Path = CONFIG,
    overrides: list[str] = OVERRIDES,
    dataset: str = DATASET,
    rounds: int = typer.Option(None, min=1, help="runs of gold and empty per task (default 3)"),
    limit: int = LIMIT,
    ids: list[str] = IDS,
    repo_mirror: Path = REPO_MIRROR,
    mutants: int = typer.Option(
        0, min=0, help="test strength: up to this many mutants of gold per healthy task (0: off)"
    ),
    mutant_seed: int = typer.Option(0, help="the seed the mutants are drawn with"),
    harden: Path = typer.Option(
        None, help="write the task file with weak tasks' killing tests graded (our task sets only)"
    ),
) -> None:
    """Each task's health: gold run N times (flaky when the runs disagree), the empty patch, a
    need for the network read from gold's log; with --mutants K its tests' strength (wrong fixes
    made from gold that earn reward 1, proven wrong by wider tests: deepswe.eval.strength).
    Writes OUT/health.json, which training reads to leave unhealthy tasks out (data.health), and
    OUT/health.md. Exit 0 once every run is decided (3 while infra errors remain: run again)."""
    cfg = read_config(
        config,
        overrides,
        {
            **task_set_flags(dataset, repo_mirror),
            "baseline_runs": rounds or 3,
        },
    )
    result = _manifest(cfg, out, ids, limit, [])
    if mutants:
        result = _strength(cfg, out, ids, limit, result, mutants, mutant_seed, harden)
    s = result.summary
    typer.echo(f"health: {s.healthy} of {s.tasks} task(s) healthy; manifest {out}/health.json")
    if s.undecided:
        left = [f"{f}: {', '.join(i)}" for f, i in s.undecided.items()]
        fail("still infra_error (run the same command again):\n  " + "\n  ".join(left), 3)


def _strength(cfg, out: Path, ids, limit, manifest, k: int, seed: int, harden: Path | None):
    """Test strength added to the health manifest; the hardened task file written if asked."""
    from deepswe.data.task import TaskSource
    from deepswe.data.toy import write_tasks
    from deepswe.eval.strength import StrengthError, add_strength
    from deepswe.eval.strength import harden as hardened

    tasks, _ = tasks_to_check(cfg, ids, limit)
    try:
        manifest = add_strength(manifest, tasks, out, cfg, k, seed, log=typer.echo)
    except StrengthError as exc:
        fail(f"strength: {exc}; the tasks measured are kept: run the same command again", 3)
    weak = manifest.summary.weak
    typer.echo(f"strength: {len(weak)} weak task(s) of {manifest.summary.healthy} healthy")
    if harden is not None:
        theirs = [
            t.instance_id
            for t in tasks
            if t.source in (TaskSource.SWE_BENCH_VERIFIED, TaskSource.R2E_GYM)
        ]
        if theirs:
            fail(
                f"--harden: {len(theirs)} task(s) are SWE-bench or R2E-Gym rows, never changed "
                f"in place (e.g. {theirs[0]}); harden a task set of ours"
            )
        rows = manifest.tasks
        made = [
            hardened(t, rows[t.instance_id].strength) if t.instance_id in weak else t for t in tasks
        ]
        write_tasks(made, harden)
        typer.echo(f"harden: {len(weak)} task(s) hardened, {len(made)} written to {harden}")
    return manifest
