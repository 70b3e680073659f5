"""SKILL.md: the intermediate parser, both render profiles, both validators, round trips."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from skillsynth.errors import MalformedSkill, SkillValidationError
from skillsynth.pipeline.skill import (
    NAME_RE,
    PROFILES,
    Skill,
    strip_wrappers,
    validate_agentskills,
    validate_dir,
    validate_gaia691,
)

GOOD = """---
name: summarise-report
when_to_use: "The user asks: summarise a report"
tools_required:
  - search_file
  - query_documents
---

1. Call search_file.
2. Call query_documents.

## Edge cases
- Nothing found: ask.
"""

YAML_SPECIAL = ["key: value", "# not a comment", "---", "--", "'single'", '"double"', "- item",
                "[a, b]", "{x: 1}", "&anchor *alias", "!tag", "|", ">", "%YAML", "@", "`",
                "é ü 漢字 🙂", "\\", "\t", "\n", "null", "true", "1.0", "0x1F", "~", "?", "\x85",
                "\u2028", "\ufeff", "x" * 300]

special_text = st.lists(st.sampled_from(YAML_SPECIAL) | st.text(max_size=20), min_size=1,
                        max_size=8).map(" ".join)
names = st.from_regex(r"\A[a-z0-9]{1,8}(-[a-z0-9]{1,8}){0,4}\Z")
tool_names = st.lists(st.from_regex(r"\A[A-Za-z_][A-Za-z0-9_.\-]{0,20}\Z"), min_size=1,
                      max_size=5, unique=True)
hyp = settings(max_examples=150, deadline=None,
               suppress_health_check=[HealthCheck.function_scoped_fixture])


def _skill_or_rejection(**kw):
    try:
        return Skill(**kw)
    except MalformedSkill as exc:
        assert exc.field in {"name", "description", "body", "tools_required", "license",
                             "version"}
        assert str(exc).startswith(exc.field)
        return None


@pytest.mark.parametrize("profile", PROFILES)
@hyp
@given(name=names, description=special_text | st.text(min_size=1), body=special_text,
       tools=tool_names)
def test_round_trip_survives_or_is_rejected_at_construction(tmp_path_factory, profile, name,
                                                            description, body, tools):
    skill = _skill_or_rejection(name=name, description=description, body=body,
                                tools_required=tuple(tools))
    if skill is None:
        return
    skill_dir = skill.write(tmp_path_factory.mktemp("rt"), profile)
    assert skill_dir.name == name and (skill_dir / "SKILL.md").is_file()
    assert validate_dir(skill_dir, profile) == []
    assert Skill.read(skill_dir, profile) == skill


@pytest.mark.parametrize("profile", PROFILES)
@hyp
@given(name=names, text=special_text, tools=tool_names)
def test_stripped_yaml_special_text_always_survives(tmp_path_factory, profile, name, text,
                                                    tools):
    clean = text.replace("\r", " ").strip()
    assume(clean and len(clean) <= 1024 and not re.search("[\ud800-\udfff]", clean))
    skill = Skill(name=name, description=clean, body=clean, tools_required=tuple(tools))
    skill_dir = skill.write(tmp_path_factory.mktemp("rt"), profile)
    assert Skill.read(skill_dir, profile) == skill
    assert "--" not in (skill_dir / "SKILL.md").read_text().split("\n---\n")[0][3:]


def test_parse_maps_intermediate_to_canonical():
    s = Skill.parse(GOOD)
    assert s.name == "summarise-report"
    assert s.description == s.when_to_use == "The user asks: summarise a report"
    assert s.tools_required == ("search_file", "query_documents")
    assert (s.license, s.version) == ("MIT", "1.0.0")
    assert s.body.startswith("1. Call search_file.") and s.body.endswith("- Nothing found: ask.")
    assert Skill.parse(s.to_intermediate()) == s


@pytest.mark.parametrize("text, field", [
    (GOOD.replace("name: summarise-report", "name: Summarise Report"), "name"),
    (GOOD.replace("name: summarise-report", "name: a--b"), "name"),
    (GOOD.replace("name: summarise-report", f"name: {'a' * 65}"), "name"),
    (GOOD.replace('when_to_use: "The user asks: summarise a report"',
                  f"when_to_use: {'w' * 1025}"), "description"),
    (GOOD.replace('when_to_use: "The user asks: summarise a report"', "when_to_use: ''"),
     "description"),
    (GOOD.replace("tools_required:\n  - search_file\n  - query_documents",
                  "tools_required: search_file"), "tools_required"),
    (GOOD.replace("  - query_documents", "  - search_file"), "tools_required"),
    (GOOD.replace("  - query_documents", "  - query documents"), "tools_required"),
    (GOOD.replace("tools_required:", "version: 2.0.0\ntools_required:"), "frontmatter"),
    (GOOD.replace("name: summarise-report\n", ""), "name"),
    (GOOD.replace("1. Call search_file.\n2. Call query_documents.", "Call things."), "body"),
    (GOOD.replace("## Edge cases", "## Notes"), "body"),
    ("```yaml\n" + GOOD + "```\n", "frontmatter"),
    (GOOD.replace("---\n\n1.", "\n1."), "frontmatter"),
    (GOOD.replace('"The user asks: summarise a report"', "The user asks: summarise"),
     "frontmatter"),
    ("SKIP", "frontmatter"),
    (GOOD.replace("1. Call search_file.", "1. Call search_file.\x00"), "document"),
    (GOOD.replace('"The user asks: summarise a report"', '"The user asks\\u0000 a report"'),
     "frontmatter"),  # an escaped NUL, as JSON-mode renders one
])
def test_parse_rejects_malformed_input_naming_the_field(text, field):
    with pytest.raises(MalformedSkill) as info:
        Skill.parse(text)
    assert info.value.field == field


def test_strip_wrappers_is_explicit_and_then_parse_accepts():
    wrapped = "<think>plan it</think>\n```markdown\n" + GOOD + "```"
    with pytest.raises(MalformedSkill):
        Skill.parse(wrapped)
    assert Skill.parse(strip_wrappers(wrapped)) == Skill.parse(GOOD)


def _write(tmp_path: Path, dirname: str, text: str) -> Path:
    d = tmp_path / dirname
    d.mkdir()
    (d / "SKILL.md").write_text(text, encoding="utf-8")
    return d


DOC = """---
name: {name}
description: {description}
license: MIT
{extra}---

