"""KPIs for GAIA's open questions about #887, measured at every point (METHODS.md 5b).

Each answers one upstream question, under either protocol and for every strategy
(``gaia-shipped`` included: everything is read off the history store's rows, GAIA's schema):

* truncation (amd/gaia#2676): where the cap at ``max_recall_body_chars`` cuts each recalled
  body (:func:`~skillsynth.pipeline.inject.classify_cut`): ``recall_body_cut_share``,
  ``recall_body_cut_mid_step_share`` (recalled items, clustered by the probe's family), and
  the same over the active procedures at the end (``active_body_cut_*``: more units where
  recall rarely fires);
* fragmentation (#4033): active procedures per labelled family at the end of the point,
  ``procedures_per_family`` and ``fragmented_family_share``;
* start-up cost (#4033): per simulated process start (a rolling pass; strict is one start),
  distillation answers, seconds and sessions consumed, and ``starts_until_drained``;
* outcome counts (PR #2685): how ``success_count`` / ``attempt_count`` moved after each row
  was written, against the updates the probes' labelled outcomes would have made;
* duplicates (#1818, #1828): pairs of active procedures whose when_to_use vectors meet the
  reconcile threshold or whose ordered tool lists are equal.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...config import Thresholds
from ...models.embed import Embeds
from ...pipeline.inject import CutPlace, RecallCut, classify_cut
from ...pipeline.synthesize import PassReport
from ...store import Procedure
from .context import PassRecord
from .metrics import KPI, N_BOOT, ProbeResult, mean_kpi, proportion_kpi
from .split import Split, procedure_families

__all__ = ["DuplicatePair", "StartCost", "cut_places", "duplicate_pairs", "family_counts",
           "outcome_kpis", "procedure_vectors", "question_kpis", "starts_from_passes",
           "starts_from_report", "starts_until_drained", "startup_kpis", "truncation_kpis"]

#: The cut places that leave part of a step or an edge case in the prompt.
MID_STEP: frozenset[CutPlace] = frozenset({"mid_step", "mid_edge_case"})
_SEQUENCE_NOTE = "per start; no interval: starts are a sequence, not a sample"


@dataclass(frozen=True)
class StartCost:
    """One simulated process start's synthesis pass.

    Attributes:
        start: 1-based.
        status: the pass's status.
        model_calls: distillation answers the pass waited for (uncached and cached: a real
            start makes every one of them).
        cache_hits: of those, answered from the call cache here.
        seconds: the pass's wall time here (cached answers are fast: a lower bound).
        sessions_read: sessions the pass read (past the watermark, not consumed).
        sessions_consumed: sessions the pass marked consumed.
        qualified: clusters that qualified; handed: of them, handed to the distiller;
            left_for_later: the rest (over the per-pass cap).
        active_procedures: active procedures after the pass.
    """

    start: int
    status: str
    model_calls: int
    cache_hits: int
    seconds: float
    sessions_read: int
    sessions_consumed: int
    qualified: int
    handed: int
    left_for_later: int
    active_procedures: int


def starts_from_passes(passes: Sequence[PassRecord]) -> list[StartCost]:
    """A rolling point's starts (its passes; ``consumed`` there is cumulative)."""
    out, before = [], 0
    for p in passes:
        handed = p.qualified - p.left_for_later if p.status == "ran" else 0
        out.append(StartCost(start=p.index + 1, status=p.status,
                             model_calls=p.llm_calls + p.cache_hits, cache_hits=p.cache_hits,
                             seconds=p.wall_s, sessions_read=p.read,
                             sessions_consumed=max(p.consumed - before, 0), qualified=p.qualified,
                             handed=max(handed, 0), left_for_later=p.left_for_later,
                             active_procedures=p.active_procedures))
        before = p.consumed
    return out


def starts_from_report(report: PassReport | None, seconds: float,
                       active: int) -> list[StartCost]:
    """A strict point's one start (none where the strategy has no synthesis)."""
    if report is None:
        return []
    handed = report.qualified - report.left_for_later if report.status == "ran" else 0
    return [StartCost(start=1, status=report.status,
                      model_calls=report.llm_calls + report.cache_hits,
                      cache_hits=report.cache_hits, seconds=round(seconds, 3),
                      sessions_read=report.sessions, sessions_consumed=len(report.handed),
                      qualified=report.qualified, handed=max(handed, 0),
                      left_for_later=report.left_for_later, active_procedures=active)]


