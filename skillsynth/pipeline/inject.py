"""Inject: the planner-prompt block for recalled skills, and the tool-loader union.

GAIA injects recalled procedures as a ``RECALLED PROCEDURES`` system-prompt block, each
body cut at ``max_recall_body_chars`` with a visible marker (the stored body stays whole),
and loads ``tools_required`` ahead of semantically retrieved tools: loaded = CORE, then
SKILL, then SEMANTIC, at most 14 tools.

GAIA's cut is a raw character slice (:func:`truncate_body`), so it can land inside a
step, under a header that calls the steps proven (amd/gaia#2676). :func:`body_units` reads a
body's numbered steps and edge cases, :func:`classify_cut` says where a cut lands, and
:func:`truncate_whole_steps` is the research alternative: cut after the last whole step or
edge case that fits. ``inject(..., cut="raw")`` (the default) is GAIA's behaviour exactly.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from ..config import Thresholds
from .skill import Skill

__all__ = [
    "HEADER",
    "MAX_LOADED_TOOLS",
    "RECALL_CUTS",
    "TRUNCATION_MARKER",
    "BodyUnit",
    "CutPlace",
    "RecallCut",
    "body_units",
    "classify_cut",
    "cut_body",
    "inject",
    "kept_chars",
    "tools_for_turn",
    "truncate_body",
    "truncate_whole_steps",
]

TRUNCATION_MARKER = "… (truncated)"
HEADER = "RECALLED PROCEDURES (learned from earlier successful runs of similar goals; " \
         "follow one when it fits, adapt it when it does not):"
MAX_LOADED_TOOLS = 14

#: How a recalled body longer than the cap is cut: ``raw`` (GAIA: a character slice) or
#: ``whole_steps`` (after the last whole step or edge case that fits).
RecallCut = Literal["raw", "whole_steps"]
RECALL_CUTS: tuple[RecallCut, ...] = ("raw", "whole_steps")
#: Where a cut lands: ``whole`` (no cut: the body fits), ``boundary`` (between units),
#: ``mid_step`` (inside a numbered step), ``mid_edge_case`` (inside an edge-case item),
#: ``mid_other`` (inside a heading or other text).
CutPlace = Literal["whole", "boundary", "mid_step", "mid_edge_case", "mid_other"]
UnitKind = Literal["step", "edge_case", "heading", "other"]

_HEADING = re.compile(r"^#{1,6}\s")
_EDGE_HEADING = re.compile(r"^#{1,6}\s+edge cases\s*$", re.IGNORECASE)
_STEP = re.compile(r"^\s*\d+[.)]\s+\S")
_BULLET = re.compile(r"^\s*[-*+]\s+\S")


@dataclass(frozen=True)
class BodyUnit:
    """One unit of a procedure body: ``body[start:end]``, ``end`` just past its last
    non-space character (trailing blanks belong to no unit)."""

    kind: UnitKind
    start: int
    end: int


def body_units(body: str) -> tuple[BodyUnit, ...]:
    """The body's numbered steps, edge-case items, headings and other paragraphs, in order.

    A step starts at a line ``1. ...`` (or ``1) ...``); an edge case at a list line under an
    ``## Edge cases`` heading (numbered or bulleted; another heading ends the section). A
    unit runs on over the lines that continue it: lines indented deeper than its own first
    line (a nested list, a wrapped line) and, before any blank line, unindented text that is
    not a list line (markdown's lazy continuation). Any other line starts an ``other`` unit.
    """
    units: list[BodyUnit] = []
    kind: UnitKind | None = None
    start = end = indent_of = pos = 0
    in_edge = blank = False
    for line in body.splitlines(keepends=True):
        text = line.rstrip("\r\n")
        here, pos = pos, pos + len(line)
        if not text.strip():
            blank = True
            continue
        indent = len(text) - len(text.lstrip())
        listed = bool(_STEP.match(text) or _BULLET.match(text))
        heading = bool(_HEADING.match(text))
        deeper = kind is not None and indent > indent_of
        if not heading and (deeper or (kind is not None and not blank and not listed)):
            end = here + len(text.rstrip())  # continues the unit above
        else:
            if kind is not None:
                units.append(BodyUnit(kind=kind, start=start, end=end))
            kind = "heading" if heading else "edge_case" if in_edge and listed else \
                "step" if _STEP.match(text) else "other"
            start, end, indent_of = here + indent, here + len(text.rstrip()), indent
            if heading:
                in_edge = bool(_EDGE_HEADING.match(text.strip()))
                units.append(BodyUnit(kind="heading", start=start, end=end))
                kind = None
        blank = False
    if kind is not None:
        units.append(BodyUnit(kind=kind, start=start, end=end))
    return tuple(units)


def truncate_body(body: str, limit: int) -> str:
    """``body`` if it fits in ``limit`` characters, else its first ``limit`` and the marker."""
    return body if len(body) <= limit else body[:limit] + TRUNCATION_MARKER


def _whole_end(body: str, limit: int) -> int | None:
    """The end of the last step, edge case or paragraph within ``limit`` (None: none is)."""
    ends = [u.end for u in body_units(body) if u.kind != "heading" and u.end <= limit]
    return max(ends) if ends else None


def kept_chars(body: str, limit: int, cut: RecallCut = "raw") -> int:
    """How many leading characters of ``body`` a cut at ``limit`` keeps.

    ``whole_steps`` keeps through the end of the last step, edge case or paragraph that
    ends within ``limit`` (a heading with nothing under it is dropped); where none does (the
    first unit alone is longer), it falls back to the raw cut, so nothing kept is ever
    longer than ``limit``.
    """
    if len(body) <= limit:
        return len(body)
    whole = _whole_end(body, limit) if cut == "whole_steps" else None
    return limit if whole is None else whole


def truncate_whole_steps(body: str, limit: int) -> str:
    """``body`` if it fits, else its whole units within ``limit`` and the marker on a line
    of its own (GAIA's raw cut where not even the first unit fits)."""
    if len(body) <= limit:
        return body
    whole = _whole_end(body, limit)
    return truncate_body(body, limit) if whole is None else \
        body[:whole] + "\n" + TRUNCATION_MARKER


def cut_body(body: str, limit: int, cut: RecallCut = "raw") -> str:
    """The body as injected under ``cut`` (``raw``: GAIA's :func:`truncate_body`)."""
    return truncate_body(body, limit) if cut == "raw" else truncate_whole_steps(body, limit)


def classify_cut(body: str, limit: int, cut: RecallCut = "raw") -> CutPlace:
    """Where the cut of ``body`` at ``limit`` lands (:data:`CutPlace`).

    A cut at position p keeps ``body[:p]``: it is mid-unit when it keeps part, but not all,
    of a unit's visible text (``start < p < end``); a cut at a unit's start or end, or in
    the blank between units, is at a ``boundary``.
    """
    if len(body) <= limit:
        return "whole"
    p = kept_chars(body, limit, cut)
    for u in body_units(body):
        if u.start < p < u.end:
            return "mid_step" if u.kind == "step" else \
                "mid_edge_case" if u.kind == "edge_case" else "mid_other"
    return "boundary"


def inject(skills: Sequence[Skill], config: Thresholds, *, cut: RecallCut = "raw") -> str:
    """The system-prompt block for ``skills`` (empty string when there are none); each body
    cut at ``max_recall_body_chars`` by ``cut`` (default GAIA's raw slice)."""
    if not skills:
        return ""
    parts = [HEADER]
    for s in skills:
        parts.append(f"\n### {s.name}\nWhen to use: {s.description}\n"
                     f"Tools: {', '.join(s.tools_required)}\n\n"
                     f"{cut_body(s.body, config.max_recall_body_chars, cut)}")
    return "\n".join(parts) + "\n"


def tools_for_turn(core: Iterable[str], recalled: Iterable[Skill] | Iterable[str],
                   semantic: Iterable[str], *, cap: int = MAX_LOADED_TOOLS) -> tuple[str, ...]:
    """The tools to load: CORE first, then the recalled skills' tools, then SEMANTIC hits.

    Duplicates keep their first (highest-priority) place; the list is cut at ``cap``.
    """
    skill_tools: list[str] = []
    for r in recalled:
        skill_tools.extend(r.tools_required if isinstance(r, Skill) else [r])
    ordered = list(dict.fromkeys([*core, *skill_tools, *semantic]))
    return tuple(ordered[:cap])
