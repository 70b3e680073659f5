"""How the live agent used the plans a point offered it as tools, read from its runs.

A plan point's KPIs say what changed; they do not say whether the agent called the plan at
all, or what the call did. Each memory run's record (the point's ``runs.jsonl``) holds the
plans offered and, in its transcript, every plan call with the reply the agent read, whose
``status`` says how the call ended (``pipeline.execute``, METHODS.md 3b). This counts them
per point, so a null can be read as "never called", "called, handed back before the write"
or "reached the write and still missed".
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from .loaded import Run
from .loss import procedure_forms

__all__ = ["PLAN_USE_COLUMNS", "plan_use", "plan_use_table"]

#: What a row counts, in the order the table shows them.
PLAN_USE_COLUMNS = ("memory_runs", "offered", "called", "plan_calls", "world_calls",
                    "complete", "handed_back", "needs_pick", "stopped", "pick_refused")
_STATUS = {"complete": "complete", "handed back": "handed_back",
           "needs your pick": "needs_pick", "stopped": "stopped"}


def _reply(turn: Mapping[str, Any]) -> dict[str, Any]:
    try:
        got = json.loads(str(turn.get("result") or ""))
    except ValueError:
        return {}
    return got if isinstance(got, dict) else {}


def plan_use(runs: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Counts over a point's memory runs (run records as ``runs.jsonl`` holds them): runs,
    runs offered a plan tool, runs that called one, plan calls, world calls they made, and
    plan calls by how they ended (``stopped`` includes ``pick_refused``: a pick that was not
    among the values shown; a call refused before any step counts as stopped)."""
    out = dict.fromkeys(PLAN_USE_COLUMNS, 0)
    for r in runs:
        if r.get("arm") != "memory":
            continue
        out["memory_runs"] += 1
        out["offered"] += int(bool(r.get("plans_offered")))
        out["called"] += int(bool(r.get("plan_calls")))
        out["plan_calls"] += int(r.get("plan_calls") or 0)
        out["world_calls"] += int(r.get("plan_steps") or 0)
        for t in r.get("transcript") or ():
            if t.get("kind") != "plan":
                continue
            reply = _reply(t)
            out[_STATUS.get(str(reply.get("status")), "stopped")] += 1
            out["pick_refused"] += int("is not one of step" in str(reply.get("error", "")))
    return out


def plan_use_table(run: Run) -> pd.DataFrame:
    """One row per point that offered plans as tools (:func:`plan_use` over its runs);
    empty when no point did."""
    rows = [{"point": pid, **plan_use(runs)} for pid, form in procedure_forms(run).items()
            if form != "prose" and (runs := run.point_runs(pid))]
    return pd.DataFrame(rows, columns=["point", *PLAN_USE_COLUMNS]).set_index("point")