def starts_until_drained(starts: Sequence[StartCost]) -> int | None:
    """Starts from the first at which a cluster qualified to the one that cleared the last
    backlog, both counted: with a cap of 2 and 5 clusters qualified at once, 3. A backlog
    that builds again later (new clusters keep qualifying over a replay) counts until it
    clears too. 0 when nothing ever qualified; None when the last start still left a cluster
    for later or did not run (not drained)."""
    first = next((i for i, s in enumerate(starts) if s.qualified > 0), None)
    if first is None:
        return 0
    backlog = [i for i in range(first, len(starts))
               if starts[i].status != "ran" or starts[i].left_for_later > 0]
    if not backlog:
        return 1
    if backlog[-1] == len(starts) - 1:
        return None
    return backlog[-1] - first + 2


def _per_start(name: str, values: Sequence[float], unit: str = "starts") -> KPI:
    if not values:
        return KPI(name=name, value=None, lo=None, hi=None, n=0, unit=unit, kind="mean",
                   note="no synthesis pass")
    return KPI(name=name, value=float(np.mean(values)), lo=None, hi=None, n=len(values), unit=unit,
               kind="mean", note=_SEQUENCE_NOTE)


def startup_kpis(starts: Sequence[StartCost]) -> list[KPI]:
    """Per-start cost and ``starts_until_drained`` (a count; None with a note when not)."""
    drained = starts_until_drained(starts)
    n = len(starts)
    return [
        _per_start("startup_model_calls", [s.model_calls for s in starts]),
        _per_start("startup_seconds", [s.seconds for s in starts]),
        _per_start("startup_sessions_consumed", [s.sessions_consumed for s in starts]),
        KPI(name="startup_model_calls_max",
            value=float(max((s.model_calls for s in starts), default=0)),
            lo=None, hi=None, n=n, unit="starts"),
        KPI(name="starts_until_drained", value=None if drained is None else float(drained),
            lo=None, hi=None, n=n, unit="starts", note="" if drained is not None or not n else
            f"not drained: a qualified cluster was still left for later at the last of {n} "
            "start(s)"),
        KPI(name="startup_backlog_max",
            value=float(max((s.left_for_later for s in starts), default=0)),
            lo=None, hi=None, n=n, unit="starts"),
    ]


def _memory_rows(rows: Sequence[ProbeResult]) -> list[ProbeResult]:
    """The replay memory-arm rows (live rows repeat the same recalls)."""
    return [r for r in rows if r.arm == "memory" and r.steps_method != "live"]


def cut_places(rows: Sequence[ProbeResult], bodies: Mapping[str, str], limit: int,
               cut: RecallCut = "raw") -> list[tuple[str, CutPlace]]:
    """(probe family, where the cut landed) for every recalled body."""
    return [(r.family, classify_cut(bodies[pid], limit, cut)) for r in _memory_rows(rows)
            for pid in r.recalled_ids if pid in bodies]


def truncation_kpis(rows: Sequence[ProbeResult], procedures: Sequence[Procedure], limit: int,
                    cut: RecallCut = "raw") -> tuple[list[KPI], dict[str, Any]]:
    """The #2676 shares over recalled bodies and over the active procedures, and the counts
    of each cut place."""
    bodies = {p.id: p.markdown_body for p in procedures}
    places = cut_places(rows, bodies, limit, cut)
    fams = [f for f, _ in places]
    active = [classify_cut(p.markdown_body, limit, cut) for p in procedures if p.active]
    kpis = [
        proportion_kpi("recall_body_cut_share", [float(x != "whole") for _, x in places],
                       unit="recalled", clusters=fams),
        proportion_kpi("recall_body_cut_mid_step_share",
                       [float(x in MID_STEP) for _, x in places], unit="recalled",
                       clusters=fams),
        proportion_kpi("active_body_cut_share", [float(x != "whole") for x in active],
                       unit="procedures"),
        proportion_kpi("active_body_cut_mid_step_share", [float(x in MID_STEP) for x in active],
                       unit="procedures"),
    ]
    return kpis, {"recalled": dict(Counter(x for _, x in places)),
                  "active": dict(Counter(active))}


def family_counts(procedures: Sequence[Procedure], split: Split) -> tuple[dict[str, int], int]:
    """Active procedures per labelled family (a procedure counts for the first of its
    provenance's most common families), and how many active ones have no family."""
    counts: Counter[str] = Counter()
    none = 0
    for p in procedures:
        if not p.active:
            continue
        fams = procedure_families(p, split)
        if fams:
            counts[fams[0]] += 1
        else:
            none += 1
    return dict(sorted(counts.items())), none


