"""Every KPI of a point, from what its protocol produced: #887's, the controls',
verification's, GAIA's open questions' and the lumping guard's, with the details behind
them (the summary's ``controls``, ``gaia_questions`` and ``lumping``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...store import MemoryStore
from .context import PointContext, ProtocolRun
from .control_checks import control_kpis
from .controls import GoldSource
from .lumping import lumping_kpis
from .metrics import KPI, point_kpis
from .questions import procedure_vectors, question_kpis, starts_from_passes, starts_from_report
from .verify_world import verify_kpis

__all__ = ["PointScores", "score_point"]


@dataclass(frozen=True)
class PointScores:
    """A point's KPIs and the details behind them.

    Attributes:
        kpis: name -> KPI.
        control: the control arm's kind (None: not a control point).
        gold: the point's gold source; ``inert``: the inertness check (inert points).
        questions_info, lumping_info: the details behind GAIA's questions' and the lumping
            guard's KPIs.
    """

    kpis: dict[str, KPI]
    control: str | None
    gold: GoldSource | None
    inert: Any
    questions_info: dict[str, Any]
    lumping_info: dict[str, Any]


def score_point(ctx: PointContext, ran: ProtocolRun) -> PointScores:
    """Every KPI of the point (see the module docstring), read from ``ran``, the history
    store, the live runs and the point's context."""
    cfg, reports = ctx.cfg, ran.reports
    grounded = [g for r in reports for g in [True] * r.distilled + [False] * r.ungrounded]
    kpis = point_kpis(ran.rows, ran.checks, ran.floors, llm_calls=ran.llm_calls,
                      cache_hits=ran.cache_hits, grounded=grounded,
                      duplicate_names=sum(r.duplicate_names for r in reports),
                      seed=cfg.seed, n_boot=cfg.n_boot)
    control = getattr(ctx.strategy, "control", None)
    extra, inert = control_kpis(control, ran.rows, kpis, _runs(ctx.runs_file), ctx.gold,
                                seed=cfg.seed, n_boot=cfg.n_boot)
    kpis.update(extra)
    kpis |= {k.name: k for k in verify_kpis(reports)}
    with MemoryStore.open(ctx.history_db, read_only=True) as store:
        procs = store.procedures()
    starts = starts_from_passes(ran.passes) if ran.passes is not None else starts_from_report(
        reports[0] if reports else None, ctx.timings.get("clustering", 0.0),
        sum(p.active for p in procs))
    questions, questions_info = question_kpis(
        ran.rows, procs, ctx.split, cfg.thresholds, cut=cfg.recall_cut, starts=starts,
        first_counts=ran.first_counts,
        vectors=procedure_vectors([p for p in procs if p.active], ctx.queries),
        distill_cap=ctx.strategy.distill_cap(cfg.thresholds), seed=cfg.seed,
        n_boot=cfg.n_boot)
    kpis |= questions
    lumps, lumping_info = lumping_kpis(procs, ctx.split)
    kpis |= {k.name: k for k in lumps}
    return PointScores(kpis=kpis, control=control, gold=ctx.gold, inert=inert,
                       questions_info=questions_info, lumping_info=lumping_info)


def _runs(path: Path) -> list[dict[str, Any]]:
    """A point's live runs (``runs.jsonl``; none for a replay-only point)."""
    if not path.exists():
        return []
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]
