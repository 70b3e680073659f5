"""Inject: the planner-prompt block for recalled skills, and the tool-loader union.

GAIA injects recalled procedures as a ``RECALLED PROCEDURES`` system-prompt block, each
body cut at ``max_recall_body_chars`` with a visible marker (the stored body stays whole),
and loads ``tools_required`` ahead of semantically retrieved tools: loaded = CORE, then
SKILL, then SEMANTIC, at most 14 tools.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..config import Thresholds
from .skill import Skill

__all__ = [
    "HEADER",
    "MAX_LOADED_TOOLS",
    "TRUNCATION_MARKER",
    "inject",
    "tools_for_turn",
    "truncate_body",
]

TRUNCATION_MARKER = "… (truncated)"
HEADER = "RECALLED PROCEDURES (learned from earlier successful runs of similar goals; " \
         "follow one when it fits, adapt it when it does not):"
MAX_LOADED_TOOLS = 14


def truncate_body(body: str, limit: int) -> str:
    """``body`` if it fits in ``limit`` characters, else its first ``limit`` and the marker."""
    return body if len(body) <= limit else body[:limit] + TRUNCATION_MARKER


def inject(skills: Sequence[Skill], config: Thresholds) -> str:
    """The system-prompt block for ``skills`` (empty string when there are none)."""
    if not skills:
        return ""
    parts = [HEADER]
    for s in skills:
        parts.append(f"\n### {s.name}\nWhen to use: {s.description}\n"
                     f"Tools: {', '.join(s.tools_required)}\n\n"
                     f"{truncate_body(s.body, config.max_recall_body_chars)}")
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