def _fragmentation(procedures: Sequence[Procedure], split: Split, seed: int, n_boot: int
                   ) -> tuple[list[KPI], dict[str, Any]]:
    counts, none = family_counts(procedures, split)
    names, values = list(counts), [float(v) for v in counts.values()]
    labelled = len(set(split.families.values()))
    kpis = [
        mean_kpi("procedures_per_family", values, unit="families", clusters=names, seed=seed,
                 n_boot=n_boot),
        proportion_kpi("fragmented_family_share", [float(v > 1) for v in values],
                       unit="families"),
        KPI(name="families_served", value=float(len(counts)), lo=None, hi=None, n=labelled,
            unit="families"),
        KPI(name="procedures_without_family", value=float(none), lo=None, hi=None,
            n=sum(counts.values()) + none, unit="procedures"),
    ]
    return kpis, {"per_family": counts, "without_family": none}


def outcome_kpis(rows: Sequence[ProbeResult], procedures: Sequence[Procedure],
                 first_counts: Mapping[str, tuple[int, int]], min_success_rate: float
                 ) -> tuple[list[KPI], dict[str, Any]]:
    """PR #2685: the count columns' movement after each row was written (recorded) against
    one update per recalled procedure whose probe's outcome is labelled (possible).

    Also: the share of those outcomes that were successes (the rate feedback would add),
    and how many recalled procedures feedback would take below ``min_success_rate``.
    """
    end = {p.id: p for p in procedures}
    recorded = sum(max(end[pid].attempt_count - a, end[pid].success_count - s, 0)
                   for pid, (s, a) in first_counts.items() if pid in end)
    fed: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    outcomes: list[float] = []
    fams: list[str] = []
    for r in _memory_rows(rows):
        if r.success is None:
            continue
        for pid in r.recalled_ids:
            fed[pid][0] += int(r.success)
            fed[pid][1] += 1
            outcomes.append(float(r.success))
            fams.append(r.family)
    below = [pid for pid, (s, a) in fed.items() if pid in end
             and (end[pid].success_count + s) / max(end[pid].attempt_count + a, 1)
             < min_success_rate]
    possible = len(outcomes)
    kpis = [
        KPI(name="outcome_updates_recorded", value=float(recorded), lo=None, hi=None,
            n=len(first_counts), unit="procedures"),
        KPI(name="outcome_updates_possible", value=float(possible), lo=None, hi=None, n=possible,
            unit="recalled"),
        KPI(name="outcome_failures_possible", value=float(possible - sum(outcomes)), lo=None,
            hi=None, n=possible, unit="recalled"),
        proportion_kpi("recalled_outcome_success_share", outcomes, unit="recalled",
                       clusters=fams),
        KPI(name="procedures_below_rate_with_feedback", value=float(len(below)), lo=None, hi=None,
            n=len(fed), unit="procedures"),
    ]
    return kpis, {"feedback": {pid: {"successes": s, "attempts": a}
                               for pid, (s, a) in sorted(fed.items())},
                  "below_rate_with_feedback": sorted(below)}


@dataclass(frozen=True)
class DuplicatePair:
    """Two active procedures under different names that say the same thing.

    Attributes:
        a, b: their ids (a < b); names: their names.
        cosine: of their when_to_use vectors (None: a vector missing).
        by_meaning: cosine at or above the reconcile threshold.
        by_tools: the same non-empty ordered tool list.
        same_family: both serve the same labelled family (None: a family unknown).
    """

    a: str
    b: str
    names: tuple[str, str]
    cosine: float | None
    by_meaning: bool
    by_tools: bool
    same_family: bool | None


def procedure_vectors(procedures: Sequence[Procedure], embedder: Embeds
                      ) -> dict[str, np.ndarray]:
    """Each procedure's stored when_to_use vector; those without one embedded now."""
    out = {p.id: v for p in procedures if (v := p.vector()) is not None}
    todo = [p for p in procedures if p.id not in out]
    if todo:
        for p, v in zip(todo, embedder.embed([p.when_to_use for p in todo], kind="document"),
                        strict=True):
            out[p.id] = np.asarray(v, dtype=np.float32)
    return out


def _cosine(u: np.ndarray | None, v: np.ndarray | None) -> float | None:
    if u is None or v is None or u.shape != v.shape:
        return None
    den = float(np.linalg.norm(u) * np.linalg.norm(v))
    return float(np.dot(u, v)) / den if den > 0 else None


