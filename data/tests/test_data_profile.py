"""One profile loader, one override rule: full dotted paths from the top of the profile."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict

from deepswe.data.profile import ConfigError, load_section


class _Inner(BaseModel):
    model_config = ConfigDict(extra="forbid")
    steps: int = 1


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")
    runs: int = 1
    inner: _Inner = _Inner()


def test_a_section_with_full_path_overrides_then_flags(tmp_path):
    profile = tmp_path / "p.yaml"
    profile.write_text("eval:\n  runs: 2\n  inner: {steps: 3}\ntrain:\n  lr: 1\n")
    got = load_section(profile, "eval", _Section, ["eval.inner.steps=7"], {"runs": 4})
    assert (got.runs, got.inner.steps) == (4, 7)
    assert load_section(None, "eval", _Section).runs == 1  # no profile: the defaults


def test_an_override_outside_the_section_or_without_its_path_is_refused_by_name(tmp_path):
    profile = tmp_path / "p.yaml"
    profile.write_text("eval:\n  runs: 2\n")
    for bad in ("runs=3", "train.lr=2", "eval=3"):
        with pytest.raises(ConfigError, match=rf"override '{bad}': want eval.<key>=value"):
            load_section(profile, "eval", _Section, [bad])


def test_a_bad_value_is_named_by_its_full_path(tmp_path):
    profile = tmp_path / "p.yaml"
    profile.write_text("eval:\n  inner: {steps: many}\n  colour: red\n")
    with pytest.raises(ConfigError) as err:
        load_section(profile, "eval", _Section)
    assert "eval.inner.steps:" in str(err.value) and "eval.colour: unknown key" in str(err.value)
    profile.write_text("eval: [1, 2]\n")
    with pytest.raises(ConfigError, match="`eval:` must be a mapping"):
        load_section(profile, "eval", _Section)
