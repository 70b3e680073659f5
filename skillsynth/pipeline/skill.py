"""SKILL.md: the canonical skill document, its two render profiles and their validators.

Three shapes meet here:

* the **intermediate** shape an LLM emits (#887): frontmatter ``name``, ``when_to_use``,
  ``tools_required`` and a markdown body with numbered steps and a ``## Edge cases``
  section. :meth:`Skill.parse` maps it to a :class:`Skill`, injecting ``license: MIT`` and
  ``version: 1.0.0``. Nothing is repaired: a malformed answer is a
  :class:`~skillsynth.errors.MalformedSkill` that says what was wrong.
* the **gaia691** profile (GAIA #691): top-level ``version`` and a block list under
  ``metadata.gaia.tools_required``; read back with ``yaml.safe_load``.
* the **agentskills** profile (agentskills.io, checked by the real ``skills-ref``): only the
  fields skills-ref allows; ``version`` and ``tools_required`` travel as flat string
  metadata; read back with skills-ref's own parser.

Every scalar is written double-quoted with escapes, so YAML-special text (``: ``, ``#``,
quotes, a leading ``-``, unicode) cannot change the document's structure. skills-ref finds
the end of the frontmatter with ``content.split("---", 2)``, i.e. at the first ``---``
*anywhere*; a hyphen that follows another hyphen inside a scalar is therefore written as
``\\x2d`` so no run of hyphens ever appears raw in the frontmatter.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from ..errors import MalformedSkill, SkillError, SkillValidationError

__all__ = [
    "MAX_DESCRIPTION_CHARS",
    "MAX_NAME_CHARS",
    "NAME_RE",
    "PROFILES",
    "SEMVER_RE",
    "Profile",
    "Skill",
    "strip_wrappers",
    "validate_agentskills",
    "validate_dir",
    "validate_gaia691",
    "validate_skill",
]

Profile = Literal["gaia691", "agentskills"]
PROFILES: tuple[Profile, ...] = ("gaia691", "agentskills")

#: #691's skill-name rule (also what skills-ref accepts, restricted to ASCII).
NAME_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
MAX_NAME_CHARS = 64
MAX_DESCRIPTION_CHARS = 1024
#: SemVer 2.0.0, the regular expression published at semver.org.
SEMVER_RE = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$")
#: A tool name as GAIA registers it: an identifier, dots and hyphens allowed, no spaces
#: (the agentskills profile joins tool names with spaces).
TOOL_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")
SECURITY_TIERS = ("verified", "community", "experimental")
INTERMEDIATE_KEYS = ("name", "when_to_use", "tools_required")
_STEP_RE = re.compile(r"^\s*\d+[.)]\s+\S", re.MULTILINE)
_EDGE_RE = re.compile(r"^##\s+edge cases\s*$", re.MULTILINE | re.IGNORECASE)
# Characters PyYAML refuses to read raw, plus YAML line breaks; always escaped.
_YAML_UNSAFE = re.compile("[^\x09\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufeff\uff00-\ufffd"
                          "\U00010000-\U0010ffff]|\ufeff")


def _check_text(field: str, value: object, *, limit: int | None = None,
                single_line: bool = False) -> str:
    if not isinstance(value, str):
        raise MalformedSkill(f"must be a string, got {type(value).__name__}",
                             field=field)
    if not value.strip():
        raise MalformedSkill("is empty", field=field)
    if value != value.strip():
        raise MalformedSkill("has leading or trailing whitespace; SKILL.md "
                             "readers strip it, so it would not survive a round trip",
                             field=field)
    if "\r" in value:
        raise MalformedSkill("contains a carriage return; SKILL.md readers "
                             "translate it to a newline", field=field)
    if re.search("[\ud800-\udfff]", value):
        raise MalformedSkill("contains a lone surrogate (not encodable as UTF-8)",
                             field=field)
    if single_line and "\n" in value:
        raise MalformedSkill("must be a single line", field=field)
    if limit is not None and len(value) > limit:
        raise MalformedSkill(f"has {len(value)} characters; the limit is {limit}",
                             field=field)
    return value


@dataclass(frozen=True)
class Skill:
    """A synthesized procedure as a SKILL.md document.

    Construction validates every field, so an instance always renders to a document
    both profiles accept and re-read to an equal :class:`Skill`.

    Attributes:
        name: kebab-case id (``^[a-z0-9]+(-[a-z0-9]+)*$``, at most 64 characters); also
            the directory name the skill is written to.
        description: when the skill applies (#887's ``when_to_use``), at most 1024 chars.
        body: the markdown procedure, stripped, without frontmatter.
        tools_required: the tools the agent must have loaded, unique, in order.
        license: SPDX id; synthesized skills are MIT.
        version: SemVer 2.0.0 string.
    """

    name: str
    description: str
    body: str
    tools_required: tuple[str, ...]
    license: str = "MIT"
    version: str = "1.0.0"

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not NAME_RE.match(self.name):
            raise MalformedSkill(
                f"{self.name!r} must be lowercase letters and digits in "
                "hyphen-separated words (^[a-z0-9]+(-[a-z0-9]+)*$)", field="name")
        if len(self.name) > MAX_NAME_CHARS:
            raise MalformedSkill(f"has {len(self.name)} characters; the limit is "
                                 f"{MAX_NAME_CHARS}", field="name")
        _check_text("description", self.description, limit=MAX_DESCRIPTION_CHARS)
        _check_text("body", self.body)
        _check_text("license", self.license, single_line=True)
        if not isinstance(self.version, str) or not SEMVER_RE.match(self.version):
            raise MalformedSkill(f"{self.version!r} is not a SemVer 2.0.0 string",
                                 field="version")
        tools = self.tools_required
        if isinstance(tools, str) or not isinstance(tools, (tuple, list)):
            raise MalformedSkill("must be a list of tool names",
                                 field="tools_required")
        if not tools:
            raise MalformedSkill("is empty; a procedure names the tools it "
                                 "uses", field="tools_required")
        for t in tools:
            if not isinstance(t, str) or not TOOL_RE.match(t):
                raise MalformedSkill(f"tool name {t!r} is not an identifier "
                                     "(letters, digits, _ . -; no spaces)",
                                     field="tools_required")
        dupes = sorted({t for t in tools if tools.count(t) > 1})
        if dupes:
            raise MalformedSkill(f"repeats {', '.join(dupes)}",
                                 field="tools_required")
        object.__setattr__(self, "tools_required", tuple(tools))

    @property
    def when_to_use(self) -> str:
        """#887's name for :attr:`description`."""
        return self.description

    # ------------------------------------------------------------------ intermediate
    @classmethod
    def parse(cls, text: str, *, repairs: list[str] | None = None) -> Skill:
        """Parse the intermediate shape an LLM emits into a canonical Skill.

        The input is exactly a ``---`` frontmatter block with the keys ``name``,
        ``when_to_use`` and ``tools_required`` (a list of tool names), then a body that
        has numbered steps and a ``## Edge cases`` section. Wrappers an LLM adds (code
        fences, think tags) must be removed first with :func:`strip_wrappers`.

        Without ``repairs`` this function repairs nothing. With a list, one rule applies and
        is recorded in it: a tool named twice in ``tools_required`` keeps its first place
        (llama.cpp's JSON grammar does not enforce ``uniqueItems``, and a repeat loses no
        meaning); ``"tools_required: dropped repeated X"`` is appended per tool.

        Raises:
            MalformedSkill: naming the field or the part of the document that is wrong.
        """
        if not isinstance(text, str):
            raise MalformedSkill("expected the document as text", field="document")
        if "\x00" in text:
            raise MalformedSkill("contains a NUL character", field="document")
        front, body = _split_frontmatter(text)
        try:
            data = yaml.safe_load(front)
        except yaml.YAMLError as exc:
            raise MalformedSkill(f"frontmatter is not valid YAML: {exc}",
                                 field="frontmatter") from exc
        if not isinstance(data, dict):
            raise MalformedSkill("frontmatter must be a mapping of name, when_to_use and "
                                 "tools_required", field="frontmatter")
        if _has_nul(data):  # an escaped NUL (\u0000) decoded by YAML
            raise MalformedSkill("contains a NUL character", field="frontmatter")
        unknown = sorted(str(k) for k in data if k not in INTERMEDIATE_KEYS)
        if unknown:
            raise MalformedSkill(f"unexpected frontmatter keys: {', '.join(unknown)} "
                                 f"(allowed: {', '.join(INTERMEDIATE_KEYS)})",
                                 field="frontmatter")
        missing = [k for k in INTERMEDIATE_KEYS if k not in data]
        if missing:
            raise MalformedSkill(f"missing frontmatter keys: {', '.join(missing)}",
                                 field=missing[0])
        tools = data["tools_required"]
        if not isinstance(tools, list):
            raise MalformedSkill("must be a YAML list of tool names",
                                 field="tools_required")
        if repairs is not None:
            kept = [t for i, t in enumerate(tools) if not isinstance(t, str)
                    or t not in tools[:i]]
            repairs += [f"tools_required: dropped repeated {t}"
                        for t in dict.fromkeys(t for t in tools if isinstance(t, str)
                                               and tools.count(t) > 1)]
            tools = kept
        when = data["when_to_use"]
        if isinstance(when, str):
            when = when.strip()
        if not _STEP_RE.search(body):
            raise MalformedSkill("body has no numbered step (a line like '1. ...')",
                                 field="body")
        if not _EDGE_RE.search(body):
            raise MalformedSkill("body has no '## Edge cases' section", field="body")
        return cls(name=data["name"], description=when, body=body.strip(),
                   tools_required=tuple(tools))

    def to_intermediate(self) -> str:
        """This skill in the intermediate (LLM) shape; :meth:`parse` reads it back."""
        return ("---\n" + f"name: {_q(self.name)}\nwhen_to_use: {_q(self.description)}\n"
                "tools_required:\n" + "".join(f"  - {_q(t)}\n" for t in self.tools_required)
                + "---\n\n" + self.body + "\n")

    # ------------------------------------------------------------------ profiles
    def render(self, profile: Profile = "gaia691") -> str:
        """The SKILL.md text of this skill under ``profile``."""
        lines = ["---", f"name: {_q(self.name)}", f"description: {_q(self.description)}",
                 f"license: {_q(self.license)}"]
        if profile == "gaia691":
            lines += [f"version: {_q(self.version)}", "metadata:", "  gaia:",
                      "    tools_required:"]
            lines += [f"      - {_q(t)}" for t in self.tools_required]
        elif profile == "agentskills":
            lines += ["metadata:", f"  version: {_q(self.version)}",
                      f"  tools_required: {_q(' '.join(self.tools_required))}"]
        else:
            raise SkillError(f"unknown profile {profile!r}; choose one of {', '.join(PROFILES)}")
        return "\n".join(lines) + "\n---\n\n" + self.body + "\n"

    def write(self, parent: str | Path, profile: Profile = "gaia691", *,
              overwrite: bool = False) -> Path:
        """Write ``<parent>/<name>/SKILL.md`` and return the skill directory.

        Raises:
            SkillError: when the file exists and ``overwrite`` is false.
        """
        text = self.render(profile)
        skill_dir = Path(parent) / self.name
        path = skill_dir / "SKILL.md"
        if path.exists() and not overwrite:
            raise SkillError(f"{path} exists; pass overwrite=True to replace it")
        skill_dir.mkdir(parents=True, exist_ok=True)
        with open(path, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        return skill_dir

    @classmethod
    def read(cls, skill_dir: str | Path, profile: Profile = "gaia691") -> Skill:
        """Read a skill directory back through the profile's own parser.

        ``gaia691`` uses ``yaml.safe_load`` (as GAIA does); ``agentskills`` uses the
        ``skills-ref`` package's parser.

        Raises:
            SkillValidationError: the document fails the profile's validator.
            MalformedSkill: it validates but is not a skill skillsynth can represent.
        """
        skill_dir = Path(skill_dir)
        errors = validate_dir(skill_dir, profile)
        if errors:
            raise SkillValidationError(str(skill_dir), profile, errors)
        text = (skill_dir / "SKILL.md").read_text(encoding="utf-8")
        if profile == "gaia691":
            front, body = _split_frontmatter(text)
            data = yaml.safe_load(front)
            gaia = (data.get("metadata") or {}).get("gaia") or {}
            return cls(name=data["name"], description=data["description"], body=body.strip(),
                       tools_required=tuple(gaia.get("tools_required") or ()),
                       license=data.get("license", "MIT"),
                       version=data.get("version", "1.0.0"))
        from skills_ref.parser import parse_frontmatter

        meta, body = parse_frontmatter(text)
        extra = meta.get("metadata") or {}
        return cls(name=meta["name"], description=meta["description"], body=body,
                   tools_required=tuple(str(extra.get("tools_required", "")).split()),
                   license=meta.get("license", "MIT"), version=extra.get("version", "1.0.0"))


# ---------------------------------------------------------------------- helpers
def _q(value: str) -> str:
    """A YAML double-quoted scalar that no parser can misread and that holds no ``--``."""
    out = []
    prev = ""
    for ch in value:
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "-" and prev == "-":
            out.append("\\x2d")
        elif _YAML_UNSAFE.match(ch):
            code = ord(ch)
            out.append(f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")
        else:
            out.append(ch)
        prev = ch
    return '"' + "".join(out) + '"'


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_nul(v) for v in value)
    return False


def _split_frontmatter(text: str) -> tuple[str, str]:
    """Split ``---`` frontmatter from the body, line-based (a body may contain ``---``)."""
    lines = text.split("\n")
    if not lines or lines[0].rstrip() != "---":
        raise MalformedSkill("document must start with a '---' frontmatter line "
                             "(remove code fences or preamble first)", field="frontmatter")
    for i in range(1, len(lines)):
        if lines[i].rstrip() == "---":
            return "\n".join(lines[1:i]), "\n".join(lines[i + 1:])
    raise MalformedSkill("frontmatter is not closed by a '---' line", field="frontmatter")


_FENCE_RE = re.compile(r"^\s*```[A-Za-z0-9_-]*\s*\n(.*?)\n\s*```\s*$", re.DOTALL)
_THINK_RE = re.compile(r"<(think|thinking|reasoning)>.*?</\1>", re.DOTALL | re.IGNORECASE)


def strip_wrappers(text: str) -> str:
    """Remove what chat models wrap around an answer: think blocks and one code fence.

    GAIA strips these before parsing; the distill stage calls this explicitly and records
    that it did, so :meth:`Skill.parse` itself stays strict.
    """
    out = _THINK_RE.sub("", text).strip()
    m = _FENCE_RE.match(out)
    return (m.group(1) if m else out).strip() + "\n"


# ---------------------------------------------------------------------- validators
def validate_gaia691(skill_dir: str | Path) -> list[str]:
    """GAIA #691's rules for ``<skill_dir>/SKILL.md``; an empty list means valid.

    name ``^[a-z0-9]+(-[a-z0-9]+)*$``, at most 64 characters and equal to the directory
    name; description required, at most 1024 characters; license an optional string;
    version an optional SemVer 2.0.0 string; ``metadata.gaia``: ``security_tier`` one of
    verified/community/experimental, ``permissions``/``requirements``/``tools``/
    ``tools_required`` lists of strings. YAML is read with ``safe_load``; no body rules.
    """
    skill_dir = Path(skill_dir)
    path = skill_dir / "SKILL.md"
    if not path.is_file():
        return [f"Missing required file: {path}"]
    try:
        front, _ = _split_frontmatter(path.read_text(encoding="utf-8"))
        data = yaml.safe_load(front)
    except UnicodeDecodeError as exc:
        return [f"SKILL.md is not UTF-8: {exc}"]
    except MalformedSkill as exc:
        return [str(exc)]
    except yaml.YAMLError as exc:
        return [f"Invalid YAML in frontmatter: {exc}".replace("\n", " ")]
    if not isinstance(data, dict):
        return ["frontmatter must be a YAML mapping"]
    errors: list[str] = []
    name = data.get("name")
    if name is None:
        errors.append("Missing required field: name")
    elif not isinstance(name, str) or not NAME_RE.match(name):
        errors.append(f"name {name!r} must match ^[a-z0-9]+(-[a-z0-9]+)*$")
    else:
        if len(name) > MAX_NAME_CHARS:
            errors.append(f"name has {len(name)} characters; the limit is {MAX_NAME_CHARS}")
        if name != skill_dir.name:
            errors.append(f"name {name!r} must equal the directory name {skill_dir.name!r}")
    desc = data.get("description")
    if desc is None or (isinstance(desc, str) and not desc.strip()):
        errors.append("Missing required field: description")
    elif not isinstance(desc, str):
        errors.append("description must be a string")
    elif len(desc) > MAX_DESCRIPTION_CHARS:
        errors.append(f"description has {len(desc)} characters; the limit is "
                      f"{MAX_DESCRIPTION_CHARS}")
    if "license" in data and not isinstance(data["license"], str):
        errors.append("license must be a string")
    if "version" in data:
        v = data["version"]
        if not isinstance(v, str):
            errors.append(f"version must be a SemVer string, got {type(v).__name__} {v!r} "
                          "(quote it)")
        elif not SEMVER_RE.match(v):
            errors.append(f"version {v!r} is not SemVer 2.0.0")
    errors += _check_gaia_metadata(data.get("metadata"))
    return errors


def _check_gaia_metadata(meta: Any) -> list[str]:
    if meta is None:
        return []
    if not isinstance(meta, dict):
        return ["metadata must be a mapping"]
    gaia = meta.get("gaia")
    if gaia is None:
        return []
    if not isinstance(gaia, dict):
        return ["metadata.gaia must be a mapping"]
    errors = []
    tier = gaia.get("security_tier", "experimental")
    if tier not in SECURITY_TIERS:
        errors.append(f"metadata.gaia.security_tier {tier!r} must be one of "
                      f"{', '.join(SECURITY_TIERS)}")
    for key in ("permissions", "requirements", "tools", "tools_required"):
        if key in gaia:
            v = gaia[key]
            if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
                errors.append(f"metadata.gaia.{key} must be a list of strings")
    return errors


def validate_agentskills(skill_dir: str | Path) -> list[str]:
    """The agentskills.io reference validator (``skills_ref.validate``), run as is."""
    import skills_ref

    return list(skills_ref.validate(Path(skill_dir)))


def validate_dir(skill_dir: str | Path, profile: Profile) -> list[str]:
    """Validate a skill directory under ``profile``; an empty list means valid."""
    if profile == "gaia691":
        return validate_gaia691(skill_dir)
    if profile == "agentskills":
        return validate_agentskills(skill_dir)
    raise SkillError(f"unknown profile {profile!r}; choose one of {', '.join(PROFILES)}")


def validate_skill(skill: Skill, profile: Profile) -> list[str]:
    """Write ``skill`` to a scratch ``<name>/SKILL.md`` and validate it under ``profile``."""
    with tempfile.TemporaryDirectory(prefix="skillsynth-validate-") as tmp:
        return validate_dir(skill.write(tmp, profile), profile)
