"""Thresholds: GAIA's defaults, loaders, precedence and loud errors."""

from __future__ import annotations

import json
import logging

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


# ----------------------------------------------------------------- recall_tau and calibration
def test_recall_tau_is_unset_by_default_and_then_follows_similarity_tau():
    from skillsynth.config import Thresholds

    th = Thresholds(similarity_tau=0.6)
    assert th.recall_tau is None and th.effective_recall_tau == 0.6
    assert "recall_tau" not in th.to_settings_block()  # GAIA's block gets no null
    assert th.merge(recall_tau=0.4).effective_recall_tau == 0.4
    with pytest.raises(ConfigError, match="recall_tau=1.5 is out of range"):
        Thresholds(recall_tau=1.5)


@pytest.fixture
def calibrated(monkeypatch):
    """A FAKE shipped calibration for the embedder id 'emb-x' (the numbers are arbitrary)."""
    from skillsynth import config

    table = {"emb-x": {"similarity_tau": 0.55, "recall_tau": 0.45, "method": "fake"}}
    monkeypatch.setattr(config, "calibrated_defaults", lambda e: table.get(e.split(":")[0]))


def test_the_embedders_calibration_applies_only_when_asked_for_and_no_tau_is_set(calibrated):
    # the default is GAIA's thresholds, whatever the embedder (issue: the calibration lumps)
    default = load_thresholds(env={}, embedder="emb-x:384")
    assert (default.similarity_tau, default.recall_tau) == (0.82, None)
    th = load_thresholds(env={}, embedder="emb-x:384", calibrated=True)
    assert (th.similarity_tau, th.recall_tau) == (0.55, 0.45)
    other = load_thresholds(env={}, embedder="user.embeddinggemma-300m-GGUF", calibrated=True)
    assert (other.similarity_tau, other.recall_tau) == (0.82, None)  # GAIA's own embedder
    assert load_thresholds(env={}).similarity_tau == 0.82


def test_a_users_tau_wins_with_a_warning_naming_both_values(calibrated, tmp_path, caplog):
    settings = tmp_path / "memory_settings.json"
    settings.write_text(json.dumps({"skill_synthesis": {"similarity_tau": 0.82}}))
    with caplog.at_level(logging.WARNING, "skillsynth.config"):
        th = load_thresholds(settings, env={}, embedder="emb-x", calibrated=True)
    # the user set a tau: used as given, and recall follows it as in GAIA
    assert (th.similarity_tau, th.recall_tau, th.effective_recall_tau) == (0.82, None, 0.82)
    assert "similarity_tau=0.82 from" in caplog.text and "similarity_tau=0.55" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, "skillsynth.config"):
        th = load_thresholds(env={}, overrides={"recall_tau": 0.3}, embedder="emb-x",
                             calibrated=True)
    assert (th.similarity_tau, th.recall_tau) == (0.55, 0.3)
    assert "recall_tau=0.3 from override" in caplog.text and "recall_tau=0.45" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, "skillsynth.config"):
        load_thresholds(env={}, overrides={"similarity_tau": 0.55}, embedder="emb-x",
                        calibrated=True)
    assert caplog.text == ""  # agreeing with the calibration is not a contradiction


def test_the_shipped_calibration_of_the_embedded_embedder_has_provenance():
    from skillsynth.config import calibrated_defaults
    from skillsynth.models.serve import EMBED_MODEL_ID

    cal = calibrated_defaults(EMBED_MODEL_ID)
    assert cal is not None, "data/calibration/<embedded embedder>.json is missing"
    assert 0 < cal["similarity_tau"] < 0.82 and 0 < cal["recall_tau"] < 1
    assert cal["embedder"].startswith(EMBED_MODEL_ID)
    assert cal["method"] and cal["created_at"] and cal["chat_model"]
    assert len(cal["corpora"]) >= 2
    for c in cal["corpora"]:
        assert len(c["sha256"]) == 64 and c["pairs"] > 0 and c["same_family_pairs"] > 0
    th = load_thresholds(env={}, embedder=EMBED_MODEL_ID, calibrated=True)
    assert (th.similarity_tau, th.recall_tau) == (cal["similarity_tau"], cal["recall_tau"])
    # it records the validation it failed, and so is not the default
    assert cal["validation"]["default"] is False
    assert cal["validation"]["downstream"].startswith("failed")
    assert load_thresholds(env={}, embedder=EMBED_MODEL_ID).similarity_tau == 0.82


def test_a_settings_path_that_is_a_folder_or_binary_is_a_config_error(tmp_path):
    from skillsynth.errors import ConfigError

    with pytest.raises(ConfigError, match="is a folder"):
        load_thresholds(tmp_path)
    binary = tmp_path / "memory_settings.json"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    with pytest.raises(ConfigError, match="not UTF-8 text") as exc:
        load_thresholds(binary)
    assert str(binary) in str(exc.value)


def test_a_stray_skillsynth_variable_and_a_missing_block_are_said(tmp_path, caplog):
    import logging

    with caplog.at_level(logging.WARNING, "skillsynth.config"):
        th = load_thresholds(env={"SKILLSYNTH_SIMILARITY_TAUU": "0.5", "SKILLSYNTH_HOME": "/x"})
    assert th.similarity_tau == Thresholds().similarity_tau
    assert "SKILLSYNTH_SIMILARITY_TAUU is not a skillsynth setting" in caplog.text
    assert "SKILLSYNTH_HOME," not in caplog.text.split("ignored:")[1].split("is not")[0]
    caplog.clear()
    gaia = tmp_path / "memory_settings.json"
    gaia.write_text('{"memory": {"enabled": true}}')
    with caplog.at_level(logging.WARNING, "skillsynth.config"):
        assert load_thresholds(gaia, env={}) == Thresholds()
    assert "no 'skill_synthesis' block" in caplog.text
