"""Where the released GAIA shows a recalled procedure: in the turn's memory context.

#887's design, and GAIA's main when skillsynth was built, put recalled procedures in the
planner's system prompt; skillsynth's default (``recall_layout: main``) does that, in its
own words (:func:`~skillsynth.pipeline.inject.inject`). The release users install
(amd-gaia 0.25.1) moved them: a turn's recall rides its *memory context*, which GAIA
prepends to the user's message so that the system prompt stays the same from turn to turn
for the server's prompt cache. ``recall_layout: release`` does what the release does: the
block is rendered by the installed amd-gaia's own renderer (its words, its 1500-character
cut) under the context's tag and put before the request the agent is given; the system
prompt then carries no procedure. Where the layout matters to a small model, figures taken
under one do not describe GAIA under the other.

The release's context also opens with the current time (and, where a memory store holds
them, upcoming items, memories and lessons); skillsynth leaves those out: a clock would
make every run's prompt unique, and none of it is about procedures.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, Literal

from ...errors import ConfigError
from ...pipeline.inject import RecallCut, inject
from ...pipeline.skill import Skill
from ...store.gaia_release import GAIA_INSTALL_HINT, installed_gaia_version

__all__ = ["CONTEXT_TAG", "RECALL_LAYOUTS", "RecallLayout", "recall_block", "release_context",
           "require_release_renderer", "with_context"]

#: ``main`` (#887 and GAIA's main: a system-prompt block) or ``release`` (amd-gaia 0.25.1:
#: the release's block in the memory context before the user's message).
RecallLayout = Literal["main", "release"]
RECALL_LAYOUTS: tuple[RecallLayout, ...] = ("main", "release")
#: The line the release's per-turn memory context opens with.
CONTEXT_TAG = "[GAIA Memory Context]"

Renderer = Callable[[Sequence[Skill], int], str]


@functools.cache
def require_release_renderer() -> Renderer:
    """The installed release's renderer of recalled procedures, as ``(skills, cap) -> text``.

    Raises:
        ConfigError: amd-gaia is not installed, or its renderer is not where 0.25.1 has it.
    """
    if installed_gaia_version() is None:
        raise ConfigError("recall_layout release shows recalled procedures as the released "
                          f"GAIA renders them, and amd-gaia is not installed: "
                          f"{GAIA_INSTALL_HINT}", key="recall_layout")
    try:
        from gaia.agents.base.procedural_memory import ProceduralMemoryMixin
        from gaia.agents.base.skill_synthesis import DistilledProcedure, SynthesisConfig

        build = ProceduralMemoryMixin._build_recalled_skills_prompt
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"recall_layout release: the installed amd-gaia "
                          f"{installed_gaia_version()} has no recalled-procedure renderer "
                          f"where 0.25.1 has it ({exc})", key="recall_layout") from exc

    def render(skills: Sequence[Skill], cap: int) -> str:
        procs = [DistilledProcedure(name=s.name, when_to_use=s.description, body=s.body,
                                    tools_required=list(s.tools_required)) for s in skills]
        text: str = build(None, procs, SynthesisConfig(max_recall_body_chars=cap))
        return text

    return render


def release_context(skills: Sequence[Skill], config: Any) -> str:
    """The memory context the release would prepend for ``skills`` ("" for none); bodies cut
    at ``config.max_recall_body_chars`` by the release itself."""
    if not skills:
        return ""
    block = require_release_renderer()(skills, config.max_recall_body_chars)
    return f"{CONTEXT_TAG}\n{block}"


def with_context(context: str, message: str) -> str:
    """``message`` with the memory context before it, as the release sends it."""
    return f"{context}\n\n{message}" if context else message


def recall_block(skills: Sequence[Skill], config: Any, *, cut: RecallCut = "raw",
                 layout: RecallLayout = "main") -> str:
    """What the agent's prompt gains for ``skills`` under ``layout`` ("" for none): main's
    system-prompt block (long bodies cut by ``cut``) or the release's memory context."""
    if layout == "release":
        return release_context(skills, config)
    return inject(skills, config, cut=cut)
