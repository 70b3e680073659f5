"""A sweep run read once from its folder (:func:`load_run`): the summary, one table row per
point with every KPI's value, interval, n and method, the probe rows, and the goal
similarities. The report's tables and plots (:mod:`.report`) all read this one value."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ...errors import EvaluationError
from ..point.summary import SUMMARY, PointSummary
from ..sweeps.summary import SweepSummary
from .gate import PARAMS, PROTOCOL_DEFAULTS

__all__ = ["Run", "load_run"]


@dataclass(frozen=True)
class Run:
    """A loaded sweep run.

    Attributes:
        path: the run folder.
        summary: its ``summary.json``.
        points: one row per finished point: strategy, parameters, ``<kpi>``, ``<kpi>_lo``,
            ``<kpi>_hi``, ``<kpi>_n``, ``<kpi>_estimate``, ``<kpi>_families`` and
            ``<kpi>_method`` columns (families None for runs written before them; their
            method reads ``none``).
        rows: the per-probe results of every point (``results.jsonl``).
        similarity: same- and different-family goal similarities (may be empty).
    """

    path: Path
    summary: SweepSummary
    points: pd.DataFrame
    rows: pd.DataFrame
    similarity: dict[str, Any]
    _points_read: dict[str, PointSummary | None] = field(default_factory=dict, repr=False,
                                                         compare=False)

    def point_summary(self, point_id: str) -> PointSummary | None:
        """A point's own ``summary.json`` (None: not in the folder), read once per run."""
        if point_id not in self._points_read:
            f = self.path / "points" / point_id / SUMMARY
            self._points_read[point_id] = PointSummary.load(f) if f.exists() else None
        return self._points_read[point_id]

    def point_runs(self, point_id: str) -> list[dict[str, Any]]:
        """A point's live run records (``runs.jsonl``; empty: it ran none live)."""
        f = self.path / "points" / point_id / "runs.jsonl"
        if not f.exists():
            return []
        return [json.loads(line) for line in f.read_text(encoding="utf-8").splitlines()
                if line.strip()]


def load_run(run_dir: str | Path) -> Run:
    """Read a sweep's results folder.

    Raises:
        EvaluationError: the folder has no ``summary.json`` (no point of the sweep has
            finished yet; a running sweep rewrites it as each point finishes).
    """
    p = Path(run_dir)
    if not (p / "summary.json").exists():
        raise EvaluationError(f"{p} has no summary.json; run `skillsynth sweep` first")
    summary = SweepSummary.load(p)
    recs = []
    for pt in summary.points:
        rec: dict[str, Any] = {"point": pt.id, "strategy": pt.strategy,
                               **{k: pt.params[k] for k in PARAMS},
                               **(PROTOCOL_DEFAULTS | dict(pt.protocol)),
                               "wall_s": pt.wall_s, "probes": pt.split["probes"],
                               "passes": len(pt.split.get("passes") or ()) or 1}
        for name, k in pt.kpis.items():
            rec[name], rec[f"{name}_lo"], rec[f"{name}_hi"] = k.value, k.lo, k.hi
            rec[f"{name}_n"], rec[f"{name}_estimate"] = k.n, k.estimate
            rec[f"{name}_families"], rec[f"{name}_method"] = k.n_families, k.method
        rec["floors_failed"] = ",".join(f for f, ok in pt.floors.items() if ok is False)
        recs.append(rec)
    points = pd.DataFrame(recs)
    rows_file = p / "results.jsonl"
    rows = pd.read_json(rows_file, lines=True) if rows_file.exists() and \
        rows_file.stat().st_size else pd.DataFrame()
    sim_file = p / "similarity.json"
    sim = json.loads(sim_file.read_text(encoding="utf-8")) if sim_file.exists() else {}
    return Run(path=p, summary=summary, points=points, rows=rows, similarity=sim)
