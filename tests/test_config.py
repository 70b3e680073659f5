"""Thresholds: GAIA's defaults, loaders, precedence and loud errors."""

from __future__ import annotations

import json

import pytest

from skillsynth.config import Thresholds, gaia_memory_disabled, load_thresholds
from skillsynth.errors import ConfigError


def test_defaults_are_gaias():
    t = Thresholds()
    assert t.to_settings_block() == {
        "enabled": True, "min_steps": 3, "min_occurrences": 3, "min_success_rate": 0.80,
        "similarity_tau": 0.82, "max_clusters_per_pass": 10, "max_recall_body_chars": 1500,
        "recall_top_k": 2}


@pytest.mark.parametrize("key, value, needle", [
    ("similarity_tau", 1.2, "between 0.0 and 1.0"),
    ("similarity_tau", float("nan"), "finite"),
    ("min_success_rate", -0.1, "between 0.0 and 1.0"),
    ("min_occurrences", 0, ">= 1"),
    ("min_steps", 2.5, "integer"),
    ("min_steps", True, "integer"),
    ("enabled", "yes", "true or false"),
    ("similarity_tau", "0.8", "number"),
])
def test_invalid_values_name_key_and_range(key, value, needle):
    with pytest.raises(ConfigError) as info:
        Thresholds().merge({key: value})
    assert info.value.key == f"skill_synthesis.{key}"
    assert needle in str(info.value) and key in str(info.value)


def test_merge_none_inherits_and_unknown_is_rejected():
    t = Thresholds().merge({"similarity_tau": 0.9, "min_steps": None})
    assert t.similarity_tau == 0.9 and t.min_steps == 3
    with pytest.raises(ConfigError, match="similarity_taw"):
        Thresholds().merge({"similarity_taw": 0.9})


def test_memory_settings_json_block(tmp_path):
    p = tmp_path / "memory_settings.json"
    p.write_text(json.dumps({"other_gaia_key": 1,
                             "skill_synthesis": {"similarity_tau": 0.75, "enabled": False}}))
    t = Thresholds.from_memory_settings(p)
    assert (t.similarity_tau, t.enabled, t.min_steps) == (0.75, False, 3)
    p.write_text(json.dumps({"skill_synthesis": {"min_steps": 0}}))
    with pytest.raises(ConfigError) as info:
        Thresholds.from_memory_settings(p)
    assert info.value.source == str(p)
    p.write_text("{not json")
    with pytest.raises(ConfigError, match="JSON"):
        Thresholds.from_memory_settings(p)


def test_yaml_block_or_bare(tmp_path):
    a = tmp_path / "a.yaml"
    a.write_text("skill_synthesis:\n  min_occurrences: 4\n")
    b = tmp_path / "b.yaml"
    b.write_text("min_occurrences: 5\n")
    assert Thresholds.from_yaml(a).min_occurrences == 4
    assert Thresholds.from_yaml(b).min_occurrences == 5


def test_precedence_override_env_file_default(tmp_path):
    p = tmp_path / "t.yaml"
    p.write_text("similarity_tau: 0.70\nmin_steps: 4\nmin_occurrences: 6\n")
    env = {"SKILLSYNTH_SIMILARITY_TAU": "0.75", "SKILLSYNTH_MIN_STEPS": "5"}
    t = load_thresholds(p, overrides={"similarity_tau": 0.9}, env=env)
    assert (t.similarity_tau, t.min_steps, t.min_occurrences, t.recall_top_k) == (0.9, 5, 6, 2)
    with pytest.raises(ConfigError, match="SKILLSYNTH_MIN_STEPS"):
        load_thresholds(env={"SKILLSYNTH_MIN_STEPS": "three"})


def test_settings_block_round_trips(tmp_path):
    t = Thresholds(similarity_tau=0.7, min_occurrences=4)
    p = tmp_path / "memory_settings.json"
    p.write_text(json.dumps({"skill_synthesis": t.to_settings_block()}))
    assert load_thresholds(p, env={}) == t


def test_memory_disabled_is_the_exact_string_1():
    assert gaia_memory_disabled({"GAIA_MEMORY_DISABLED": "1"})
    assert not gaia_memory_disabled({"GAIA_MEMORY_DISABLED": "true"})
    assert not gaia_memory_disabled({})
