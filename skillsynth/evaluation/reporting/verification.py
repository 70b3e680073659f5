"""Verified against unverified procedures: each point that verifies beside its twin that
does not (issue 25; METHODS.md 2c).

A ``verify: trace`` or ``world`` point differs from its ``verify: none`` twin only in which
candidates reach the store, so the pair reads what verification buys (recall precision, the
share made worse, live success) and what it costs (model calls and seconds per verified
procedure). :func:`verification_table` lays the pairs out for the report.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from ..point.metrics import KPI
from ..point.options import PointOptions
from ..sweeps.summary import PointEntry, PointLike, as_entry
from .gate import settings_of

__all__ = ["VERIFY_KEYS", "verification_table", "verify_twin"]

#: The settings that belong to verification (a twin may differ in these only): the
#: options declared with role ``verify``.
VERIFY_KEYS = PointOptions.with_role("verify")
#: Effects read on both sides of a pair, then verification's own figures.
_BOTH = ("recall_hit_rate", "recall_precision", "share_made_worse", "step_reduction",
         "live_success_change", "live_step_reduction")
_OWN = ("verified_share", "verify_calls_per_verified", "verify_seconds_per_verified")


def verify_twin(point: PointLike, points: Sequence[PointLike]) -> PointEntry | None:
    """The ``verify: none`` point with ``point``'s other settings, if the run has it."""
    p = as_entry(point)
    mine = {k: v for k, v in settings_of(p).items() if k not in VERIFY_KEYS}
    for q in (as_entry(x) for x in points):
        theirs = settings_of(q)
        if q.id != p.id and theirs["verify"] == "none" and \
                {k: v for k, v in theirs.items() if k not in VERIFY_KEYS} == mine:
            return q
    return None


def _fmt(k: KPI | None) -> str:
    if k is None:
        return "-"
    if k.value is None:
        return f"n/a (n={k.n})"
    ci = f" [{k.lo:.2f}, {k.hi:.2f}]" if k.lo is not None and k.hi is not None else ""
    return f"{k.value:.2f}{ci} n={k.n}"


def verification_table(points: Sequence[PointLike]) -> pd.DataFrame:
    """One row per verifying point: its rule, its twin, each effect as ``none -> verified``,
    and verification's share and cost. Empty when no point verifies."""
    recs = []
    for p in (as_entry(x) for x in points):
        rule = settings_of(p)["verify"]
        if rule == "none":
            continue
        twin = verify_twin(p, points)
        rec: dict[str, Any] = {"point": p.id, "strategy": p.strategy, "verify": rule,
                               "unverified twin": twin.id if twin is not None else "not run"}
        for name in _BOTH:
            if p.kpi(name) is None and (twin is None or twin.kpi(name) is None):
                continue
            rec[name] = f"{_fmt(twin.kpi(name) if twin else None)} -> {_fmt(p.kpi(name))}"
        rec |= {name: _fmt(p.kpi(name)) for name in _OWN}
        recs.append(rec)
    return pd.DataFrame(recs)
