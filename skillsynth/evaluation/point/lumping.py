"""Does a pass lump many goals into one procedure? The guard a calibration needs.

A threshold tuned to separate same-family from different-family goal *pairs* can still put
most of a history into one cluster, and then one procedure is recalled for everything
(measured: the embedded embedder's calibrated 0.31 on the main job's corpus). Two figures
say so, with labels and without:

* ``lumped_procedure_share``: active procedures whose member sessions span at least
  :data:`LUMP_FAMILIES` labelled families with none holding half of them;
* ``largest_procedure_share``: the largest active procedure's member sessions over all
  active procedures' (no labels needed; above :data:`LUMPED_SHARE`, one procedure serves
  most of the history).

The verdict's "Procedures stay specific" row reads them (METHODS.md 5c).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from ...pipeline.synthesize import LUMPED_SHARE
from ...store import Procedure
from .metrics import KPI, proportion_kpi
from .split import Split

__all__ = ["LUMPED_SHARE", "LUMP_FAMILIES", "lumping_kpis"]

#: A procedure whose members come from this many families or more, none holding half, lumps.
LUMP_FAMILIES = 3


def _members(p: Procedure) -> list[str]:
    return list(p.provenance.get("from_sessions", [])) if p.provenance else []


def lumping_kpis(procedures: Sequence[Procedure], split: Split
                 ) -> tuple[list[KPI], dict[str, Any]]:
    """The two lumping figures over the active procedures, and each one's family spread."""
    active = [p for p in procedures if p.active]
    spread: dict[str, dict[str, int]] = {}
    lumped: list[float] = []
    for p in active:
        fams = Counter(f for f in (split.family(s) for s in _members(p)) if f is not None)
        spread[p.id] = dict(fams.most_common())
        if fams:
            top = max(fams.values()) / sum(fams.values())
            lumped.append(float(len(fams) >= LUMP_FAMILIES and top < 0.5))
    sizes = [len(_members(p)) for p in active]
    total = sum(sizes)
    largest = max(sizes) / total if total else None
    kpis = [
        proportion_kpi("lumped_procedure_share", lumped, unit="procedures"),
        KPI(name="largest_procedure_share", value=largest, lo=None, hi=None, n=len(active),
            unit="procedures", kind="ratio",
            note="members of the largest active procedure over all active procedures'"),
    ]
    return kpis, {"families_per_procedure": spread, "lump_families": LUMP_FAMILIES,
                  "lumped_share_threshold": LUMPED_SHARE}
