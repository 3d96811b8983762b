"""Is an evaluation's number this model's? The checks before its Pass@1 goes in a model card.

A number in a model card is read as the published weights' own. An evaluation run folder backs
that only when it is complete (every task x run of its card stored), free of infrastructure
failures (counted as unresolved, they say nothing about the model), of these very weights (the
run card's `served_weights.digest` equals `weights_digest` of the folder published as `main`),
and reported from the episodes on disk (its metrics.json recomputes the same). Each check that
fails is a `Finding`: one line of what and what to do, and the sentence a card forced past it
prints next to the number.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from deepswe.env.grading.outcomes import Outcome
from deepswe.eval.card import ProtocolMismatch, RunCard, read_card
from deepswe.eval.metrics import compute_metrics
from deepswe.eval.store import EpisodeRecord, EpisodeStatus, RunStore
from deepswe.eval.weights import NoWeights, weights_digest

# What metrics.json must agree on with a recomputation from the stored episodes.
REPORTED = ("episodes_stored", "pass@1_mean", "pass@1_std", "best@k")


class EvalUnreadable(ValueError):
    """The evaluation folder has no run card this version can read: nothing can be checked."""


@dataclass(frozen=True)
class Finding:
    """One failed check: `check` names it, `problem` says what is wrong, `remedy` what to do,
    `caveat` why the number may not be this model's (the card's sentence under --force)."""

    check: str
    problem: str
    remedy: str
    caveat: str


def evaluation_findings(eval_run: Path, model: Path) -> list[Finding]:
    """Every check the evaluation `eval_run` fails as the evaluation of the weights in `model`
    (the folder published as the model); empty when its number is this model's."""
    store = RunStore(eval_run)
    try:
        card = read_card(store)
    except ProtocolMismatch as err:
        raise EvalUnreadable(
            f"{store.config_path} is not a run card this version reads "
            f"({str(err).splitlines()[0][:200]}): evaluate the model again "
            "with this version, or leave --eval out"
        ) from None
    records = store.records()
    found = [
        _incomplete(eval_run, card, records),
        _infra_errors(eval_run, records),
        _weights(card, model),
        _stale_report(eval_run, card, records),
    ]
    return [f for f in found if f is not None]


def _resume(eval_run: Path) -> str:
    return f"rerun `deepswe-eval run` with the same options and --out {eval_run}"


def _incomplete(eval_run: Path, card: RunCard, records: list[EpisodeRecord]) -> Finding | None:
    expected = {(i, k) for i in card.instance_ids for k in range(card.runs)}
    stored = len(expected & {(r.instance_id, r.run) for r in records})
    if stored >= len(expected):
        return None
    shape = f"{len(card.instance_ids)} tasks x {card.runs} runs"
    return Finding(
        "complete",
        f"it is incomplete: {stored} of {len(expected)} episodes stored ({shape})",
        f"finish it: {_resume(eval_run)}",
        f"the evaluation is incomplete ({stored} of {len(expected)} episodes, {shape}): the "
        "missing episodes count as unresolved, so this is not the model's Pass@1 on the "
        "whole task set.",
    )


def _infra_errors(eval_run: Path, records: list[EpisodeRecord]) -> Finding | None:
    bad = [
        r
        for r in records
        if r.status is EpisodeStatus.INFRA_ERROR or r.outcome is Outcome.INFRA_ERROR
    ]
    if not bad:
        return None
    first = bad[0]
    why = first.reason.splitlines()[0][:120] if first.reason else "no reason recorded"
    return Finding(
        "no infra errors",
        f"{len(bad)} episode(s) ended in infra_error (first: {first.instance_id} run "
        f"{first.run}: {why})",
        f"retry them: {_resume(eval_run)}",
        f"{len(bad)} of its {len(records)} stored episodes ended in infra_error, counted as "
        "unresolved, so the number measures the sandboxes as well as the model.",
    )


def _weights(card: RunCard, model: Path) -> Finding | None:
    served = card.served_weights
    evaluate = (
        f"evaluate {model} itself (serve it, then `deepswe-eval run eval.policy.name=openai`)"
    )
    if served is None or not served.digest:
        named = (
            f"it names {served.model!r}" + (f" at {served.root}" if served.root else "")
            if served
            else "it names no model"
        )
        return Finding(
            "weights recorded",
            "the evaluation does not record what it evaluated: its run card has no digest of "
            f"the served weights ({named}; an endpoint whose weights could not be read)",
            f"{evaluate}, its server loading a folder this machine can read",
            "the evaluation does not record which weights it served, so the number may be "
            "another model's.",
        )
    try:
        mine = weights_digest(model)
    except NoWeights as err:  # check_model_folder has passed, so only on a race
        raise EvalUnreadable(str(err)) from None
    if mine == served.digest:
        return None
    where = f"{served.model!r}" + (f" from {served.root}" if served.root else "")
    return Finding(
        "same weights",
        f"it evaluated other weights: {where}, digest {served.digest[:12]}, not {model} "
        f"(digest {mine[:12]})",
        f"{evaluate}, or publish the run whose weights it evaluated",
        # no local path in a public card: the digests say it
        f"the evaluation served other weights (weights digest {served.digest[:12]}) than "
        f"these ({mine[:12]}), so the number is another checkpoint's.",
    )


def _stale_report(eval_run: Path, card: RunCard, records: list[EpisodeRecord]) -> Finding | None:
    path = eval_run / "metrics.json"
    reported = json.loads(path.read_text()) if path.is_file() else {}
    fresh = compute_metrics(records, card.instance_ids, card.runs)
    differ = [k for k in REPORTED if reported.get(k) != fresh[k]]
    if not differ:
        return None
    return Finding(
        "report current",
        f"its metrics.json does not match the stored episodes ({', '.join(differ)} differ)",
        f"rebuild it: `deepswe-eval report {eval_run}`",
        "the number comes from a metrics.json older than the episodes stored, so it may "
        "not count all of them.",
    )


def refusal(eval_run: Path, findings: list[Finding]) -> str:
    """The one line `publish` refuses with: why, what to do, and the override."""
    why = " ".join(f"{f.problem[0].upper()}{f.problem[1:]} - {f.remedy}." for f in findings)
    return (
        f"{eval_run}'s Pass@1 cannot go in this model's card. {why} Or --force (FORCE=1) "
        "publishes it, the card saying which check was overridden."
    )
