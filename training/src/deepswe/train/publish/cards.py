"""Model and dataset cards: YAML metadata through huggingface_hub's card data, and a body that
says what was trained, on what, how it was measured, its limits and where it came from.

The model-index holds only numbers the evaluation run measured (Pass@1 over its N runs with
the spread, Best@k when a verifier scored the episodes); with no evaluation run it is left out.
A number published with --force past a failed check (checks.py) says so beside it, in the body
and in the model-index's metric name.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from huggingface_hub import DatasetCardData, EvalResult, ModelCardData

from deepswe.train.publish.checks import Finding

# Qwen3 is Apache-2.0; R2E-Gym's training tasks and SWE-bench are MIT-licensed datasets.
BASE_LICENSE = "apache-2.0"


def _read_config(train: Path) -> dict:
    path = train / "config.yaml"
    return yaml.safe_load(path.read_text()) if path.is_file() else {}


def _eval_card(eval_run: Path) -> dict:
    path = eval_run / "config.json"
    return yaml.safe_load(path.read_text()) if path.is_file() else {}


def _eval_results(metrics: dict, card: dict, forced: list[Finding]) -> list[EvalResult]:
    dataset = str(card.get("dataset") or "unknown")
    runs = metrics.get("runs")
    common = dict(task_type="text-generation", dataset_type=dataset, dataset_name=dataset)
    # The Hub shows metric_name beside the value: a forced number says so there too.
    tag = f"published with --force past: {', '.join(f.check for f in forced)}" if forced else ""
    spread = f"mean of {runs} runs, std {metrics['pass@1_std']:.4f}"
    out = [
        EvalResult(
            **common,
            metric_type="pass@1",
            metric_value=metrics["pass@1_mean"],
            metric_name=f"Pass@1 ({spread}{'; ' + tag if tag else ''})",
            verified=False,
        )
    ]
    for k, v in (metrics.get("best@k") or {}).items():
        out.append(
            EvalResult(
                **common,
                metric_type=f"best@{k}",
                metric_value=v,
                metric_name=f"Best@{k}" + (f" ({tag})" if tag else ""),
                verified=False,
            )
        )
    return out


def forced_sentences(forced: list[Finding]) -> list[str]:
    """What a card says next to a number published past failed checks: which, and why the
    number may not be this model's."""
    return [
        f'**Published with `--force` although the check "{f.check}" failed:** {f.caveat}'
        for f in forced
    ]


def model_card(
    train: Path,
    repo: str,
    weights: int,
    metrics: dict | None,
    eval_run: Path | None,
    dataset_repo: str | None,
    forced: list[Finding] | None = None,
) -> str:
    """The model card; `forced` are the checks the evaluation failed and --force overrode."""
    forced = forced or []
    cfg = _read_config(train)
    base = str((cfg.get("model") or {}).get("path", "unknown"))
    data = str((cfg.get("data") or {}).get("path", "unknown"))
    name = repo.split("/")[-1]
    ecard = _eval_card(eval_run) if eval_run else {}
    card = ModelCardData(
        base_model=base if "/" in base and not Path(base).exists() else None,
        datasets=[dataset_repo] if dataset_repo else None,
        license=BASE_LICENSE,
        library_name="transformers",
        pipeline_tag="text-generation",
        tags=["swe-agent", "reinforcement-learning", "grpo", "deepswe-repro"],
        model_name=name,
        eval_results=_eval_results(metrics, ecard, forced) if metrics else None,
    )
    steps = (cfg.get("run") or {}).get("steps", "?")
    lines = [
        f"# {name}",
        "",
        f"A software-engineering agent policy trained with GRPO++ (DeepSWE recipe) by "
        f"DeepSWE-repro. Base model: `{base}` (license of the base model: "
        f"{BASE_LICENSE}). Training tasks: `{data}`, {steps} optimizer steps.",
        "",
        "## Evaluation",
        "",
    ]
    if metrics:
        lines += [
            f"`{ecard.get('dataset', '?')}`, {metrics.get('tasks')} tasks x {metrics.get('runs')} "
            f"runs: Pass@1 = {metrics['pass@1_mean']:.4f} +- {metrics['pass@1_std']:.4f} "
            "(sample std over runs). Trajectories, predictions and the report: "
            + (f"dataset `{dataset_repo}`." if dataset_repo else "not published."),
        ]
        for sentence in forced_sentences(forced):
            lines += ["", sentence]
    else:
        lines += ["Not evaluated in this publication: the card carries no results."]
    lines += [
        "",
        "## Limits",
        "",
        f"Weights: {weights} bytes."
        + (
            " This is a tiny-profile model (CPU smoke scale), not a DeepSWE-size reproduction."
            if weights < (1 << 30)
            else ""
        ),
        "",
        "## Provenance",
        "",
        f"Run folder `{train.name}`; resolved config in `logs/config.yaml`, per-step metrics in "
        f"`logs/metrics.jsonl`; code version of the evaluation: `{ecard.get('code_version', '?')}`. "
        "Intermediate checkpoints are branches `step-N` of this repo.",
    ]
    return f"---\n{card.to_yaml()}\n---\n\n" + "\n".join(lines) + "\n"


def dataset_card(
    eval_run: Path, repo: str, metrics: dict, n: int, model_repo: str | None, predictions: list[str]
) -> str:
    ecard = _eval_card(eval_run)
    configs = [{"config_name": "episodes", "data_files": "data/episodes.parquet"}]
    if predictions:  # one split per run: `run-0.jsonl` -> split `run_0`
        configs.append(
            {
                "config_name": "predictions",
                "data_files": [
                    {
                        "split": name.removesuffix(".jsonl").replace("-", "_"),
                        "path": f"predictions/{name}",
                    }
                    for name in predictions
                ],
            }
        )
    card = DatasetCardData(
        license="mit",
        tags=["swe-agent", "trajectories", "swe-bench", "deepswe-repro"],
        configs=configs,
        task_categories=["text-generation"],
    )
    body = [
        f"# {repo.split('/')[-1]}",
        "",
        f"{n} agent episodes (one row per task and run) of an evaluation on "
        f"`{ecard.get('dataset', '?')}`"
        + (f" of the model `{model_repo}`" if model_repo else "")
        + ".",
        "",
        f"Pass@1 = {metrics['pass@1_mean']:.4f} +- {metrics['pass@1_std']:.4f} over "
        f"{metrics.get('runs')} runs. Columns: instance_id, run, repo, status, outcome, reward, "
        "ending, steps, tokens, seconds, patch, messages and actions (JSON strings).",
        "`predictions/run-<k>.jsonl` (config `predictions`, split `run_<k>`): one SWE-bench "
        "predictions file per run (instance_id, model_name_or_path, model_patch), each "
        "re-gradable as is with the SWE-bench harness; they are not merged because the harness "
        "keys predictions by instance_id. `metrics.json`, `report.md` and `config.json` (the "
        "protocol card) as written by deepswe-eval.",
    ]
    return f"---\n{card.to_yaml()}\n---\n\n" + "\n".join(body) + "\n"
