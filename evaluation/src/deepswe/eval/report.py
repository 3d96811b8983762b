"""metrics.json, report.md, the plots and view.html of a run folder, rebuilt from what is on disk."""

from __future__ import annotations

import json
from pathlib import Path

from deepswe.eval.card import RunCard, read_card
from deepswe.eval.metrics import compute_metrics
from deepswe.eval.store import RunStore, atomic_write_json
from deepswe.eval.viewer import write_view


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _plots(metrics: dict, out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    names = []
    if metrics["pass@k"]:
        ks = [int(k) for k in metrics["pass@k"]]
        fig, ax = plt.subplots(figsize=(5, 3.5))
        ax.plot(ks, [100 * v for v in metrics["pass@k"].values()], "o-", label="pass@k")
        if metrics["best@k"]:
            ax.plot(ks, [100 * v for v in metrics["best@k"].values()], "s--", label="Best@k")
        ax.set(xlabel="k (runs)", ylabel="% of tasks", title="pass@k (unbiased)", ylim=(0, 100))
        ax.set_xticks(ks)
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / "pass_at_k.png", dpi=100)
        plt.close(fig)
        names.append("pass_at_k.png")
    if metrics["per_repo"]:
        repos = list(metrics["per_repo"])
        fig, ax = plt.subplots(figsize=(6, 0.4 * len(repos) + 1.5))
        ax.barh(repos, [100 * metrics["per_repo"][r]["resolved_rate"] for r in repos])
        ax.set(xlabel="% of episodes resolved", title="per repository", xlim=(0, 100))
        fig.tight_layout()
        fig.savefig(out / "per_repo.png", dpi=100)
        plt.close(fig)
        names.append("per_repo.png")
    steps = metrics.get("_steps_values") or []
    if steps:
        fig, ax = plt.subplots(figsize=(5, 3.5))
        ax.hist(steps, bins=min(20, max(1, len(set(steps)))))
        ax.set(xlabel="steps per episode", ylabel="episodes", title="steps")
        fig.tight_layout()
        fig.savefig(out / "steps_hist.png", dpi=100)
        plt.close(fig)
        names.append("steps_hist.png")
    return names


def build_report(run_dir: Path | str) -> dict:
    """Recompute metrics from the stored episodes; write metrics.json, report.md and plots."""
    store = RunStore(run_dir)
    card = read_card(store)
    records = store.records()
    metrics = compute_metrics(records, card.instance_ids, card.runs)
    metrics["healthy"] = _healthy_subset(store.root, records, card)
    atomic_write_json(store.root / "metrics.json", metrics)
    metrics["_steps_values"] = [len(r.trajectory.steps) for r in records if r.trajectory]
    plots = _plots(metrics, store.root)
    (store.root / "report.md").write_text(render_markdown(metrics, card, plots), encoding="utf-8")
    metrics.pop("_steps_values")
    write_view(store.root, records=records)
    return metrics


HEALTH_FILE = "health.json"


def _healthy_subset(root: Path, records: list, card: RunCard) -> dict | None:
    """Pass@1 on the tasks the run folder's health manifest (`<run>/health.json`, put there by
    `run --health` or `report --health`) does not call unhealthy, and the tasks outside with
    their reasons; None without a manifest. The benchmark keeps every task: this is beside it."""
    path = root / HEALTH_FILE
    if not path.is_file():
        return None
    from deepswe.eval.health import load_manifest, unhealthy, weak

    manifest = load_manifest(path)
    bad = {i: why for i, why in unhealthy(manifest).items() if i in card.instance_ids}
    ids = [i for i in card.instance_ids if i not in bad]
    sub = compute_metrics([r for r in records if r.instance_id not in bad], ids, card.runs)
    out = {
        "tasks": len(ids),
        "pass@1_mean": sub["pass@1_mean"],
        "pass@1_std": sub["pass@1_std"],
        "outside": bad,
        "how": f"Pass@1 as above over the {len(ids)} task(s) {HEALTH_FILE} does not call "
        "unhealthy (gold fails or flakes, empty passes, the tests need the network)",
    }
    measured = [i for i in ids if getattr(manifest.tasks.get(i), "strength", None) is not None]
    if measured:
        feeble = {i: why for i, why in weak(manifest).items() if i in ids}
        strong = [i for i in measured if i not in feeble]
        pick = [r for r in records if r.instance_id in strong]
        st = compute_metrics(pick, strong, card.runs)
        out["strong"] = {
            "tasks": len(strong),
            "pass@1_mean": st["pass@1_mean"],
            "pass@1_std": st["pass@1_std"],
            "weak": feeble,
            "how": f"Pass@1 over the {len(strong)} healthy task(s) whose tests the manifest "
            "measured strong: no wrong fix made from gold earned reward 1 and was proven wrong",
        }
    return out


