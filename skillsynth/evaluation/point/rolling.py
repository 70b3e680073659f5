"""The rolling protocol: the corpus replayed in time order, as GAIA would have lived it.

Sessions go into a fresh store one by one, in the order they happened (labels'
``started_at``; the recorded order where the importer had to make timestamps up, flagged).
A synthesis pass runs at each simulated process start (every ``cadence`` sessions, or
every ``cadence`` days of corpus time), bounded by ``max_clusters_per_pass`` as GAIA's is,
and each pass keeps GAIA 0.25.1's synthesis marks and watermark in the store: a session a
pass handed to the distiller is not clustered again, so later passes reach the clusters a
capped pass left over. Every attempt after the k-th of a
family is a probe: it is recalled for against the store as it is at that moment, then
joins the history. A probe is therefore never in the store it is recalled against (checked
for every probe, and counted), and strict's one probe per family becomes every later one.

Distillations and embeddings repeat across passes only when a cluster is identical, and
then come from the call cache, so a rolling point costs about one model call per distinct
distillation.
"""

from __future__ import annotations

import datetime as dt
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from ...corpora.gaiadb import read_gaia_db
from ...corpora.importing import write_session
from ...corpora.labels import SessionLabel
from ...corpora.records import SessionRecord
from ...errors import EvaluationError
from ...models.embed import check_store_embedder
from ...pipeline.synthesize import PassReport
from ...store import MemoryStore
from .complete import require_pass
from .context import (
    PassRecord,
    PointContext,
    ProtocolRun,
    check_procedures,
    families_without_probe,
)
from .floors import check_floors
from .metrics import ProbeResult
from .options import CadenceUnit
from .scoring import FloorWitness, probe_rows, progress_bar, store_view

__all__ = ["Rolling", "replay", "replay_order", "run_rolling"]

#: The label flag of an importer that had to make timestamps up.
_MADE_UP = "synthetic-timestamps"


@dataclass(frozen=True)
class Rolling:
    """What a rolling replay produced (the point's rows and its passes)."""

    rows: list[ProbeResult]
    reports: tuple[PassReport, ...]
    passes: tuple[PassRecord, ...]
    probes: tuple[str, ...]
    witness: FloorWitness
    ordered_by: Literal["time", "recorded"]
    sessions: int
    probes_without_goal: int
    leak_checks: int
    #: procedure id -> (success_count, attempt_count) right after the pass that wrote it
    first_counts: Mapping[str, tuple[int, int]] = field(default_factory=dict)

    def info(self) -> dict[str, Any]:
        """JSON-ready, for the point's summary."""
        return {"ordered_by": self.ordered_by, "sessions": self.sessions,
                "probes": len(self.probes), "probes_without_goal": self.probes_without_goal,
                "passes": [asdict(p) for p in self.passes],
                "left_for_later_at_end": self.passes[-1].left_for_later if self.passes else 0,
                "probes_checked_absent_from_store": self.leak_checks}


@dataclass(frozen=True)
class _Entry:
    """One session in replay order: its record (None: no tool calls) and its start."""

    session_id: str
    record: SessionRecord | None
    start: str | None


def replay_order(records: list[SessionRecord], labels: Mapping[str, SessionLabel]
                 ) -> tuple[list[_Entry], Literal["time", "recorded"]]:
    """Every session in the order it happened, and whether that order rests on real times.

    Sessions with tool calls come from ``records`` (recorded order); a labelled session
    without calls is an attempt too (it can be a probe, and it counts towards its family)
    but writes nothing. Sorted by ``started_at`` (the label's, else the first call's), ties
    in recorded order; ``recorded`` when any label says its importer made its timestamps up
    (they then follow the recorded order) or a session has no time at all (then the
    recorded order alone).
    """
    have = {r.session_id for r in records}
    entries = [_Entry(session_id=r.session_id, record=r, start=_start(r, labels)) for r in records]
    entries += [_Entry(session_id=sid, record=None,
                       start=x.started_at) for sid, x in labels.items() if sid not in have]
    made_up = any(_MADE_UP in x.flags for x in labels.values())
    if any(e.start is None for e in entries):
        return [e for e in entries if e.record is not None], "recorded"
    pos = {e.session_id: i for i, e in enumerate(entries)}
    ordered = sorted(entries, key=lambda e: (str(e.start), pos[e.session_id]))
    return ordered, "recorded" if made_up else "time"


