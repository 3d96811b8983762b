"""One GRPO++ step's record, typed: what the trainer writes and the reports and plots read.

On disk it stays one flat JSON object a line (runs/ID/metrics.jsonl, `section/name` keys, as
TensorBoard and every earlier run folder have them): `StepRecord.flat()` writes those keys and
`StepRecord.from_flat()` reads them back, a key no section declares kept in `extra` (a plug-in's
own metrics survive the round trip). Readers use the fields, so a renamed key breaks at one
place, here, and not in three packages' string lookups.

Where a step's time goes (`time`, seconds of wall clock): `rollout` the trainer's wait for its
batch at the step's start, `old_logprobs`, `update`, `push_weights`, `step`; `generation_wall`
the batch's sampling from its start to its end wherever it ran, `generation_exposed` what the
step waited for sampling in all (one step behind: `wait_next_rollout` too), so
`generation_wall - generation_exposed` is the generation hidden behind training; `engine_busy`
the engine's own compute during this step's sampling (where the engine counts it) and
`episodes_model|episodes_tools|episodes_grading` the batch's episode seconds summed over episodes
(waiting for replies, in tool calls, in the reward run).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RewardPart(_Section):
    mean: float | None = None  # over the rows that are not infra_error; None when none is
    infra_rows: float = 0.0
    tampered_rows: float = 0.0
    gate_tier1_rows: float = 0.0
    gate_tier2_rows: float = 0.0


class GroupsPart(_Section):
    solve_all: float = 0.0
    solve_none: float = 0.0
    partial: float = 0.0


class FilterPart(_Section):
    masked: float = 0.0
    dropped: float = 0.0
    trained: float = 0.0
    ending: dict[str, float] = Field(default_factory=dict)  # filter/ending/<ending>


class TokensPart(_Section):
    total: float = 0.0
    response: float = 0.0
    trained: float = 0.0


class RolloutPart(_Section):
    logprob_diff: float = 0.0


class ActorPart(_Section):
    loss: float | None = None
    grad_norm: float | None = None
    skipped: float | None = None
    clipfrac: float | None = None
    approx_kl: float | None = None
    entropy: float | None = None


class TimePart(_Section):
    rollout: float | None = None
    old_logprobs: float | None = None
    update: float | None = None
    push_weights: float | None = None
    step: float | None = None
    generation_wall: float | None = None
    generation_exposed: float | None = None
    wait_next_rollout: float | None = None
    engine_busy: float | None = None
    episodes_model: float | None = None
    episodes_tools: float | None = None
    episodes_grading: float | None = None


class LimitsPart(_Section):
    action_timeouts: float = 0.0
    episode_timeouts: float = 0.0
    test_timeouts: float = 0.0
    fired: float = 0.0


class StalenessPart(_Section):
    max: float | None = None
    mean: float | None = None
    lags: dict[str, float] = Field(default_factory=dict)  # staleness/<lag>: rows that lag so


class OffPolicyPart(_Section):
    masked_rows: float | None = None
    masked_share: float | None = None
    abs_log_ratio_mean: float | None = None
    abs_log_ratio_max: float | None = None


# section key -> (field name, model); a dict field takes the keys one level below its prefix
_SECTIONS: dict[str, tuple[str, type[_Section]]] = {
    "reward": ("reward", RewardPart),
    "groups": ("groups", GroupsPart),
    "filter": ("filter", FilterPart),
    "tokens": ("tokens", TokensPart),
    "rollout": ("rollout", RolloutPart),
    "actor": ("actor", ActorPart),
    "time": ("time", TimePart),
    "limits": ("limits", LimitsPart),
    "staleness": ("staleness", StalenessPart),
    "offpolicy": ("offpolicy", OffPolicyPart),
}
_DICTS = {("filter", "ending"): "ending", ("staleness", None): "lags"}


class StepRecord(BaseModel):
    """A step's metrics (module doc); `step` counts optimizer steps done, from 1."""

    model_config = ConfigDict(extra="forbid")

    step: int
    reward: RewardPart = Field(default_factory=RewardPart)
    groups: GroupsPart = Field(default_factory=GroupsPart)
    filter: FilterPart = Field(default_factory=FilterPart)
    tokens: TokensPart = Field(default_factory=TokensPart)
    rollout: RolloutPart = Field(default_factory=RolloutPart)
    actor: ActorPart = Field(default_factory=ActorPart)
    time: TimePart = Field(default_factory=TimePart)
    limits: LimitsPart = Field(default_factory=LimitsPart)
    staleness: StalenessPart = Field(default_factory=StalenessPart)
    offpolicy: OffPolicyPart = Field(default_factory=OffPolicyPart)
    extra: dict[str, Any] = Field(default_factory=dict, description="keys no section declares")

    @classmethod
    def from_flat(cls, flat: dict[str, Any]) -> StepRecord:
        """The record of a metrics.jsonl line (or the dict the trainer's metrics functions make)."""
        parts: dict[str, dict[str, Any]] = {name: {} for name in _SECTIONS}
        extra: dict[str, Any] = {}
        for key, value in flat.items():
            if key == "step":
                continue
            section, _, rest = key.partition("/")
            if section not in _SECTIONS or not rest:
                extra[key] = value
                continue
            model = _SECTIONS[section][1]
            head, _, tail = rest.partition("/")
            if tail and (section, head) in _DICTS:
                parts[section].setdefault(_DICTS[section, head], {})[tail] = value
            elif not tail and head in model.model_fields and head not in ("ending", "lags"):
                parts[section][head] = value
            elif not tail and (section, None) in _DICTS:
                parts[section].setdefault(_DICTS[section, None], {})[head] = value
            else:
                extra[key] = value
        return cls(step=int(flat["step"]), extra=extra, **parts)

    def flat(self) -> dict[str, Any]:
        """The metrics.jsonl keys: every set value under `section/name` (None is left out)."""
        out: dict[str, Any] = {"step": self.step}
        for section, (name, _) in _SECTIONS.items():
            part = getattr(self, name)
            for field, value in part:
                if isinstance(value, dict):
                    head = next(h for (s, h), f in _DICTS.items() if s == section and f == field)
                    prefix = f"{section}/{head}/" if head else f"{section}/"
                    out.update({prefix + k: v for k, v in value.items()})
                elif value is not None:
                    out[f"{section}/{field}"] = value
        out.update(self.extra)
        return out

    @property
    def generation_hidden(self) -> float | None:
        """Seconds of this batch's sampling that ran while the trainer worked."""
        t = self.time
        if t.generation_wall is None or t.generation_exposed is None:
            return None
        return max(0.0, t.generation_wall - t.generation_exposed)


def read_metrics(path: Path) -> list[StepRecord]:
    """The records of a run's metrics.jsonl (none when it does not exist)."""
    if not path.is_file():
        return []
    return [StepRecord.from_flat(json.loads(x)) for x in path.read_text().splitlines() if x]
