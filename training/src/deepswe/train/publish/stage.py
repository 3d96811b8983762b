"""Staging folders and the plan: what would be pushed, file by file, before anything is.

A model repo gets the HF-format checkpoint of `final/` on `main`, `logs/` (metrics.jsonl, the
resolved config, TensorBoard event files) and a card; each kept intermediate checkpoint goes to
a branch `step-N` of the same repo. A dataset repo gets one parquet row per (task, run) episode,
SWE-bench's predictions, the report, its plots and a card. Staged files are hard links (copies
across file systems), so staging a 64 GB checkpoint costs no disk.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from deepswe.train.publish.cards import dataset_card, model_card
from deepswe.train.publish.checks import EvalUnreadable, Finding, evaluation_findings, refusal

# The Hub's default .gitattributes sends these to LFS; so does any file of 10 MiB or more.
LFS_SUFFIXES = (
    ".safetensors",
    ".bin",
    ".pt",
    ".pth",
    ".ckpt",
    ".parquet",
    ".arrow",
    ".h5",
    ".msgpack",
    ".onnx",
    ".png",
    ".zip",
    ".gz",
    ".model",
)
LFS_MIN_BYTES = 10 * 1024 * 1024
# Weights under this are a tiny-profile model, never a 32B reproduction (Qwen3-32B: ~65 GB bf16).
TINY_WEIGHTS_BYTES = 1 << 30
FULL_REPRO_NAME = re.compile(r"deepswe|32b|preview", re.IGNORECASE)
# Policies that are not a model: their scores must never land in a model card's model-index.
NOT_A_MODEL = ("gold", "gold-patch", "empty", "replay")
MODEL_FILES = re.compile(r".*\.(safetensors|json|jinja|txt|model)$|.*\.safetensors\.index\.json$")


class StageError(ValueError):
    """Bad input: what is missing or wrong, and what to do (one line)."""


@dataclass(frozen=True)
class PlannedFile:
    path: str  # inside the repo, POSIX
    size: int  # bytes
    sha256: str
    lfs: bool  # predicted: the server's preupload answer decides


@dataclass
class RepoPlan:
    repo_id: str
    repo_type: str  # "model" | "dataset"
    revision: str  # "main" or a branch such as "step-000010"
    staging: Path
    files: list[PlannedFile] = field(default_factory=list)
    head: str | None = None  # the revision's commit when surveyed (push.survey_plan)
    deletes: list[str] | None = None  # files the revision holds and the plan lacks; None: unread


@dataclass
class Plan:
    repos: list[RepoPlan]
    notes: list[str] = field(default_factory=list)

    def render(self) -> str:
        lines = []
        for r in self.repos:
            total = sum(f.size for f in r.files)
            lines.append(
                f"{r.repo_type} {r.repo_id} @ {r.revision}: {len(r.files)} files, "
                f"{total} bytes (staged in {r.staging})"
            )
            for f in r.files:
                lines.append(f"  {f.path}  {f.size}  {f.sha256}  {'lfs' if f.lfs else 'regular'}")
            lines += [f"  delete {p}  (on the Hub, not in this plan)" for p in r.deletes or []]
        notes = list(self.notes)
        if any(r.deletes is None for r in self.repos):
            notes.append(
                "the Hub was not read: on push, files a revision holds that are not "
                "listed here are deleted, each printed before the commit"
            )
        return "\n".join(lines + [f"note: {n}" for n in notes])


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _link(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _list(staging: Path) -> list[PlannedFile]:
    out = []
    for p in sorted(q for q in staging.rglob("*") if q.is_file()):
        size = p.stat().st_size
        lfs = size >= LFS_MIN_BYTES or p.name.endswith(LFS_SUFFIXES)
        out.append(PlannedFile(p.relative_to(staging).as_posix(), size, sha256_file(p), lfs))
    return out


def check_model_folder(folder: Path) -> int:
    """Bytes of weights in a complete HF folder; StageError when it is missing or partial."""
    if not (folder / "config.json").is_file():
        raise StageError(
            f"{folder} holds no HF checkpoint (config.json missing): train the run "
            "to its end, or run export_final on it"
        )
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        shards = set(json.loads(index.read_text())["weight_map"].values())
        missing = sorted(s for s in shards if not (folder / s).is_file())
        if missing:
            raise StageError(
                f"{folder} is a partial checkpoint: {missing[0]} missing of "
                f"{len(shards)} shards; copy it again or re-export"
            )
    weights = list(folder.glob("*.safetensors"))
    if not weights:
        raise StageError(f"{folder} has no *.safetensors weights: re-export the checkpoint")
    return sum(p.stat().st_size for p in weights)


def _stage_model_folder(src: Path, dst: Path) -> None:
    for p in sorted(src.iterdir()):
        if p.is_file() and MODEL_FILES.fullmatch(p.name):
            _link(p, dst / p.name)


def _stage_model(
    train: Path, eval_run: Path | None, repo: str, dataset_repo: str | None, out: Path, force: bool
) -> list[RepoPlan]:
    final = train / "final"
    weights = check_model_folder(final)
    if weights < TINY_WEIGHTS_BYTES and FULL_REPRO_NAME.search(repo) and not force:
        raise StageError(
            f"{final} holds tiny-profile weights ({weights} bytes) but {repo!r} "
            "reads like a full DeepSWE reproduction: pick another name, or --force"
        )
    metrics = _eval_metrics(eval_run) if eval_run else None
    forced = _check_evaluation(eval_run, final, force) if eval_run else []
    main = out / "model-main"
    _stage_model_folder(final, main)
    for name in ("metrics.jsonl", "config.yaml"):
        if (train / name).is_file():
            _link(train / name, main / "logs" / name)
    tb = train / "tensorboard"
    if tb.is_dir():
        for p in sorted(tb.rglob("events.*")):
            _link(p, main / "logs" / "tensorboard" / p.relative_to(tb))
    (main / "README.md").write_text(
        model_card(train, repo, weights, metrics, eval_run, dataset_repo, forced),
        encoding="utf-8",
    )
    # Pushed in this order: step branches, then main (its card last; push.py).
    plans = []
    for ckpt in sorted((train / "checkpoints").glob("step-*")):
        if (ckpt / "model" / "config.json").is_file():
            dst = out / f"model-{ckpt.name}"
            _stage_model_folder(ckpt / "model", dst)
            plans.append(RepoPlan(repo, "model", ckpt.name, dst))
    return plans + [RepoPlan(repo, "model", "main", main)]


def _check_evaluation(eval_run: Path, model: Path, force: bool) -> list[Finding]:
    """The checks `eval_run` fails as an evaluation of `model`: refused unless `force`, and
    then returned for the card to name. A policy that is not a model is refused even then."""
    policy = (_read_json(eval_run / "config.json").get("eval") or {}).get("policy") or {}
    if policy.get("name") in NOT_A_MODEL:
        raise StageError(
            f"{eval_run} evaluated the {policy['name']!r} policy, not this model: "
            "its numbers cannot go in the model card; publish it alone (--eval "
            "without RUN) or evaluate the model with eval.policy.name=openai"
        )
    try:
        findings = evaluation_findings(eval_run, model)
    except EvalUnreadable as err:
        raise StageError(str(err)) from None
    if findings and not force:
        raise StageError(refusal(eval_run, findings))
    return findings


def _read_json(path: Path) -> dict:
    return json.loads(path.read_text()) if path.is_file() else {}


def _eval_metrics(eval_run: Path) -> dict:
    path = eval_run / "metrics.json"
    if not path.is_file():
        raise StageError(
            f"{eval_run} has no metrics.json: run `deepswe-eval report {eval_run}` "
            "first (or leave --eval out)"
        )
    return json.loads(path.read_text())


def _stage_dataset(
    eval_run: Path, repo: str, model_repo: str | None, out: Path, notes: list[str]
) -> RepoPlan:
    from deepswe.train.publish.episodes import write_episodes

    metrics = _eval_metrics(eval_run)
    root = out / "dataset-main"
    n = write_episodes(eval_run, root / "data" / "episodes.parquet")
    if n == 0:
        raise StageError(f"{eval_run} holds no stored episodes: nothing to publish")
    # One SWE-bench predictions file per run, never merged: the harness keys a file by
    # instance_id, so a file holding several runs of one task would keep only one of them.
    predictions = sorted((eval_run / "predictions").glob("run-*.jsonl"))
    for p in predictions:
        _link(p, root / "predictions" / p.name)
    for name in ("metrics.json", "report.md", "config.json"):
        if (eval_run / name).is_file():
            _link(eval_run / name, root / name)
    for p in sorted(eval_run.glob("*.png")):
        _link(p, root / p.name)
    if not (eval_run / "report.md").is_file():
        notes.append(f"{eval_run} has no report.md; the dataset carries metrics.json only")
    card = dataset_card(eval_run, repo, metrics, n, model_repo, [p.name for p in predictions])
    (root / "README.md").write_text(card, "utf-8")
    return RepoPlan(repo, "dataset", "main", root)


def build_plan(
    train: Path | None,
    eval_run: Path | None,
    repo: str | None,
    dataset_repo: str | None,
    out: Path,
    force: bool = False,
) -> Plan:
    """Stage everything under `out` (emptied first) and list it; nothing leaves the machine."""
    if train is None and eval_run is None:
        raise StageError("nothing to publish: give a training run, an evaluation run, or both")
    if train is not None and repo is None:
        raise StageError("a training run needs --repo NAMESPACE/NAME for its model repo")
    if eval_run is not None and dataset_repo is None:
        dataset_repo = f"{repo}-trajectories" if repo else None
        if dataset_repo is None:
            raise StageError("an evaluation run needs --dataset-repo NAMESPACE/NAME")
    for run in (train, eval_run):
        if run is not None and not run.is_dir():
            raise StageError(f"{run} is not a run folder")
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    notes: list[str] = []
    repos: list[RepoPlan] = []
    if train is not None:
        repos += _stage_model(train, eval_run, repo, dataset_repo if eval_run else None, out, force)
    if eval_run is not None:  # pushed first: the model card that names it never links to nothing
        repos.insert(0, _stage_dataset(eval_run, dataset_repo, repo if train else None, out, notes))
    for r in repos:
        r.files = _list(r.staging)
    return Plan(repos, notes)
