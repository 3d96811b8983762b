"""REPORT.md and report.html of a `make reproduce` run, with the plots beside them in plots/.

Everything is read back from the run folder (stages.json, the evaluation and training folders,
the test-time-scaling report), so `deepswe-reproduce report` rewrites it at any time, after a
failed stage too. The document is built once as blocks (document.py; the plots: plots.py)
and rendered twice: Markdown, and one self-contained HTML page (plots inlined as data URIs,
every text escaped). Links point into the evaluation folders' trajectory viewers
(`view.html#<instance_id>:<run>`), relative to the run folder.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from deepswe.reproduce.config import ReproduceConfig
from deepswe.reproduce.document import Block, Heading, Image, Para, Table, to_html, to_markdown
from deepswe.reproduce.plots import OUTCOMES, plot_curves, plot_outcomes, plot_reward
from deepswe.reproduce.step_times import step_time_blocks
from deepswe.train.step_record import read_metrics

# DeepSWE-Preview's published numbers (Agentica / Together AI blog, 2025-07): SWE-Bench-Verified,
# Pass@1 averaged over 16 runs at 64k context and 100 steps; hybrid TTS Best@16.
DEEPSWE = {"pass@1": 42.2, "hybrid best@16": 59.0}
# The evaluation folders of the tiny pipeline (under eval/), as the report names them.
EVALS = {
    "learning-sft": "SFT start on held-out swe-toy",
    "learning-trained": "after GRPO++ on held-out swe-toy",
    "swe-mini-model": "after GRPO++ on swe-mini:test tasks",
    "swe-mini-baselines/gold": "gold patch (harness check)",
    "swe-mini-baselines/empty": "empty patch (harness check)",
}


# --- reading the run folder --------------------------------------------------------------------
def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def outcome_counts(run_dir: Path) -> dict[str, Counter]:
    """repo -> Counter of outcomes (graded outcome, infra_error or unsupported) of a run folder."""
    from deepswe.eval.store import RunStore

    by_repo: dict[str, Counter] = {}
    if not (run_dir / "episodes").is_dir():
        return by_repo
    for rec in RunStore(run_dir).records():
        key = rec.outcome.value if rec.outcome is not None else rec.status.value
        key = "unsupported" if key == "unsupported_env" else key
        repo = "swe-toy (held-out)" if rec.repo.startswith("swe-toy/") else rec.repo
        by_repo.setdefault(repo, Counter())[key] += 1
    return by_repo


def paired(sft_dir: Path, trained_dir: Path) -> dict[str, int]:
    """Per (task, run), both seeded alike: how often only one of the two resolved."""
    from deepswe.eval.store import RunStore

    def table(d: Path) -> dict[tuple[str, int], bool]:
        if not (d / "episodes").is_dir():
            return {}
        return {(r.instance_id, r.run): r.resolved for r in RunStore(d).records()}

    a, b = table(sft_dir), table(trained_dir)
    both = set(a) & set(b)
    return {
        "pairs": len(both),
        "only_trained": sum(b[k] and not a[k] for k in both),
        "only_sft": sum(a[k] and not b[k] for k in both),
        "both": sum(a[k] and b[k] for k in both),
    }


def first_episode(run_dir: Path, resolved: bool) -> str | None:
    """`view.html#id:run` of the first (by id, run) episode resolved (or not) in a run."""
    from deepswe.eval.store import RunStore

    if not (run_dir / "episodes").is_dir():
        return None
    recs = sorted(RunStore(run_dir).records(), key=lambda r: (r.instance_id, r.run))
    for r in recs:
        if r.resolved == resolved:
            return f"view.html#{r.instance_id}:{r.run}"
    return None


# --- the document ------------------------------------------------------------------------------
def _stage_table(state: dict, out: Path) -> Table:
    rows = []
    if state.get("setup_seconds") is not None:
        rows.append(
            [
                "setup",
                "venv, editable installs, Docker engine, base images, vLLM's CPU build (make)",
                "done",
                f"{state['setup_seconds']:.0f}",
                "",
                "",
            ]
        )
    for name in state.get("order", []):
        rec = state["stages"].get(name, {})
        secs = f"{rec['seconds']:.0f}" if "seconds" in rec else ""
        cmds = "; ".join(f"`{c}`" for c in rec.get("commands", [])[:3])
        more = len(rec.get("commands", [])) - 3
        cmds += f" (+{more} more)" if more > 0 else ""
        arts = ", ".join(f"[{a}]({_link(a, out)})" for a in rec.get("artifacts", []))
        rows.append(
            [
                name,
                state.get("what", {}).get(name, ""),
                rec.get("status", "not run"),
                secs,
                cmds,
                arts,
            ]
        )
    return Table(["stage", "what", "status", "seconds", "commands", "artifacts"], rows)


def _link(artifact: str, out: Path) -> str:
    """An artifact path (relative to the repository, or absolute) as a link relative to the run
    folder: an evaluation folder links to its viewer."""
    path = Path(artifact)
    try:
        rel = path.resolve().relative_to(out.resolve())
    except ValueError:  # outside the run folder (runs/data/...): from the repository root
        return artifact if path.is_absolute() else "../" * len(out.parts) + artifact
    if rel.parts[:1] == ("eval",) and not rel.suffix:
        return f"{rel}/view.html"
    return str(rel)


def build(out: Path, cfg: ReproduceConfig) -> tuple[list[Block], dict]:
    state = _json(out / "stages.json") or {"stages": {}}
    st = state["stages"]
    plots = out / "plots"
    plots.mkdir(parents=True, exist_ok=True)
    total = sum(r.get("seconds", 0) for r in st.values()) + (state.get("setup_seconds") or 0)
    done = [n for n in state.get("order", []) if st.get(n, {}).get("status") == "done"]
    failed = [n for n in state.get("order", []) if st.get(n, {}).get("status") == "failed"]
    pre = st.get("preflight", {}).get("numbers", {})
    blocks: list[Block] = [Heading(f"make reproduce: profile {cfg.profile}", 1)]
    machine = ", ".join(
        fmt.format(pre[k])
        for k, fmt in (
            ("cores", "{} cores"),
            ("memory_gb", "{} GB memory"),
            ("docker", "Docker {}"),
        )
        if k in pre
    )
    status = (
        "Every stage finished"
        if not failed and len(done) == len(state.get("order", []))
        else f"Stopped at {failed[0]}: {st[failed[0]].get('error', '')[:300]}"
        if failed
        else f"{len(done)} of {len(state.get('order', []))} stages finished"
    )
    blocks.append(
        Para(
            f"{status}. Wall time {total / 60:.1f} min (stage seconds below, setup included when "
            f"`make reproduce` ran it) on {machine or 'this machine'}, against the about "
            f"{cfg.budget_minutes:g} min its sizes were chosen for on 2 quiet cores "
            "(reproduce.budget_minutes; a busy machine takes longer). This is the DeepSWE recipe in "
            "miniature: the same agent loop, Docker sandboxes, grader, GRPO++ trainer, evaluation "
            "harness and verifiers as the deepswe-32b profile, with a 10M-parameter model, made-up "
            "tasks it can learn from, and sizes that fit in minutes on 2 cores. Its numbers show "
            "that each stage works and what RL changed; they are not comparable to DeepSWE's."
        )
    )

    ev = {name: _json(out / "eval" / name / "metrics.json") for name in EVALS}
    sft_m, trained_m = ev["learning-sft"], ev["learning-trained"]
    tts_r = _json(out / "tts" / "report.json")
    hybrid, tts_cell = None, "not run"
    if tts_r:
        last = {c["method"]: c["points"][-1] for c in tts_r["curves"] if c["points"]}
        if "hybrid" in last:
            hybrid = (last["hybrid"]["k"], last["hybrid"]["mean"])
            tts_cell = (
                f"{_pct(hybrid[1])} (k = {hybrid[0]}; the pool's Pass@1 "
                f"{_pct(tts_r['pass@1']['mean'])}, oracle "
                f"{_pct(last.get('oracle', {}).get('mean'))})"
            )

    def pm(m: dict | None) -> str:
        if not m:
            return "not run"
        return f"{_pct(m.get('pass@1_mean'))} +- {_pct(m.get('pass@1_std'))}"

    blocks += [
        Heading("Headline numbers beside DeepSWE (other tasks, other model: not comparable)"),
        Table(
            ["measure", "DeepSWE-Preview", "this run", "what differs"],
            [
                [
                    "Pass@1 (%)",
                    f"{DEEPSWE['pass@1']}",
                    f"{pm(trained_m)} held-out swe-toy; {pm(ev['swe-mini-model'])} swe-mini:test",
                    "DeepSWE: Qwen3-32B, 500 SWE-Bench-Verified tasks, 16 runs, 100 steps, 64k context. Here: "
                    f"a 10M-parameter model, {cfg.swe_toy.test} held-out swe-toy tasks x {cfg.learning.runs} "
                    f"runs, {cfg.learning.max_steps} steps; +- is the std over runs",
                ],
                [
                    "hybrid TTS Best@k (%)",
                    f"{DEEPSWE['hybrid best@16']} (k = 16)",
                    tts_cell,
                    "DeepSWE: 16 policy rollouts, a 14B judge, agent-written tests. Here: swe-mini:test tasks, "
                    "the gold and hard wrong candidates made from it beside the model's, a LoRA judge on "
                    "the tiny model, scripted stand-in tests (tts/report.md)",
                ],
            ],
        ),
    ]

    # Learning
    blocks.append(Heading("Did RL move the model? Held-out swe-toy, SFT start against trained"))
    pair = paired(out / "eval" / "learning-sft", out / "eval" / "learning-trained")
    rows = []
    for name, m in (("learning-sft", sft_m), ("learning-trained", trained_m)):
        if m:
            c = m.get("counts", {})
            link = first_episode(out / "eval" / name, True) or first_episode(
                out / "eval" / name, False
            )
            rows.append(
                [
                    EVALS[name],
                    pm(m),
                    f"{c.get('resolved', 0)} / {m.get('episodes_stored')}",
                    ", ".join(f"{k} {v}" for k, v in m.get("endings", {}).items()),
                    f"[view.html](eval/{name}/view.html)"
                    + (f", [an episode](eval/{name}/{link})" if link else ""),
                ]
            )
    if rows:
        blocks.append(
            Table(
                [
                    "model",
                    "Pass@1 % +- std over runs",
                    "resolved / episodes",
                    "endings",
                    "trajectories",
                ],
                rows,
            )
        )
    if sft_m and trained_m:
        delta = (trained_m["pass@1_mean"] or 0) - (sft_m["pass@1_mean"] or 0)
        blocks.append(
            Para(
                "Both checkpoints were served by vLLM's CPU build and evaluated with "
                f"`deepswe-eval run eval.policy.name=openai eval.policy.seed={cfg.learning.seed}` "
                f"on the same {cfg.swe_toy.test} held-out tasks x {cfg.learning.runs} runs: reply i of (task, run) is sampled with the same "
                f"seed for both, at T = 1. Change: **{100 * delta:+.1f} points**. Paired over "
                f"{pair['pairs']} (task, run) episodes: resolved by the trained model only "
                f"{pair['only_trained']}, by the SFT start only {pair['only_sft']}, by both "
                f"{pair['both']}. What it means: swe-toy's held-out repositories are projects and "
                "function names training never saw, but every task has the same one-token bug "
                "(`return a - b` for `return a + b`); the SFT start makes the right edit about one "
                "time in three (it was fit on one right and two wrong scripted fixes), so a gain is "
                "RL moving that choice on unseen repositories. It does not show the model finding "
                "or writing fixes: on swe-mini (real bugs, below) it resolves nothing."
            )
        )
        ms = [m.get("endings", {}).get("max_steps", 0) for m in (sft_m, trained_m)]
        if ms[1] > ms[0]:
            blocks.append(
                Para(
                    f"The trained model ends more episodes at max_steps ({ms[1]} against {ms[0]}): "
                    "compact filtering (DeepSWE's) masks such episodes out of the GRPO++ loss, so RL "
                    "neither rewards nor punishes them; their patches are still graded here."
                )
            )

    # Training
    blocks.append(Heading("Training"))
    metrics = read_metrics(out / "train" / "metrics.jsonl")
    if plot_reward(metrics, plots / "reward.png"):
        blocks.append(Image("plots/reward.png", "training reward per GRPO++ step"))
    sft_n = st.get("sft", {}).get("numbers", {})
    if sft_n.get("loss"):
        blocks.append(
            Para(
                f"SFT warm start: {sft_n.get('episodes', 0)} scripted episodes, loss "
                f"{sft_n['loss'][0]:.3f} -> {sft_n['loss'][-1]:.4f} nats per trained token over "
                f"{len(sft_n['loss'])} epochs. GRPO++: {len(metrics)} steps, reward "
                + " ".join(f"{m.reward.mean or 0:.2f}" for m in metrics)
                + " (train/metrics.jsonl)."
            )
        )
    if metrics:
        blocks.extend(step_time_blocks(metrics))

    # Curves
    blocks.append(Heading("Pass@k and Best@k"))
    series = {}
    for name in ("learning-sft", "learning-trained"):
        if ev[name] and ev[name].get("pass@k"):
            series[f"pass@k {EVALS[name]}"] = sorted(
                (int(k), v) for k, v in ev[name]["pass@k"].items()
            )
    if plot_curves(series, plots / "pass_at_k.png", "Pass@k on held-out swe-toy (unbiased)"):
        blocks.append(Image("plots/pass_at_k.png", "Pass@k of the SFT start and the trained model"))
    if tts_r:
        best = {
            c["method"]: [(p["k"], p["mean"]) for p in c["points"]]
            for c in tts_r["curves"]
            if c["method"] in ("pass@k", "ef", "eb", "hybrid", "oracle")
        }
        if plot_curves(
            best,
            plots / "best_at_k.png",
            f"Best@k over {tts_r['tasks']} swe-mini tasks' candidates",
        ):
            blocks.append(Image("plots/best_at_k.png", "Best@k of each selection method"))
        blocks.append(
            Para(
                f"Test-time scaling over {tts_r['tasks']} tasks, {tts_r['candidates']} candidates "
                "(the details, the judge's AUC and the selections: [tts/report.md](tts/report.md))."
            )
        )

    # Per project
    blocks.append(Heading("Per project: every outcome"))
    rows_c: list[tuple[str, Counter]] = []
    table = []
    for name, label in EVALS.items():
        for repo, c in sorted(outcome_counts(out / "eval" / name).items()):
            rows_c.append((f"{label}: {repo}", c))
            table.append(
                [
                    label,
                    repo,
                    *(str(c.get(o, 0)) for o in OUTCOMES),
                    f"[view.html](eval/{name}/view.html)",
                ]
            )
    if plot_outcomes(rows_c, plots / "outcomes.png"):
        blocks.append(Image("plots/outcomes.png", "stacked outcomes per evaluation and project"))
    if table:
        blocks.append(Table(["evaluation", "project", *OUTCOMES, "trajectories"], table))
    blocks.append(
        Para(
            "infra_error and unsupported are not failures of the model: a broken environment shows as "
            "such here. The gold and empty rows are the harness check: gold must resolve every task "
            "and empty none."
        )
    )

    blocks += [
        Heading("Stages"),
        _stage_table(state, out),
        Para(
            "Each stage runs the subprojects' own commands (shown), logs to logs/<stage>.log and is "
            "recorded in stages.json when done; a rerun of `make reproduce` continues from the first "
            "stage not done, `make reproduce FRESH=1` starts over."
        ),
    ]
    return blocks, state


def _lines(path: Path) -> list[str]:
    try:
        return [ln for ln in path.read_text().splitlines() if ln.strip()]
    except FileNotFoundError:
        return []


def write_report(out: Path, cfg: ReproduceConfig) -> list[Path]:
    """Write out/REPORT.md, out/report.html and out/plots/*.png; their paths."""
    out = Path(out)
    blocks, _ = build(out, cfg)
    md, page = out / "REPORT.md", out / "report.html"
    md.write_text(to_markdown(blocks))
    page.write_text(to_html(blocks, out, f"make reproduce: {cfg.profile}"))
    return [md, page, *sorted((out / "plots").glob("*.png"))]
