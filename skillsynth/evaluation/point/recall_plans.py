"""Plans for recalled synthesized procedures, from their member runs (``procedure_form``).

A synthesized procedure's executable form is a function of its cluster: the plan
:func:`~skillsynth.pipeline.induce.induce_plan` induces from the member runs (the cluster's
representative run, bound where every member agrees). Where a recalled procedure's body holds
no plan and its provenance names its member sessions, the live arms induce that plan from the
members as the history store holds them (GAIA's ``tool_history``: results cut at 500
characters), with the world's enum values for constants, when the skill is recalled. The
stored bodies do not change, so a point with ``procedure_form`` prose recalls and injects
exactly what it did before; a procedure whose members do not bind even a first step gets no
plan (counted by the run's ``plans_offered``). With ``plan_choices`` the plan leaves the runs'
choices to the agent (:func:`~skillsynth.pipeline.induce.induce_plan`'s ``choices``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...config import Thresholds
from ...pipeline.cluster import representative
from ...pipeline.detect import SessionSequence, extract_sequences
from ...pipeline.induce import induce_plan
from ...pipeline.plan import find_plan, with_plan
from ...pipeline.provenance import enum_values
from ...pipeline.skill import Skill
from ...store import MemoryStore, Procedure

__all__ = ["MemberPlans"]


class MemberPlans:
    """The history store's runs, and the plan each recalled procedure's members give."""

    def __init__(self, history_db: str | Path, tool_specs: Sequence[Mapping[str, Any]],
                 outcomes: Mapping[str, bool] | None = None, *, choices: bool = False):
        with MemoryStore.open(history_db, read_only=True) as store:
            seqs = extract_sequences(store, Thresholds(), outcomes=outcomes, advance=False)
        self._runs = {s.session_id: s for s in seqs.sequences}
        self._enums = enum_values(tool_specs)
        self._plans: dict[str, Skill] = {}
        self._choices = choices

    def members(self, proc: Procedure) -> list[SessionSequence]:
        """The procedure's member runs the history holds, in provenance order."""
        ids = [str(s) for s in (proc.provenance or {}).get("from_sessions", [])]
        return [self._runs[s] for s in ids if s in self._runs]

    def skill(self, proc: Procedure, skill: Skill) -> Skill:
        """``skill`` with its members' plan appended where its body has none and one can be
        induced (the same skill otherwise)."""
        if find_plan(skill.body) is not None:
            return skill
        key = proc.id or skill.name
        if key not in self._plans:
            members = self.members(proc)
            got = skill
            if members:
                plan = induce_plan(members, representative(members), enums=self._enums,
                                   choices=self._choices)
                if plan is not None:
                    got = with_plan(skill, plan)
            self._plans[key] = got
        return self._plans[key]
