"""The typed step record (deepswe.train.step_record): metrics.jsonl lines read into fields and
written back unchanged, a plug-in's own keys kept."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from deepswe.train.step_record import StepRecord, read_metrics

LINE = {
    "step": 3,
    "reward/mean": 0.5,
    "reward/infra_rows": 1.0,
    "groups/partial": 2.0,
    "filter/ending/submitted": 7.0,
    "filter/ending/infra_error": 1.0,
    "filter/trained": 7.0,
    "actor/loss": -0.1,
    "time/step": 12.5,
    "time/generation_wall": 9.0,
    "time/generation_exposed": 3.0,
    "staleness/max": 1.0,
    "staleness/mean": 1.0,
    "staleness/1": 8.0,
    "offpolicy/masked_rows": 0.0,
    "limits/fired": 0.0,
    "my_plugin/score": 4.2,  # a key no section declares
    "time/my_phase": 1.5,
}


def test_a_line_round_trips_and_reads_as_fields(tmp_path):
    r = StepRecord.from_flat(LINE)
    assert r.flat() == {**LINE, **{k: v for k, v in r.flat().items() if k not in LINE}}
    assert set(r.flat()) - set(LINE) == {
        "reward/tampered_rows",
        "reward/gate_tier1_rows",
        "reward/gate_tier2_rows",
        "groups/solve_all",
        "groups/solve_none",
        "filter/masked",
        "filter/dropped",
        "tokens/total",
        "tokens/response",
        "tokens/trained",
        "rollout/logprob_diff",
        "limits/action_timeouts",
        "limits/episode_timeouts",
        "limits/test_timeouts",
    }  # counts the trainer always writes, 0 by default
    assert r.reward.mean == 0.5 and r.filter.ending == {"submitted": 7.0, "infra_error": 1.0}
    assert r.staleness.lags == {"1": 8.0} and r.staleness.max == 1.0
    assert r.generation_hidden == 6.0 and r.time.step == 12.5
    assert r.extra == {"my_plugin/score": 4.2, "time/my_phase": 1.5}
    again = StepRecord.from_flat(r.flat())
    assert again == r
    path = tmp_path / "metrics.jsonl"
    path.write_text(json.dumps(LINE) + "\n" + json.dumps({"step": 4}) + "\n")
    first, second = read_metrics(path)
    assert first == r and second.reward.mean is None and second.step == 4
    assert read_metrics(tmp_path / "none.jsonl") == []


def test_a_line_without_its_step_or_with_a_wrong_type_is_refused():
    with pytest.raises(KeyError):
        StepRecord.from_flat({"reward/mean": 1.0})
    with pytest.raises(ValidationError, match="reward.mean"):
        StepRecord.from_flat({"step": 1, "reward/mean": "high"})
