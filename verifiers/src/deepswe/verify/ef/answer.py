"""Reading the judge's answer from a reply's tokens and their top log-probs.

Score = P(YES) / (P(YES) + P(NO)) at the answer token. The answer token is found by content:
the first generated token after `<judgement>` whose own text (past any part of the tag it also
holds, spaces and a closing `</` dropped) is YES or NO, or the start of one ("Y", "N": a
tokenizer may split the word). The reference read a fixed position (4), which holds only for
the tokenizer it was written against (issue 11).

At that position every top alternative whose text, read the same way, is YES (or its start) adds
to P(YES), " YES" and "YES" alike, and likewise for NO. Case is ignored: "Yes" is a yes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from deepswe.verify.ef.render import TAG_OPEN
from deepswe.verify.types import VerdictStatus


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token: its text, log-prob, and the top alternatives (text, log-prob)."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class Judgement:
    """What a judge says about one prompt: a score in [0, 1], or a named reason there is none."""

    status: VerdictStatus
    score: float | None = None
    detail: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def label(text: str) -> str | None:
    """ "YES" or "NO" when `text` is that word or a start of it (case, spaces, a closing tag
    ignored), else None."""
    word = text.split("<", 1)[0].strip().upper()
    if not word:
        return None
    if "YES".startswith(word):
        return "YES"
    if "NO".startswith(word):
        return "NO"
    return None


def logsumexp(values: Sequence[float]) -> float:
    top = max(values)
    return top + math.log(sum(math.exp(v - top) for v in values))


def ratio(logp_yes: float, logp_no: float) -> float:
    """P(YES) / (P(YES) + P(NO)) from the two log-probs, without underflow: both may be far
    below exp's range and the ratio is still exact."""
    d = logp_no - logp_yes
    return 1.0 / (1.0 + math.exp(d)) if d < 700 else 0.0


def read_answer(tokens: Sequence[TokenLogprob]) -> Judgement:
    """The judgement in a reply's tokens (see the module docstring). NO_ANSWER, with the
    reason, when there is no tag, no YES/NO token after it, or neither word among its top
    alternatives."""
    text = "".join(t.token for t in tokens)
    tag = text.find(TAG_OPEN)
    if tag < 0:
        return Judgement(VerdictStatus.NO_ANSWER, detail=f"no {TAG_OPEN} in reply {text[:120]!r}")
    tag_end, end = tag + len(TAG_OPEN), 0
    for i, tok in enumerate(tokens):
        begin, end = end, end + len(tok.token)
        if end <= tag_end:
            continue
        lead = text[begin:tag_end] if begin < tag_end else ""  # the tag's tail in this token
        if label(tok.token[len(lead) :]) is None:
            continue
        return _score_at(i, tok, lead)
    return Judgement(
        VerdictStatus.NO_ANSWER, detail=f"no YES/NO token after {TAG_OPEN} in {text[:120]!r}"
    )


def _score_at(index: int, tok: TokenLogprob, lead: str) -> Judgement:
    alternatives = tok.top or ((tok.token, tok.logprob),)
    found: dict[str, list[float]] = {"YES": [], "NO": []}
    seen: set[str] = set()
    for alt, logprob in alternatives:
        if alt in seen or not alt.startswith(lead):
            continue
        seen.add(alt)
        word = label(alt[len(lead) :])
        if word is not None:
            found[word].append(logprob)
    logp = {w: logsumexp(v) if v else -math.inf for w, v in found.items()}
    facts = {"answer_token": tok.token, "answer_index": index, "top_k": len(alternatives)}
    facts |= {"p_yes": math.exp(logp["YES"]), "p_no": math.exp(logp["NO"])}
    if not found["YES"] and not found["NO"]:
        shown = [a for a, _ in alternatives][:8]
        return Judgement(
            VerdictStatus.NO_ANSWER,
            detail=f"neither YES nor NO among the top {len(alternatives)} log-probs at the "
            f"answer token {tok.token!r}: {shown}",
            extra=facts,
        )
    # One word absent from the top k: its probability is below the k-th; the score is 1 or 0.
    score = 1.0 if not found["NO"] else 0.0 if not found["YES"] else ratio(logp["YES"], logp["NO"])
    return Judgement(VerdictStatus.SCORED, score, extra=facts)