def summary_table(m: dict) -> str:
    rows = [
        (
            "tasks x runs",
            f"{m['tasks']} x {m['runs']} = {m['episodes_expected']}",
            "selected tasks times eval.runs",
        ),
        ("episodes stored", str(m["episodes_stored"]), "episode files on disk"),
        ("Pass@1", f"{_pct(m['pass@1_mean'])} ± {_pct(m['pass@1_std'])}", m["pass@1_how"]),
        (
            "resolved per run",
            ", ".join(_pct(x) for x in m["resolved_rate_per_run"]),
            m["resolved_rate_how"],
        ),
    ]
    if m["supported_tasks"] != m["tasks"]:
        rows.append(
            (
                "Pass@1, supported tasks",
                f"{_pct(m['pass@1_supported_mean'])} ({m['supported_tasks']} tasks)",
                m["pass@1_supported_how"],
            )
        )
    if m.get("healthy"):
        h = m["healthy"]
        rows.append(
            (
                "Pass@1, healthy tasks",
                f"{_pct(h['pass@1_mean'])} ± {_pct(h['pass@1_std'])} ({h['tasks']} tasks)",
                h["how"],
            )
        )
        if h.get("strong"):
            st = h["strong"]
            rows.append(
                (
                    "Pass@1, strong tasks",
                    f"{_pct(st['pass@1_mean'])} ± {_pct(st['pass@1_std'])} ({st['tasks']} tasks)",
                    st["how"],
                )
            )
    rows += [(f"outcome: {k}", str(v), "stored episodes") for k, v in m["counts"].items()]
    for k, v in m["pass@k"].items():
        rows.append((f"pass@{k}", _pct(v), "unbiased estimator, n = runs"))
    if m["best@k"]:
        rows += [(f"Best@{k}", _pct(v), m["best@k_how"]) for k, v in m["best@k"].items()]
    else:
        rows.append(("Best@k", "not computed", "no verifier scores in the episodes"))
    rows.append(("run wall time", f"{m['run_wall_seconds']:.1f} s", m["run_wall_how"]))
    lines = ["| metric | value | how measured |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    return "\n".join(lines)


def _dist_row(name: str, d: dict, how: str) -> str:
    if not d.get("n"):
        return f"| {name} | 0 | | | | | | {how} |"
    f = "{:.1f}".format
    return f"| {name} | {d['n']} | {f(d['min'])} | {f(d['median'])} | {f(d['mean'])} | {f(d['p90'])} | {f(d['max'])} | {how} |"


def test_infra_line(m: dict) -> str:
    """Patches touching test infrastructure, and how many of them were resolved."""
    ti = m.get("test_infra") or {"episodes": 0, "resolved": 0, "restored": 0, "why": {}}
    rules = ", ".join(f"{k} {v}" for k, v in (m.get("grading_rules") or {}).items()) or "none"
    line = (
        f"Patches touching test infrastructure: {ti['episodes']}, resolved among them: "
        f"{ti['resolved']} (put back before the tests: {ti['restored']}; graded episodes by "
        f"rules: {rules})."
    )
    if ti["why"]:
        line += " What they touched: " + ", ".join(f"{k} {v}" for k, v in ti["why"].items()) + "."
    gate = m.get("static_gate") or {}
    t1, t2 = gate.get("tier1") or {}, gate.get("tier2") or {}
    line += (
        f" Tampered test runs: {(m.get('counts') or {}).get('tampered', 0)}. Static gate: tier 1 "
        f"{t1.get('episodes', 0)} (resolved {t1.get('resolved', 0)}), tier 2 "
        f"{t2.get('episodes', 0)} (resolved {t2.get('resolved', 0)})."
    )
    return line


def render_markdown(m: dict, card: RunCard, plots: list[str]) -> str:
    cfg, pol = card.eval, card.eval.policy
    lim, box = cfg.episode, cfg.sandbox
    out = [
        f"# Evaluation report: {card.dataset}",
        "",
        "## Summary",
        "",
        summary_table(m),
        "",
        test_infra_line(m),
        "",
        "## Per repository",
        "",
        "| repository | tasks | episodes | resolved | rate |",
        "|---|---|---|---|---|",
    ]
    for repo, r in m["per_repo"].items():
        out.append(
            f"| {repo} | {r['tasks']} | {r['episodes']} | {r['resolved']} | {_pct(r['resolved_rate'])} |"
        )
    out += [
        "",
        f"Rate = {m['per_repo_how']}.",
        "",
        "## Endings, steps, tokens, time",
        "",
        "Endings ("
        + m["endings_how"]
        + "): "
        + (", ".join(f"{k} {v}" for k, v in m["endings"].items()) or "none"),
        "",
        "| distribution | n | min | median | mean | p90 | max | how |",
        "|---|---|---|---|---|---|---|---|",
        _dist_row("steps", m["steps"], "agent turns per episode"),
        _dist_row("prompt tokens", m["prompt_tokens"], m["tokens_how"]),
        _dist_row("completion tokens", m["completion_tokens"], m["tokens_how"]),
        _dist_row("episode seconds", m["episode_seconds"], m["episode_seconds_how"]),
        _dist_row("grade seconds", m["grade_seconds"], "fresh sandbox + patch + hidden tests"),
        "",
    ]
    if m.get("healthy") and m["healthy"]["outside"]:
        out += ["## Tasks outside the healthy subset", "", "| instance | why |", "|---|---|"]
        out += [f"| {i} | {why.replace('|', '/')} |" for i, why in m["healthy"]["outside"].items()]
        out.append("")
    if m["not_graded"]:
        out += [
            "## Not graded (infra_error, unsupported_env)",
            "",
            "| instance | status | why |",
            "|---|---|---|",
        ]
        out += [
            f"| {x['instance_id']} | {x['status']} | {x['reason'].replace('|', '/')} |"
            for x in m["not_graded"]
        ]
        out.append("")
    out += [f"![{p}]({p})" for p in plots]
    out += [
        "",
        "## Protocol card",
        "",
        f"- dataset: `{card.dataset}` ({len(card.instance_ids)} tasks, sha256 `{card.dataset_sha256[:16]}`)",
        f"- policy: `{pol.name}`"
        + (f", model `{pol.model}`" if pol.model else "")
        + (f", args {pol.args}" if pol.args else ""),
        f"- temperature: {pol.temperature}, max tokens per reply: {pol.max_tokens}",
        f"- runs per task: {cfg.runs}; infra-error retries: {cfg.infra_retries}",
        f"- limits: {lim.max_steps} steps, {lim.max_context_tokens} context tokens, "
        f"{lim.action_timeout_s:g} s per action, {lim.wall_timeout_s:g} s per episode",
        f"- sandbox: {'no CPU quota' if box.cpus is None else f'{box.cpus:g} CPU'} for the "
        f"agent (none when grading), {box.memory} memory, {box.pids} processes, network "
        f"{'on' if box.network else f'off ({box.offline})'} ({cfg.sandbox_backend})",
        f"- prompts: `{lim.prompt_variant}` variant, sha256 `{card.prompt_sha256[:16]}`; "
        f"scaffold: `{lim.scaffold}`",
        f"- SWE-bench environments: {cfg.swebench_env}; grading rules: {cfg.grading_rules}",
        f"- code version: `{card.code_version}`; workers: {cfg.workers}; started {card.started_at}",
        "",
        "Full card: `config.json`; raw numbers: `metrics.json`; SWE-bench files: "
        "`predictions/run-<k>.jsonl`, `reports/run-<k>/<instance_id>/report.json`; every "
        "episode, step by step: `view.html`.",
        "",
    ]
    return "\n".join(out)


def load_metrics(run_dir: Path) -> dict:
    return json.loads((Path(run_dir) / "metrics.json").read_text())
