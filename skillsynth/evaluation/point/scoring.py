"""Both arms of one probe under the replay rule, shared by the strict and rolling protocols.

A probe is scored against the store as it is when it is recalled for: the recall function,
the index that diagnoses score separation, and which procedures belong to which family are
all handed in, so a rolling protocol can rebuild them after each pass.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ...config import Thresholds
from ...errors import ArmSkipped
from ...models.embed import Embeds, Kind
from ...pipeline.inject import RecallCut
from ...pipeline.recall import Recall, RecallIndex, RecallKey, recall_index, skill_from_procedure
from ...store import MemoryStore, Procedure, ToolCall
from ..live.gaia_context import RecallLayout, recall_block
from ..strategies import Recaller, Strategy
from .estimate import RULE, estimate_steps
from .metrics import ProbeResult
from .split import Split, procedure_families

if TYPE_CHECKING:
    from .controls import GoldSource

__all__ = ["FloorWitness", "QueryMemo", "StoreView", "best_scores", "hits_of", "probe_rows",
           "progress_bar", "store_view"]


@dataclass(frozen=True)
class StoreView:
    """What a probe is scored against: the store's procedures at the moment of recall.

    Attributes:
        recaller: the strategy's recall over the store as it is.
        index: the embedding index of the point's recall key (score separation).
        fam_of: procedure id -> its families (from its provenance; scoring only).
        active_fams: families with an active procedure.
        procedures: every procedure row as it was read (superseded and disabled too).
    """

    recaller: Recaller
    index: RecallIndex
    fam_of: Mapping[str, tuple[str, ...]]
    active_fams: Collection[str]
    procedures: Sequence[Procedure] = ()


@dataclass
class FloorWitness:
    """A goal for the floors (one that recalled something, else any) and whether every
    recall respected tau and the procedures' state."""

    goal: str | None = None
    hit: bool = False
    recall_ok: bool = True

    def observe(self, goal: str, hits: Sequence[Recall], strategy: Strategy,
                th: Thresholds) -> None:
        """Record one recall."""
        if self.goal is None or (hits and not self.hit):
            self.goal, self.hit = goal, bool(hits)
        self.recall_ok &= all(h.procedure.active for h in hits) and (
            strategy.recall_kind != "embedding"
            or all(h.score >= th.effective_recall_tau for h in hits))


def store_view(store: MemoryStore, strategy: Strategy, embedder: Embeds, th: Thresholds,
               key: RecallKey, split: Split, gold: GoldSource | None = None) -> StoreView:
    """The store's procedures as they are now, seen the way probes are scored.

    ``gold``: the point's gold source, handed to the control arms' recall.
    """
    procs = store.procedures()
    fam_of = {p.id: procedure_families(p, split) for p in procs}
    return StoreView(
        recaller=strategy.recaller(store, embedder, th, key, gold=gold),
        index=recall_index(store, embedder, key if strategy.recall_kind == "embedding"
                           else "when_to_use"),
        fam_of=fam_of, active_fams={f for p in procs if p.active for f in fam_of[p.id]},
        procedures=procs)


def hits_of(embedder: Embeds) -> int:
    """The embedder's call-cache hits so far (0 without a cache)."""
    cache = getattr(embedder, "cache", None)
    return cache.stats().hits if cache is not None else 0


def probe_rows(strategy: Strategy, th: Thresholds, view: StoreView, embedder: Embeds, *,
               session_id: str, goal: str, calls: Sequence[ToolCall], family: str,
               success: bool | None, seen_task: bool | None,
               witness: FloorWitness, recall_cut: RecallCut = "raw",
               recall_layout: RecallLayout = "main") -> list[ProbeResult]:
    """The probe's ``no-memory`` and ``memory`` rows (recall, replay estimate, diagnostics);
    ``recall_cut`` and ``recall_layout``: how the injected block is cut and laid out (its
    size is recorded).

    No rows when a control arm has nothing to recall for the probe (the reason is counted).
    """
    t1, h0 = time.perf_counter(), hits_of(embedder)
    try:
        hits: list[Recall] = view.recaller(goal, session_id)
    except ArmSkipped:
        return []
    base = estimate_steps(calls, None)
    common: dict[str, Any] = {
        "strategy": strategy.name, "probe_session": session_id, "family": family,
        "goal": goal, "steps_recorded": base.baseline, "success": success,
        "family_has_procedure": family in view.active_fams, "seen_task": seen_task}
    rows = [ProbeResult(arm="no-memory", recalled_ids=(), recalled_scores=(), recalled_right=0,
                        steps=base.baseline, steps_method="recorded", **common)]
    right, wrong = best_scores(view.index, embedder, goal, family, view.fam_of)
    witness.observe(goal, hits, strategy, th)
    skills = [skill_from_procedure(h.procedure) for h in hits]
    est = estimate_steps(calls, [t for s in skills for t in s.tools_required])
    rows.append(ProbeResult(
        arm="memory", recalled_ids=tuple(h.procedure.id for h in hits),
        recalled_scores=tuple(round(h.score, 6) for h in hits),
        recalled_right=sum(1 for h in hits if family in _families(view, h)),
        steps=est.estimate, steps_method=RULE if hits else "recorded",
        prompt_chars=len(recall_block(skills, th, cut=recall_cut, layout=recall_layout)),
        cache_hits=hits_of(embedder) - h0,
        wall_s=round(time.perf_counter() - t1, 4), best_right_score=right,
        best_wrong_score=wrong, **common))
    return rows


def _families(view: StoreView, hit: Recall) -> Sequence[str]:
    """A recalled procedure's families: from its provenance in the store, else (a control
    arm's procedure, never stored) the families it names itself."""
    return view.fam_of.get(hit.procedure.id) or (hit.procedure.provenance or {}).get(
        "families", ())


class QueryMemo:
    """An embedder that embeds each query text once per point (documents pass through)."""

    def __init__(self, inner: Embeds):
        self.inner = inner
        self.cache = getattr(inner, "cache", None)  # hit counts stay the inner embedder's
        self._vectors: dict[str, np.ndarray] = {}

    @property
    def embedder_id(self) -> str:
        """The inner embedder's."""
        return self.inner.embedder_id

    def embed(self, texts: Sequence[str], *, kind: Kind = "document",
              progress: bool = False) -> np.ndarray:
        if kind != "query":
            return self.inner.embed(texts, kind=kind, progress=progress)
        todo = [t for t in dict.fromkeys(texts) if t not in self._vectors]
        if todo:
            for t, v in zip(todo, self.inner.embed(todo, kind="query"), strict=True):
                self._vectors[t] = v
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.vstack([self._vectors[t] for t in texts])


def best_scores(index: RecallIndex, embedder: Embeds, goal: str, family: str,
                fam_of: Mapping[str, tuple[str, ...]]) -> tuple[float | None, float | None]:
    """Best score of the goal for a procedure of its family, and for one of another."""
    if not len(index):
        return None, None
    q = embedder.embed([goal], kind="query")[0]  # a QueryMemo: recall embedded it already
    right = wrong = None
    for h in index.search(q, top_k=len(index), tau=-1.0):
        if family in fam_of.get(h.procedure.id, ()):
            right = h.score if right is None else max(right, h.score)
        else:
            wrong = h.score if wrong is None else max(wrong, h.score)
    return (None if right is None else round(right, 6),
            None if wrong is None else round(wrong, 6))


def progress_bar(items: Sequence[Any], show: bool, desc: str) -> Any:
    """``items``, wrapped in a progress bar when ``show``."""
    if not show:
        return items
    from tqdm.auto import tqdm

    return tqdm(items, desc=desc, leave=False)
