"""Profiles are read once, the same way for every section: errors name the file or the field."""

from __future__ import annotations

import pytest

from deepswe.data.profile import read_profile
from deepswe.eval.config import ConfigError, load_eval_config


def test_a_profile_that_is_not_a_mapping_of_sections_is_named(tmp_path):
    missing = tmp_path / "nowhere.yaml"
    with pytest.raises(ConfigError, match="nowhere.yaml: cannot read"):
        read_profile(missing)
    listed = tmp_path / "list.yaml"
    listed.write_text("- eval\n- runs\n")
    with pytest.raises(ConfigError, match="list.yaml: want a mapping of sections"):
        load_eval_config(listed)


def test_an_override_reaches_the_eval_section_and_a_bad_field_is_named(tmp_path):
    profile = tmp_path / "p.yaml"
    profile.write_text("eval:\n  dataset: swe-mini:test\n  runs: 2\n")
    assert load_eval_config(profile, ["eval.runs=5"]).runs == 5
    with pytest.raises(ConfigError, match="runs"):
        load_eval_config(profile, ["eval.runs=-1"])