def duplicate_pairs(procedures: Sequence[Procedure], vectors: Mapping[str, np.ndarray],
                    tau: float, split: Split | None = None) -> list[DuplicatePair]:
    """Every pair of active procedures with different names whose when_to_use vectors have
    cosine >= ``tau`` or whose ordered ``tools_required`` are equal."""
    active = sorted((p for p in procedures if p.active), key=lambda p: p.id)
    fam = {p.id: (procedure_families(p, split) or None) if split is not None else None
           for p in active}
    out = []
    for i, p in enumerate(active):
        for q in active[i + 1:]:
            if p.name == q.name:
                continue
            cos = _cosine(vectors.get(p.id), vectors.get(q.id))
            meaning = cos is not None and cos >= tau - 1e-9
            tools = bool(p.tools_required) and tuple(p.tools_required) == tuple(
                q.tools_required)
            if meaning or tools:
                fp, fq = fam[p.id], fam[q.id]
                out.append(DuplicatePair(a=p.id, b=q.id, names=(p.name, q.name),
                                         cosine=None if cos is None else round(cos, 6),
                                         by_meaning=meaning, by_tools=tools,
                                         same_family=None if fp is None or fq is None
                                         else fp[0] == fq[0]))
    return out


def _duplicates(procedures: Sequence[Procedure], vectors: Mapping[str, np.ndarray],
                tau: float, split: Split) -> tuple[list[KPI], dict[str, Any]]:
    pairs = duplicate_pairs(procedures, vectors, tau, split)
    active = [p.id for p in procedures if p.active]
    paired = {x for d in pairs for x in (d.a, d.b)}
    n_pairs = math.comb(len(active), 2)
    kpis = [
        KPI(name="duplicate_procedure_pairs", value=float(len(pairs)), lo=None, hi=None, n=n_pairs,
            unit="pairs"),
        proportion_kpi("duplicate_procedure_share", [float(a in paired) for a in active],
                       unit="procedures"),
        KPI(name="duplicate_pairs_same_family",
            value=float(sum(d.same_family is True for d in pairs)), lo=None, hi=None, n=len(pairs),
            unit="pairs"),
    ]
    return kpis, {"tau": tau, "pairs": [dataclasses.asdict(d) for d in pairs],
                  "by_meaning": sum(d.by_meaning for d in pairs),
                  "by_tools": sum(d.by_tools for d in pairs)}


def question_kpis(rows: Sequence[ProbeResult], procedures: Sequence[Procedure], split: Split,
                  th: Thresholds, *, cut: RecallCut, starts: Sequence[StartCost],
                  first_counts: Mapping[str, tuple[int, int]],
                  vectors: Mapping[str, np.ndarray], distill_cap: int | None = None,
                  seed: int = 0, n_boot: int = N_BOOT) -> tuple[dict[str, KPI], dict[str, Any]]:
    """Every KPI of this module for one point, and the details behind them (the point's
    ``summary.json`` keeps both: the KPIs under ``kpis``, the details under
    ``gaia_questions``).

    ``procedures``: every row of the history store at the end of the point; ``vectors``:
    the active ones' when_to_use vectors (:func:`procedure_vectors`); ``distill_cap``: the
    distillations one pass may spend under the point's strategy (recorded).
    """
    trunc, cut_info = truncation_kpis(rows, procedures, th.max_recall_body_chars, cut)
    frag, frag_info = _fragmentation(procedures, split, seed, n_boot)
    outc, outc_info = outcome_kpis(rows, procedures, first_counts, th.min_success_rate)
    dups, dup_info = _duplicates(procedures, vectors, th.effective_reconcile_tau, split)
    cap = KPI(name="distill_cap", value=None if distill_cap is None else float(distill_cap),
              lo=None, hi=None, n=len(starts), unit="starts",
              note="" if distill_cap is not None else "no synthesis")
    kpis = [*trunc, *frag, *startup_kpis(starts), cap, *outc, *dups]
    info = {"truncation": {"cut": cut, "max_recall_body_chars": th.max_recall_body_chars,
                           "places": cut_info},
            "fragmentation": frag_info,
            "startup": {"distill_cap": distill_cap,
                        "max_distill_calls_per_pass": th.max_distill_calls_per_pass,
                        "max_clusters_per_pass": th.max_clusters_per_pass,
                        "starts_until_drained": starts_until_drained(starts),
                        "starts": [dataclasses.asdict(s) for s in starts]},
            "outcomes": outc_info, "duplicates": dup_info}
    return {k.name: k for k in kpis}, info
