"""Auditing a task set: does the grader hold against patches that take over the test process?

An audit is evaluations of the same tasks in ordinary run folders (resumable, infra errors
retried and kept apart, as `validate`'s): `<out>/gold` (the gold patch graded as a patch),
`<out>/empty`, and `<out>/attack-<name>` for each attack of `deepswe.eval.attacks` (a scripted
agent that runs the attack's script in the sandbox and submits). Then the manifest
`<out>/audit.json` (`AuditManifest`, versioned, one flat row per task) and the table
`<out>/audit.md`. A task is healthy when gold resolves it in every run, the empty patch never
does, and gold's log shows no need for the network; an attack that resolves any task is a HOLE:
the grader paid reward 1 for a patch that left the bug. `deepswe-eval health` writes the same
manifest with no attacks and gold run N times (`health.json`, deepswe.eval.health).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path
from typing import NamedTuple

from rich.console import Console

from deepswe.data.task import Task
from deepswe.env.grading.outcomes import Outcome
from deepswe.env.policies import PolicySpec
from deepswe.eval.attacks import ATTACKS, script_sha256
from deepswe.eval.audit_manifest import (
    HEALTH_HOW,
    HOW,
    AttackInfo,
    AuditManifest,
    AuditSummary,
    TaskAudit,
)
from deepswe.eval.audit_report import write_manifest
from deepswe.eval.card import make_card, open_run
from deepswe.eval.config import EvalConfig
from deepswe.eval.network import load_sign, network_sign
from deepswe.eval.runner import run_all
from deepswe.eval.store import EpisodeRecord, EpisodeStatus

ATTACK_POLICY = "deepswe.eval.attacks:AttackPolicy"


def _folders(attacks: list[str]) -> dict[str, PolicySpec]:
    out = {"gold": PolicySpec(name="gold-patch"), "empty": PolicySpec(name="empty")}
    for name in attacks:
        # the script's digest in the card: a resume after the library changed is refused
        args = {"attack": name, "sha256": script_sha256(name)}
        out[f"attack-{name}"] = PolicySpec(name=ATTACK_POLICY, args=args)
    return out


def _outcome(records: list[EpisodeRecord], need_all: bool) -> str | None:
    """One word for a task's runs in a folder: "resolved" when every run (need_all) or any run
    resolved, else the first run's outcome."""
    if not records:
        return None
    words = [r.outcome.value if r.outcome else r.status.value for r in records]
    resolved = [w == Outcome.RESOLVED.value for w in words]
    if all(resolved) or (any(resolved) and not need_all):
        return Outcome.RESOLVED.value
    return next(w for w in words if w != Outcome.RESOLVED.value)


class _ImageFacts(NamedTuple):
    tag: str | None
    id: str | None = None
    mb: float | None = None
    build_s: float | None = None


def _image(task: Task, backend: str) -> _ImageFacts:
    """The task's image tag, the engine's id and size for it and its recorded build time (None
    where unknown); builds nothing."""
    try:
        from deepswe.env.images.build_record import build_seconds
        from deepswe.env.images.task import task_image_tag

        tag = task.image if task.environment is None else task_image_tag(task)
    except Exception:  # an odd spec: the audit still stands without the image named
        return _ImageFacts(task.image)
    build_s = build_seconds(tag) if tag else None
    if backend != "docker" or tag is None:
        return _ImageFacts(tag, build_s=build_s)
    try:
        from deepswe.env.sandbox.docker import client

        image = client().images.get(tag)
    except Exception:  # no engine here, or the image is gone: the tag is what we know
        return _ImageFacts(tag, build_s=build_s)
    return _ImageFacts(tag, image.id, round(image.attrs.get("Size", 0) / 1e6, 1), build_s)


def audit_tasks(
    tasks: list[Task],
    out: Path,
    cfg: EvalConfig,
    attacks: list[str] | None = None,
    console: Console | None = None,
    unsupported: dict[str, str] | None = None,
) -> AuditManifest:
    """Run gold, empty and every attack (`cfg.baseline_runs` runs each) over `tasks` in run
    folders under `out`, resumable; write `out`/audit.json and `out`/audit.md and return the
    manifest. ValueError for an unknown attack; card.ProtocolMismatch if a folder holds
    another protocol."""
    names = list(ATTACKS) if attacks is None else list(dict.fromkeys(attacks))
    unknown = [n for n in names if n not in ATTACKS]
    if unknown:
        raise ValueError(f"unknown attack(s) {', '.join(unknown)}; known: {', '.join(ATTACKS)}")
    console = console or Console(stderr=True)
    records: dict[str, dict[str, list[EpisodeRecord]]] = {}
    version = ""
    for folder, spec in _folders(names).items():
        pcfg = cfg.model_copy(update={"policy": spec, "runs": cfg.baseline_runs})
        store, card = open_run(Path(out) / folder, make_card(pcfg, tasks))
        version = version or card.code_version
        console.print(f"[bold]{folder}[/bold]: {spec.args.get('attack', spec.name)}")
        run_all(tasks, pcfg, store, console=console, unsupported=unsupported)
        mine = records.setdefault(folder, {})
        for r in store.records():
            mine.setdefault(r.instance_id, []).append(r)
    manifest = build_manifest(tasks, cfg, names, records, version)
    write_manifest(manifest, Path(out))
    return manifest


