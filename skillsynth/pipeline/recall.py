"""Recall: the stored procedures whose when_to_use means the same as a new goal.

A FAISS inner-product index over ``procedures.embedding`` of enabled, non-superseded rows
(its own index, built from the procedures table only). A result comes back only at
cosine >= ``recall_tau`` (``similarity_tau`` when unset, as GAIA does); a disabled or
superseded procedure never does. Recalling
touches ``last_used_at`` (GAIA's semantics), so a read-only store must pass ``touch=False``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..config import Thresholds
from ..errors import EmbedderError
from ..models.embed import Embeds
from ..store import MemoryStore, Procedure, decode_embedding
from .skill import Skill

__all__ = ["ProcedureIndex", "Recall", "recall", "recall_skill", "skill_from_procedure"]



@dataclass(frozen=True)
class Recall:
    """One recalled procedure and its cosine score against the goal."""

    procedure: Procedure
    score: float


def skill_from_procedure(proc: Procedure) -> Skill:
    """The :class:`Skill` a stored procedure describes (raises MalformedSkill if it cannot)."""
    return Skill(name=proc.name, description=proc.when_to_use, body=proc.markdown_body,
                 tools_required=proc.tools_required, version=proc.version)


class ProcedureIndex:
    """FAISS inner-product index over the active procedures' embeddings.

    Build once and reuse across many recalls (a sweep, a notebook); rebuild after the
    procedures change. Procedures without an embedding are counted in ``unembedded``.
    """

    def __init__(self, procedures: Sequence[Procedure]):
        import faiss

        active = [p for p in procedures if p.active]
        with_vec = [p for p in active if p.embedding is not None]
        self.unembedded = len(active) - len(with_vec)
        self.procedures = with_vec
        self.dimension: int | None = None
        self._index = None
        if with_vec:
            mat = np.vstack([decode_embedding(p.embedding) for p in with_vec
                             if p.embedding is not None]).astype(np.float32)
            self.dimension = mat.shape[1]
            self._index = faiss.IndexFlatIP(self.dimension)
            self._index.add(np.ascontiguousarray(mat))

    @classmethod
    def from_store(cls, store: MemoryStore) -> ProcedureIndex:
        """Index the store's enabled, non-superseded procedures."""
        return cls(store.procedures(active_only=True))

    def __len__(self) -> int:
        return len(self.procedures)

    def search(self, query: np.ndarray, *, top_k: int, tau: float) -> list[Recall]:
        """The best ``top_k`` procedures with cosine >= ``tau``, best first."""
        if self._index is None or top_k < 1:
            return []
        q = np.ascontiguousarray(np.asarray(query, dtype=np.float32).reshape(1, -1))
        if q.shape[1] != self.dimension:
            raise EmbedderError(f"query has {q.shape[1]} dimensions, the stored procedure "
                                f"embeddings {self.dimension}: they come from different "
                                "embedders")
        scores, ids = self._index.search(q, min(top_k, len(self.procedures)))
        return [Recall(self.procedures[int(i)], float(s))
                for s, i in zip(scores[0], ids[0], strict=True) if i >= 0 and s >= tau]


def recall(store: MemoryStore, embedder: Embeds, goal: str, config: Thresholds,
           top_k: int | None = None, *, index: ProcedureIndex | None = None,
           touch: bool = True) -> list[Recall]:
    """Procedures for ``goal`` with their scores (at most ``top_k``, each >= tau).

    Args:
        store: the memory database.
        embedder: embeds the goal (as a query).
        goal: the new user goal.
        config: ``effective_recall_tau`` (``recall_tau``, else ``similarity_tau``) and
            ``recall_top_k``.
        top_k: overrides ``config.recall_top_k``.
        index: a prebuilt :class:`ProcedureIndex` (default: built from the store now).
        touch: set ``last_used_at`` on what is recalled (needs a writable store).
    """
    k = config.recall_top_k if top_k is None else top_k
    idx = index or ProcedureIndex.from_store(store)
    if not len(idx):
        return []
    q = embedder.embed([goal], kind="query")[0]
    hits = idx.search(q, top_k=k, tau=config.effective_recall_tau)
    if touch and hits:
        with store.transaction():
            for h in hits:
                store.touch_procedure(h.procedure.id)
    return hits


def recall_skill(store: MemoryStore, embedder: Embeds, goal: str, config: Thresholds,
                 top_k: int | None = None, *, index: ProcedureIndex | None = None,
                 touch: bool = True) -> list[Skill]:
    """:func:`recall`, as Skills (the shape the planner prompt injects)."""
    return [skill_from_procedure(r.procedure)
            for r in recall(store, embedder, goal, config, top_k, index=index, touch=touch)]
