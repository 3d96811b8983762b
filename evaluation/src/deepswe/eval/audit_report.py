"""The audit and health manifests written out: `audit.json` / `health.json` and their tables,
`audit.md` (attacks as rows, outcome counts as columns) and `health.md` (a row per task)."""

from __future__ import annotations

from pathlib import Path

from deepswe.env.grading.outcomes import Outcome
from deepswe.eval.audit_manifest import AuditManifest
from deepswe.eval.store import atomic_write_json

COLUMNS = [o.value for o in Outcome] + ["unsupported_env", "None"]


def health_markdown(m: AuditManifest) -> str:
    """One row per task: gold's runs, empty, the network sign, healthy or the reason."""
    s = m.summary
    lines = [
        f"# Health of {m.dataset}",
        "",
        f"harness {m.harness_version}; tasks sha256 {(m.dataset_sha256 or '?')[:16]}; "
        f"{s.tasks} tasks, {s.healthy} healthy; gold and empty run {m.rounds} time(s).",
        "",
        "| task | gold runs | empty | healthy | tests | reason | image MB | build s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for i, r in sorted(m.tasks.items(), key=lambda kv: (kv[1].healthy, kv[0])):
        runs = ", ".join(map(str, r.gold_runs)) or str(r.gold)
        why = "; ".join(
            r.reasons + ([r.strength.reason()] if r.strength and r.strength.weak else [])
        )
        why = why.replace("|", "\\|")
        size = "-" if r.image_mb is None else f"{r.image_mb:.0f}"
        took = "-" if r.build_s is None else f"{r.build_s:.0f}"
        ok = "yes" if r.healthy else "NO"
        tests = _strength_cell(r.strength)
        lines.append(f"| {i} | {runs} | {r.empty} | {ok} | {tests} | {why} | {size} | {took} |")
    if s.weak:
        lines += [
            "",
            f"Weak tests: {len(s.weak)} of {s.healthy} healthy task(s) (proven wrong fixes earn reward 1).",
        ]
    if s.undecided:
        lines += ["", "Still infra_error (run the same command again to retry):"]
        lines += [f"- {f}: {', '.join(ids)}" for f, ids in s.undecided.items()]
    return "\n".join(lines + ["", m.how, ""])


def _strength_cell(strength) -> str:
    """`weak`, `strong` or `-` (not measured), with the mutants' counts."""
    if strength is None:
        return "-"
    word = "WEAK" if strength.weak else "strong"
    return (
        f"{word}: {strength.mutants} mutants, {strength.killed} killed, "
        f"{len(strength.proven_wrong)} proven wrong, {len(strength.undecided)} undecided"
    )


def markdown(m: AuditManifest) -> str:
    """The table: attacks as rows (holes first), outcome counts as columns (a health manifest:
    one row per task)."""
    if m.kind == "health":
        return health_markdown(m)
    s = m.summary
    used = [c for c in COLUMNS if c == "resolved" or any(c in d for d in s.outcomes.values())]
    head = "| attack | family | " + " | ".join(used) + " | decided by the static gate |"
    lines = [
        f"# Audit of {m.dataset}",
        "",
        f"harness {m.harness_version}; {s.tasks} tasks, "
        f"{s.healthy} healthy (gold resolved, empty not).",
        "",
    ]
    if s.holes:
        lines.append(f"**HOLES: {len(s.holes)} attack(s) resolved tasks with the bug in place:**")
        lines += [f"- **{n}** ({m.attacks[n].why}): {', '.join(ids)}" for n, ids in s.holes.items()]
    else:
        lines.append("No holes: no attack resolved any task.")
    lines += ["", head, "|" + "---|" * (len(used) + 3)]
    order = sorted(s.outcomes, key=lambda n: (n not in s.holes, n))
    for n in order:
        cells = [str(s.outcomes[n].get(c, 0)) for c in used]
        name = f"**{n} (HOLE)**" if n in s.holes else n
        gated = s.gate_decided.get(n, 0)
        lines.append(f"| {name} | {m.attacks[n].family} | " + " | ".join(cells) + f" | {gated} |")
    if s.unhealthy:
        lines += ["", f"Unhealthy tasks ({len(s.unhealthy)}):"]
        lines += [f"- {i}: {'; '.join(m.tasks[i].reasons)}" for i in s.unhealthy]
    if s.undecided:
        lines += ["", "Still infra_error (run the same command again to retry):"]
        lines += [f"- {f}: {', '.join(ids)}" for f, ids in s.undecided.items()]
    return "\n".join(lines + ["", m.how, ""])


def write_manifest(m: AuditManifest, out: Path) -> None:
    """`out`/audit.json and audit.md (health.json and health.md for a health manifest)."""
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out / f"{m.kind}.json", m.model_dump(mode="json"))
    (out / f"{m.kind}.md").write_text(markdown(m), encoding="utf-8")


__all__ = ["COLUMNS", "health_markdown", "markdown", "write_manifest"]