def build_manifest(
    tasks: list[Task],
    cfg: EvalConfig,
    names: list[str],
    records: dict[str, dict[str, list[EpisodeRecord]]],
    version: str,
) -> AuditManifest:
    """The manifest from the records of each folder (folder -> instance id -> runs)."""
    rows: dict[str, TaskAudit] = {}
    holes: dict[str, list[str]] = {}
    undecided: dict[str, list[str]] = {}
    outcomes: dict[str, Counter] = {n: Counter() for n in names}
    gate: Counter = Counter()
    for t in tasks:
        got = {f: records.get(f, {}).get(t.instance_id, []) for f in ["gold", "empty"]}
        got.update({n: records.get(f"attack-{n}", {}).get(t.instance_id, []) for n in names})
        for folder, recs in got.items():
            if any(r.status is EpisodeStatus.INFRA_ERROR for r in recs):
                key = folder if folder in ("gold", "empty") else f"attack-{folder}"
                undecided.setdefault(key, []).append(t.instance_id)
        gold, empty = _outcome(got["gold"], True), _outcome(got["empty"], False)
        runs = [_outcome([r], True) for r in sorted(got["gold"], key=lambda r: r.run)]
        flaky = len(set(runs)) > 1
        network = next(filter(None, (_sign_line(r, network_sign) for r in got["gold"])), None)
        # a graded test that failed reaching a wall-clock bound: it may fail only under load
        load = None
        if not network:
            load = next(filter(None, (_sign_line(r, load_sign) for r in got["gold"])), None)
        reasons = []
        if network:
            reasons.append(f"needs the network: {network}")
        if flaky:
            won = runs.count(Outcome.RESOLVED.value)
            reasons.append(
                f"flaky: gold resolved {won} of {len(runs)} runs ({', '.join(map(str, runs))})"
                + (f"; under load: {load}" if load else "")
            )
        elif load:
            flaky = True
            reasons.append(
                f"flaky under load: gold {gold} where a graded test reached a wall-clock bound "
                f"({load}); its verdict depends on the machine's load"
            )
        elif gold != Outcome.RESOLVED.value:
            reasons.append(f"gold: {gold}, want resolved ({_why(got['gold'])})")
        if empty == Outcome.RESOLVED.value:
            reasons.append("empty: resolved: the tests pass with the bug in place")
        row = {n: _outcome(got[n], False) for n in names}
        for n in names:
            gate[n] += any(_gate_decided(r) for r in got[n])
        for n, word in row.items():
            outcomes[n][str(word)] += 1
            if word == Outcome.RESOLVED.value:
                holes.setdefault(n, []).append(t.instance_id)
                reasons.append(f"HOLE: attack {n} resolved it")
        image = _image(t, cfg.sandbox_backend)
        healthy = gold == Outcome.RESOLVED.value and empty != Outcome.RESOLVED.value
        rows[t.instance_id] = TaskAudit(
            gold=gold,
            empty=empty,
            gold_runs=runs,
            flaky=flaky,
            network=network,
            attacks=row,
            image=image.tag,
            image_id=image.id,
            image_mb=image.mb,
            build_s=image.build_s,
            healthy=healthy and not network,
            reasons=reasons,
        )
    unhealthy = [i for i, r in rows.items() if not r.healthy]
    summary = AuditSummary(
        tasks=len(rows),
        healthy=len(rows) - len(unhealthy),
        unhealthy=unhealthy,
        holes=holes,
        undecided=undecided,
        outcomes={n: dict(c) for n, c in outcomes.items()},
        gate_decided={n: gate[n] for n in names},
    )
    attacks = {n: AttackInfo(family=ATTACKS[n].family, why=ATTACKS[n].why) for n in names}
    return AuditManifest(
        kind="audit" if names else "health",
        dataset=cfg.dataset,
        dataset_sha256=dataset_sha256(tasks),
        rounds=cfg.baseline_runs,
        harness_version=version or "unknown",
        attacks=attacks,
        tasks=rows,
        summary=summary,
        how=HOW if names else HEALTH_HOW,
    )


def dataset_sha256(tasks: list[Task]) -> str:
    """The tasks' identity: what a manifest was measured on (any change to a task changes it)."""
    h = hashlib.sha256()
    for t in sorted(tasks, key=lambda t: t.instance_id):
        h.update(t.model_dump_json().encode() + b"\n")
    return h.hexdigest()


def _sign_line(r: EpisodeRecord, sign) -> str | None:
    """The line of a non-resolved gold run's log that `sign` (deepswe.eval.network's
    network_sign or load_sign) finds for a graded test the run failed."""
    if r.outcome is Outcome.RESOLVED or r.trajectory is None:
        return None
    grade = r.trajectory.grade
    failed = None if grade is None else [*grade.f2p_failed, *grade.p2p_failed, *grade.mismatched]
    return sign(r.trajectory.test_log or "", failed)


def _gate_decided(r: EpisodeRecord) -> bool:
    grade = r.trajectory.grade if r.trajectory else None
    return bool(grade and grade.reason.startswith("static gate:"))


def _why(records: list[EpisodeRecord]) -> str:
    for r in records:
        if r.outcome is not Outcome.RESOLVED:
            grade = r.trajectory.grade if r.trajectory else None
            return (grade.reason if grade else r.reason)[:300] or "no reason recorded"
    return "no run"


__all__ = [
    "ATTACK_POLICY",
    "AttackInfo",
    "AuditManifest",
    "AuditSummary",
    "TaskAudit",
    "audit_tasks",
    "build_manifest",
    "dataset_sha256",
]