def _day(ts: str | None, where: str) -> int:
    try:
        return dt.date.fromisoformat(str(ts)[:10]).toordinal()
    except ValueError:
        raise EvaluationError(f"{where}: timestamp {ts!r} is not an ISO date; a cadence in "
                              "days needs one") from None


def run_rolling(ctx: PointContext) -> ProtocolRun:
    """The corpus replayed in order with a pass every ``cadence`` (see the module
    docstring), into a fresh history store; then each procedure checked and the floors."""
    cfg, strategy = ctx.cfg, ctx.strategy
    with MemoryStore.open(cfg.corpus, read_only=True) as corpus, \
            MemoryStore.init(ctx.history_db) as store, ctx.stage("rolling_passes"):
        check_store_embedder(store, ctx.embedder)
        rolled = replay(ctx, corpus, store)
        checks = check_procedures(store, ctx.split, ctx.out, set(store.session_ids()))
        floors = check_floors(store, strategy, ctx.llm, ctx.embedder, ctx.th, cfg.mode,
                              rolled.witness.goal,
                              lambda: strategy.recaller(store, ctx.queries, ctx.th,
                                                        cfg.recall_key))
    split_info = {"k": ctx.split.k, "protocol": "rolling", **rolled.info(),
                  "families_without_probe": families_without_probe(ctx.split)}
    return ProtocolRun(rows=list(rolled.rows), reports=list(rolled.reports),
                       witness=rolled.witness, checks=checks, floors=floors,
                       split_info=split_info, live_info=None, passes=rolled.passes,
                       first_counts=dict(rolled.first_counts))


def replay(ctx: PointContext, corpus: MemoryStore, store: MemoryStore) -> Rolling:
    """Replay ``corpus`` into the empty ``store`` (see the module docstring).

    The split supplies the families (scoring only). The labels give order, task ids and,
    with ``rate: session``, the outcomes the pass qualifies clusters by. The gold source is
    handed to the control arms' recall; each pass runs with the point's verifier.

    Raises:
        EvaluationError: a cadence below 1, a cadence in days over a corpus without real
            timestamps, or (a bug) a probe found in the store it is recalled against.
    """
    cfg, strategy, th, split, labels = ctx.cfg, ctx.strategy, ctx.th, ctx.split, ctx.labels
    cadence, cadence_unit = cfg.cadence, cfg.cadence_unit
    ordered, ordered_by = _replay(corpus, labels, cadence, cadence_unit)
    view = store_view(store, strategy, ctx.queries, th, cfg.recall_key, split, ctx.gold)
    seen: Counter[str] = Counter()
    tasks: set[str] = set()
    reports: list[PassReport] = []
    passes: list[PassRecord] = []
    rows: list[ProbeResult] = []
    probes: list[str] = []
    witness = FloorWitness()
    first: dict[str, tuple[int, int]] = {}
    no_goal = checked = last_pos = 0
    last_day = _day(ordered[0].start, str(corpus.path)) \
        if ordered and cadence_unit == "days" else 0
    for pos, entry in enumerate(progress_bar(ordered, ctx.progress, "sessions")):
        sid = entry.session_id
        day = _day(entry.start, f"{corpus.path}: session {sid}") \
            if cadence_unit == "days" else 0
        due = (pos - last_pos >= cadence) if cadence_unit == "sessions" else \
            (day - last_day >= cadence)
        if due and strategy.method is not None:
            last_pos, last_day = pos, day
            rep, record = _synthesis_pass(ctx, store, index=len(passes), at=pos)
            reports.append(rep)
            passes.append(record)
            view = store_view(store, strategy, ctx.queries, th, cfg.recall_key, split,
                              ctx.gold)
            for p in view.procedures:
                first.setdefault(p.id, (p.success_count, p.attempt_count))
        family = split.family(sid)
        label = labels.get(sid)
        if family is not None and seen[family] >= cfg.k:
            probes.append(sid)
            if store.sessions_with_calls([sid]):
                raise EvaluationError(f"probe {sid} is already in the store it is to be "
                                      "recalled against (a protocol bug; please report it)")
            checked += 1
            turn = corpus.first_user_turns([sid]).get(sid)
            if turn is None:
                no_goal += 1
            else:
                task = label.task_id if label is not None else None
                rows += probe_rows(
                    strategy, th, view, ctx.queries, session_id=sid, goal=turn.content,
                    calls=corpus.tool_calls(sid), family=family,
                    success=label.success if label is not None else None,
                    seen_task=None if task is None else task in tasks, witness=witness,
                    recall_cut=cfg.recall_cut,
                    recall_layout=cfg.recall_layout)
        if entry.record is not None:  # a session without calls leaves nothing to detect
            write_session(store, entry.record)
        if family is not None:
            seen[family] += 1
        if label is not None and label.task_id is not None:
            tasks.add(label.task_id)
    return Rolling(rows=rows, reports=tuple(reports), passes=tuple(passes), probes=tuple(probes),
                   witness=witness, ordered_by=ordered_by, sessions=len(ordered),
                   probes_without_goal=no_goal, leak_checks=checked, first_counts=first)