Body.
"""


def _doc(name="my-skill", description="Does things.", extra=""):
    return DOC.format(name=name, description=description, extra=extra)


@pytest.mark.parametrize("name, dirname, ok", [
    ("my-skill", "my-skill", True),
    ("a1-b2-c3", "a1-b2-c3", True),
    ("My-Skill", "My-Skill", False),
    ("my--skill", "my--skill", False),
    ("-my-skill", "-my-skill", False),
    ("my-skill-", "my-skill-", False),
    ("my_skill", "my_skill", False),
    ("a" * 64, "a" * 64, True),
    ("a" * 65, "a" * 65, False),
    ("my-skill", "other-dir", False),
])
def test_name_rules_under_both_validators(tmp_path, name, dirname, ok):
    d = _write(tmp_path, dirname, _doc(name=name))
    assert (validate_gaia691(d) == []) is ok
    assert (validate_agentskills(d) == []) is ok


@pytest.mark.parametrize("description, ok", [
    ("x" * 1024, True), ("x" * 1025, False), ('""', False)])
def test_description_length_under_both_validators(tmp_path, description, ok):
    d = _write(tmp_path, "my-skill", _doc(description=description))
    assert (validate_gaia691(d) == []) is ok
    assert (validate_agentskills(d) == []) is ok


def test_top_level_version_splits_the_validators(tmp_path):
    d = _write(tmp_path, "my-skill", _doc(extra='version: "1.0.0"\n'))
    assert validate_gaia691(d) == []
    errors = validate_agentskills(d)
    assert len(errors) == 1 and "version" in errors[0]


@pytest.mark.parametrize("extra", ["metadata: {}\n", "metadata:\n  tools: [a, b]\n",
                                   "allowed-tools: [read_file]\n"])
def test_flow_style_yaml_fails_skills_ref_only(tmp_path, extra):
    d = _write(tmp_path, "my-skill", _doc(extra=extra))
    assert validate_agentskills(d)
    assert validate_gaia691(d) == [] or "metadata.gaia" in " ".join(validate_gaia691(d))


@pytest.mark.parametrize("version, ok", [
    ('"1.0.0"', True), ('"1.2.3-rc.1+build.5"', True), ('"1.0"', False), ('"v1.0.0"', False),
    ('"01.0.0"', False), ("1.0", False), ('"1.0.0-"', False)])
def test_semver_under_gaia691(tmp_path, version, ok):
    d = _write(tmp_path, "my-skill", _doc(extra=f"version: {version}\n"))
    assert (validate_gaia691(d) == []) is ok


@pytest.mark.parametrize("extra, ok", [
    ("metadata:\n  gaia:\n    security_tier: verified\n    tools_required:\n      - a\n", True),
    ("metadata:\n  gaia:\n    security_tier: trusted\n", False),
    ("metadata:\n  gaia:\n    tools_required: read_file\n", False),
    ("metadata:\n  gaia:\n    permissions:\n      - 1\n", False),
])
def test_gaia_metadata_rules(tmp_path, extra, ok):
    d = _write(tmp_path, "my-skill", _doc(extra=extra))
    assert (validate_gaia691(d) == []) is ok


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.from_regex(r"\A[a-z0-9\-_A-Z]{1,70}\Z"))
def test_validators_agree_with_the_name_rule(tmp_path_factory, name):
    d = _write(tmp_path_factory.mktemp("v"), name, _doc(name=f'"{name}"'))
    expected = bool(NAME_RE.match(name)) and len(name) <= 64
    assert (validate_gaia691(d) == []) is expected
    assert (validate_agentskills(d) == []) is expected


def test_unquoted_numeric_name_splits_the_validators(tmp_path):
    # safe_load (GAIA) reads `name: 123` as an int; strictyaml (skills-ref) as a string.
    d = _write(tmp_path, "123", _doc(name="123"))
    assert validate_gaia691(d) and validate_agentskills(d) == []


def test_read_reports_every_validator_error(tmp_path):
    d = _write(tmp_path, "other", _doc(extra='version: "1.0"\n'))
    with pytest.raises(SkillValidationError) as info:
        Skill.read(d, "gaia691")
    assert len(info.value.errors) == 2 and info.value.profile == "gaia691"


def test_write_refuses_to_overwrite(tmp_path):
    s = Skill.parse(GOOD)
    s.write(tmp_path)
    with pytest.raises(Exception, match="exists"):
        s.write(tmp_path)
    s.write(tmp_path, overwrite=True)
