"""The run card: what a run folder measures, written to its config.json and checked on resume.

A resumed run must measure the same thing as the run it continues: `open_run` compares the
dataset's content, the task selection, the prompts and every protocol field of the evaluation
config (`config.PROTOCOL`: policy, runs, retries, episode and sandbox limits, SWE-bench
environments) with the card on disk and refuses, naming each difference. Operational fields
(workers, the endpoint URL, tolerated infra errors, code version) may change.

For a policy served at an endpoint the card also records what the server said it serves
(`served_weights`: the model id, vLLM's `root`, and the digest of the weight files when that
root is a folder here). The endpoint may move, so this is not compared on resume, except that
a resume against other weights (both digests known and different) is refused.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from deepswe.data.task import Task
from deepswe.env.agent import prompts
from deepswe.eval.config import EvalConfig, protocol_values
from deepswe.eval.store import RunStore, atomic_write_json
from deepswe.eval.weights import NoWeights, weights_digest


class ProtocolMismatch(Exception):
    """A resume asked for a different protocol than the run folder holds."""


class ServedWeights(BaseModel):
    """What the policy's endpoint said it serves when the run started (or last resumed)."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(description="the model id the server answered")
    root: str | None = Field(
        description="the server's `root` for it (vLLM: the folder or hub id it loaded)"
    )
    digest: str | None = Field(
        description="deepswe.eval.weights.weights_digest(root) when root is a folder here with "
        "weight files, else None"
    )


def served_weights(model: str, root: str | None) -> ServedWeights:
    """The record of a served model; its weights digested when `root` is a folder here.

    A relative root is read from this process's working folder (a server started beside the
    run, as `make reproduce` does)."""
    digest = None
    if root and Path(root).is_dir():
        try:
            digest = weights_digest(root)
        except NoWeights:  # a folder without weight files (a LoRA, a tokenizer): nothing to pin
            digest = None
    return ServedWeights(model=model, root=root, digest=digest)


class RunCard(BaseModel):
    """What was measured and how."""

    model_config = ConfigDict(extra="forbid")

    dataset: str = Field(description="the dataset name or path given")
    dataset_sha256: str = Field(description="sha256 over the selected tasks' canonical JSON")
    instance_ids: list[str] = Field(description="the selected tasks, in run order")
    eval: EvalConfig = Field(description="the resolved evaluation config")
    prompt_sha256: str = Field(description="sha256 of the system + user prompt templates used")
    code_version: str = Field("", description="`git describe --always --dirty` of this checkout")
    started_at: str = Field("", description="UTC time the run folder was created")
    served_weights: ServedWeights | None = Field(
        None, description="openai policies: what the endpoint serves; None for other policies"
    )

    @property
    def runs(self) -> int:
        return self.eval.runs


def make_card(cfg: EvalConfig, tasks: list[Task], served: ServedWeights | None = None) -> RunCard:
    """The card of an evaluation of `tasks` (in run order) under `cfg`, started now; `served`:
    what the policy's endpoint serves (openai policies)."""
    return RunCard(
        dataset=cfg.dataset,
        dataset_sha256=tasks_sha256(tasks),
        instance_ids=[t.instance_id for t in tasks],
        eval=cfg,
        prompt_sha256=prompt_sha256(cfg.episode.prompt_variant),
        code_version=code_version(),
        started_at=utc_now(),
        served_weights=served,
    )


def read_card(store: RunStore) -> RunCard:
    """The card of an existing run folder; ProtocolMismatch if it cannot be read."""
    try:
        return RunCard.model_validate_json(store.config_path.read_text(encoding="utf-8"))
    except (OSError, ValidationError) as exc:
        raise ProtocolMismatch(
            f"{store.config_path} is not a run card this version can read ({exc}); use a new --out"
        ) from None


def open_run(out: Path, card: RunCard) -> tuple[RunStore, RunCard]:
    """The run folder `out` for `card`: created with it, or checked against the card on disk
    (a resume keeps the original start time). ProtocolMismatch names every difference."""
    store = RunStore(out)
    if store.config_path.exists():
        old = read_card(store)
        check_resume(old, card)
        card = card.model_copy(
            update={"started_at": old.started_at, "served_weights": _kept(old, card)}
        )
    store.root.mkdir(parents=True, exist_ok=True)
    atomic_write_json(store.config_path, card.model_dump(mode="json"))
    return store, card


def _kept(old: RunCard, new: RunCard) -> ServedWeights | None:
    """The served weights a resumed card records: the new answer, unless it only lacks the
    digest the old one has for the same model and root (a resume from a machine that cannot
    read the folder must not erase what the start measured)."""
    a, b = old.served_weights, new.served_weights
    if a and b and b.digest is None and (a.model, a.root) == (b.model, b.root):
        return a
    return b


def _compared(card: RunCard) -> dict[str, object]:
    out: dict[str, object] = {
        "dataset_sha256": card.dataset_sha256,
        "instance_ids": card.instance_ids,
        "prompt_sha256": card.prompt_sha256,
    }
    out.update({f"eval.{k}": v for k, v in protocol_values(card.eval).items()})
    return out


def check_resume(old: RunCard, new: RunCard) -> None:
    """Raise ProtocolMismatch naming every protocol field that differs, and the served
    weights' digest when both cards know it and it differs."""
    a, b = _compared(old), _compared(new)
    diffs = [f"{k}: on disk {_short(a[k])}, asked {_short(b[k])}" for k in a if a[k] != b[k]]
    was, now = (c.served_weights.digest if c.served_weights else None for c in (old, new))
    if was is not None and now is not None and was != now:  # the endpoint now serves other weights
        diffs.append(
            f"served_weights.digest: on disk {_short(was)}, asked {_short(now)} "
            "(the endpoint serves other weights than the run started with)"
        )
    if diffs:
        raise ProtocolMismatch(
            "this run folder was started with a different protocol; use a new --out, or the "
            "same options as before. Differences:\n  " + "\n  ".join(diffs)
        )


def tasks_sha256(tasks: list[Task]) -> str:
    h = hashlib.sha256()
    for t in tasks:
        h.update(t.model_dump_json().encode())
        h.update(b"\n")
    return h.hexdigest()


def prompt_sha256(variant: str) -> str:
    text = prompts.system_prompt(variant) + "\0" + prompts.user_prompt("{problem}", variant)
    return hashlib.sha256(text.encode()).hexdigest()


def code_version(cwd: Path | None = None) -> str:
    """`git describe --always --dirty` of the checkout this code runs from, or "unknown"."""
    where = cwd or Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "describe", "--always", "--dirty", "--tags"],
            cwd=where,
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 else "unknown"


def utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _short(value: object) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 120 else text[:117] + "..."