def _replay(corpus: MemoryStore, labels: Mapping[str, SessionLabel], cadence: int,
            cadence_unit: CadenceUnit) -> tuple[list[_Entry], Literal["time", "recorded"]]:
    """The corpus's sessions in replay order, and what ordered them; a cadence that cannot
    apply is refused."""
    if cadence < 1:
        raise EvaluationError(f"cadence must be >= 1 {cadence_unit}, got {cadence}")
    records = [r for r in read_gaia_db(corpus.path) if isinstance(r, SessionRecord)]
    ordered, ordered_by = replay_order(records, labels)
    if cadence_unit == "days" and ordered_by == "recorded":
        raise EvaluationError(f"{corpus.path}: cadence_unit days needs the sessions' real "
                              "times, and this corpus has none (made up or missing); use "
                              "cadence_unit sessions")
    return ordered, ordered_by


def _synthesis_pass(ctx: PointContext, store: MemoryStore, *, index: int, at: int
                    ) -> tuple[PassReport, PassRecord]:
    """One due pass of the strategy over the store, timed, and its record."""
    cfg = ctx.cfg
    t0 = time.perf_counter()
    rep = ctx.strategy.synthesize(store, ctx.llm, ctx.queries, ctx.th, mode=cfg.mode,
                                  rate=cfg.rate, outcomes=ctx.outcomes, verifier=ctx.verifier,
                                  args=cfg.distill_args, distiller=cfg.distiller)
    took = time.perf_counter() - t0
    assert rep is not None  # a strategy with a method synthesizes
    require_pass(rep, f"rolling pass {index} (after {at} session(s))")
    return rep, PassRecord(index=index, at_session=at, status=rep.status, read=rep.sessions,
                           qualified=rep.qualified, distilled=rep.distilled, added=rep.added,
                           updated=rep.updated, left_for_later=rep.left_for_later,
                           llm_calls=rep.llm_calls, cache_hits=rep.cache_hits,
                           active_procedures=len(store.procedures(active_only=True)),
                           wall_s=round(took, 3), consumed=len(store.synthesis_marks()))


def _start(rec: SessionRecord, labels: Mapping[str, SessionLabel]) -> str | None:
    x = labels.get(rec.session_id)
    if x is not None and x.started_at:
        return x.started_at
    return rec.calls[0].timestamp if rec.calls else None
