"""Recall: the stored procedures whose key means the same as a new goal.

GAIA's key (``when_to_use``) is a FAISS inner-product index over ``procedures.embedding``
of enabled, non-superseded rows. Two keys GAIA does not have are there to be compared with
it: ``goals`` scores a procedure by the best cosine between the new goal and the goals of
the sessions it was distilled from (its exemplars), and ``both`` takes the higher of the
two scores. A result comes back only at cosine >= ``recall_tau`` (``similarity_tau`` when
unset, as GAIA does); a disabled or superseded procedure never does. Recalling touches
``last_used_at`` (GAIA's semantics), so a read-only store must pass ``touch=False``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import numpy as np

from ..config import Thresholds
from ..errors import ConfigError, EmbedderError
from ..models.embed import Embeds
from ..store import MemoryStore, Procedure, decode_embedding
from .skill import Skill

__all__ = ["FLAT_LIMIT", "RECALL_KEYS", "BothIndex", "CellIndex", "ExemplarIndex",
           "ProcedureIndex", "Recall", "RecallIndex", "RecallKey", "one_thread", "recall",
           "recall_index", "recall_skill", "skill_from_procedure"]

#: What a procedure is recalled by (``when_to_use`` is GAIA's).
RecallKey = Literal["when_to_use", "goals", "both"]
RECALL_KEYS: tuple[RecallKey, ...] = ("when_to_use", "goals", "both")


@dataclass(frozen=True)
class Recall:
    """One recalled procedure and its cosine score against the goal."""

    procedure: Procedure
    score: float


def skill_from_procedure(proc: Procedure) -> Skill:
    """The :class:`Skill` a stored procedure describes (raises MalformedSkill if it cannot)."""
    return Skill(name=proc.name, description=proc.when_to_use, body=proc.markdown_body,
                 tools_required=proc.tools_required, version=proc.version)


#: Up to this many procedures a search scans them all; above, only the cells that can
#: hold a result (:class:`CellIndex`; exact either way).
FLAT_LIMIT = 4_096


@contextmanager
def one_thread() -> Iterator[None]:
    """FAISS on the calling thread only: one query is microseconds of work, and waking a
    thread team for it costs more (milliseconds when the cores are busy)."""
    import faiss

    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)


class CellIndex:
    """Exact inner-product top-k that scans only the cells that can hold a result.

    The vectors are split into k-means cells (a FAISS IVF layout). A member y of a cell
    with centroid c and radius R has q . y <= q . c + |q| R, so a cell whose bound is
    below tau, or below the k-th best score already found, cannot change the answer and
    is skipped. Results equal a flat scan's; only the work differs.
    """

    def __init__(self, vectors: np.ndarray, *, seed: int = 0):
        import faiss

        from .cluster import kmeans_cells

        mat = np.ascontiguousarray(vectors, dtype=np.float32)
        n, d = mat.shape
        self.nlist = max(1, min(n, int(2 * np.sqrt(n))))
        cent, _ = kmeans_cells(mat, self.nlist, seed)
        cent /= np.maximum(np.linalg.norm(cent, axis=1, keepdims=True), 1e-12)
        self._quantizer = faiss.IndexFlatIP(d)
        self._quantizer.add(cent)
        # Any: FAISS's stubs give the C++ signatures, not the numpy wrappers used here
        self._ivf: Any = faiss.IndexIVFFlat(self._quantizer, d, self.nlist,
                                            faiss.METRIC_INNER_PRODUCT)
        self._ivf.add(mat)
        self._ivf.nprobe = self.nlist
        radius = np.zeros(self.nlist)
        lists: Any = self._ivf.invlists
        for cell in range(self.nlist):
            size = lists.list_size(cell)
            if size:
                ids = faiss.rev_swig_ptr(lists.get_ids(cell), size)
                diff = mat[ids] - cent[cell]
                radius[cell] = np.sqrt(np.einsum("ij,ij->i", diff, diff).max())
        self.radius = radius + 1e-4  # float32 rounding of the members and centroid
        self.scanned = 0  # cells scanned by the latest search (for the benchmark)

    def _scan(self, q: np.ndarray, k: int, cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        assign = np.full((1, self.nlist), -1, dtype=np.int64)
        assign[0, :len(cells)] = cells
        self.scanned += len(cells)
        out: tuple[np.ndarray, np.ndarray] = self._ivf.search_preassigned(q, k, assign, None)
        return out

    def search(self, q: np.ndarray, k: int, tau: float) -> tuple[np.ndarray, np.ndarray]:
        """Scores and row ids of the best ``k`` rows scoring >= ``tau`` (FAISS's layout:
        shape (1, k), padded with id -1); a row below tau may fill a free place."""
        self.scanned = 0
        cent_ip, cells = self._quantizer.search(q, self.nlist)
        bound = cent_ip[0] + float(np.linalg.norm(q)) * self.radius[cells[0]]
        order = np.argsort(-bound, kind="stable")
        cells, bound = cells[0][order], bound[order]
        cells, bound = cells[bound >= tau - 1e-5], bound[bound >= tau - 1e-5]
        scores = np.full((1, k), -np.inf, dtype=np.float32)
        ids = np.full((1, k), -1, dtype=np.int64)
        if not len(cells):
            return scores, ids
        first = 8
        scores, ids = self._scan(q, k, cells[:first])
        kth = float(scores[0, k - 1]) if ids[0, k - 1] >= 0 else -np.inf
        rest = cells[first:][bound[first:] >= kth - 1e-5]
        if len(rest):
            s2, i2 = self._scan(q, k, rest)
            s_all, i_all = np.concatenate([scores[0], s2[0]]), np.concatenate([ids[0], i2[0]])
            s_all = np.where(i_all >= 0, s_all, -np.inf)
            best = np.argsort(-s_all, kind="stable")[:k]
            scores, ids = s_all[best][None, :], i_all[best][None, :]
        return scores, ids


class ProcedureIndex:
    """FAISS inner-product index over the active procedures' embeddings.

    Build once and reuse across many recalls (a sweep, a notebook); rebuild after the
    procedures change. Procedures without an embedding are counted in ``unembedded``.
    Up to :data:`FLAT_LIMIT` procedures a search scans them all; above, a
    :class:`CellIndex` skips the cells that cannot hold a result (same results).
    """

    def __init__(self, procedures: Sequence[Procedure]):
        import faiss

        active = [p for p in procedures if p.active]
        with_vec = [p for p in active if p.embedding is not None]
        self.unembedded = len(active) - len(with_vec)
        self.procedures = with_vec
        self.dimension: int | None = None
        self._index: Any = None
        self._cells: CellIndex | None = None
        if with_vec:
            mat = np.vstack([decode_embedding(p.embedding) for p in with_vec
                             if p.embedding is not None]).astype(np.float32)
            self.dimension = mat.shape[1]
            if len(with_vec) > FLAT_LIMIT:
                self._cells = CellIndex(mat)
            else:
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
        if self.dimension is None or top_k < 1:
            return []
        q = np.ascontiguousarray(np.asarray(query, dtype=np.float32).reshape(1, -1))
        if q.shape[1] != self.dimension:
            raise EmbedderError(f"query has {q.shape[1]} dimensions, the stored procedure "
                                f"embeddings {self.dimension}: they come from different "
                                "embedders")
        k = min(top_k, len(self.procedures))
        with one_thread():
            if self._cells is not None:
                scores, ids = self._cells.search(q, k, tau)
            else:
                scores, ids = self._index.search(q, k)
        return [Recall(procedure=self.procedures[int(i)], score=float(s))
                for s, i in zip(scores[0], ids[0], strict=True) if i >= 0 and s >= tau]


class RecallIndex(Protocol):
    """Scores a goal's vector against the active procedures (one per recall key)."""

    @property
    def procedures(self) -> Sequence[Procedure]: ...

    def __len__(self) -> int: ...

    def search(self, query: np.ndarray, *, top_k: int, tau: float) -> list[Recall]: ...


def _flat(vectors: np.ndarray):  # type: ignore[no-untyped-def]
    import faiss

    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(np.ascontiguousarray(vectors.astype(np.float32)))
    return index


def _best_first(best: dict[str, Recall], top_k: int, tau: float) -> list[Recall]:
    ranked = sorted(best.values(), key=lambda r: (-r.score, r.procedure.id))
    return [r for r in ranked if r.score >= tau][:max(top_k, 0)]


class ExemplarIndex:
    """The active procedures' exemplars: the first user turns of their provenance sessions.

    A procedure scores the best cosine between the goal and any of its exemplars. Nothing
    is stored for this: the exemplars are read from ``procedures.provenance`` and the
    store's conversations when the index is built, so GAIA's schema and its
    ``procedures.embedding`` (the when_to_use vector) stay as they are. Exemplars are
    embedded as queries (a goal against goals), so a goal once recalled for costs no
    second embedding with a call cache. A procedure whose sessions have no goal left in
    the store has no exemplar (counted in ``without_exemplars``).
    """

    def __init__(self, store: MemoryStore, embedder: Embeds):
        procs = store.procedures(active_only=True)
        owners: list[int] = []
        texts: list[str] = []
        for i, p in enumerate(procs):
            sessions = [str(s) for s in (p.provenance or {}).get("from_sessions", [])]
            turns = store.first_user_turns(sessions) if sessions else {}
            for s in sessions:
                if s in turns:
                    owners.append(i)
                    texts.append(turns[s].content)
        self.procedures = [procs[i] for i in sorted(set(owners))]
        self.without_exemplars = len(procs) - len(self.procedures)
        self.exemplars = len(texts)
        self._procs = procs
        self._owners = np.asarray(owners, dtype=np.int64)
        self._index = _flat(embedder.embed(texts, kind="query")) if texts else None

    def __len__(self) -> int:
        return len(self.procedures)

    def search(self, query: np.ndarray, *, top_k: int, tau: float) -> list[Recall]:
        """The best ``top_k`` procedures by their best exemplar, each >= ``tau``."""
        if self._index is None or top_k < 1:
            return []
        q = np.ascontiguousarray(np.asarray(query, dtype=np.float32).reshape(1, -1))
        with one_thread():
            scores, ids = self._index.search(q, self.exemplars)
        best: dict[str, Recall] = {}
        for s, i in zip(scores[0], ids[0], strict=True):
            if i < 0:  # FAISS pads a short result with -1
                continue
            p = self._procs[int(self._owners[int(i)])]
            if p.id not in best or s > best[p.id].score:
                best[p.id] = Recall(procedure=p, score=float(s))
        return _best_first(best, top_k, tau)


class BothIndex:
    """A procedure scores the higher of its when_to_use and its best exemplar cosine."""

    def __init__(self, *indexes: RecallIndex):
        self.indexes = indexes
        seen = {p.id: p for ix in indexes for p in ix.procedures}
        self.procedures = list(seen.values())

    def __len__(self) -> int:
        return len(self.procedures)

    def search(self, query: np.ndarray, *, top_k: int, tau: float) -> list[Recall]:
        """The best ``top_k`` procedures by their higher score, each >= ``tau``."""
        best: dict[str, Recall] = {}
        for ix in self.indexes:
            for r in ix.search(query, top_k=len(ix), tau=-1.0):
                if r.procedure.id not in best or r.score > best[r.procedure.id].score:
                    best[r.procedure.id] = r
        return _best_first(best, top_k, tau)


def recall_index(store: MemoryStore, embedder: Embeds, key: RecallKey = "when_to_use"
                 ) -> RecallIndex:
    """The index ``key`` recalls through, over the store's procedures as they are now."""
    if key == "when_to_use":
        return ProcedureIndex.from_store(store)
    if key == "goals":
        return ExemplarIndex(store, embedder)
    if key == "both":
        return BothIndex(ProcedureIndex.from_store(store), ExemplarIndex(store, embedder))
    raise ConfigError(f"recall key must be one of {', '.join(RECALL_KEYS)}, got {key!r}",
                      key="recall_key")


def recall(store: MemoryStore, embedder: Embeds, goal: str, config: Thresholds,
           top_k: int | None = None, *, index: RecallIndex | None = None,
           touch: bool = True) -> list[Recall]:
    """Procedures for ``goal`` with their scores (at most ``top_k``, each >= tau).

    Args:
        store: the memory database.
        embedder: embeds the goal (as a query).
        goal: the new user goal.
        config: ``effective_recall_tau`` (``recall_tau``, else ``similarity_tau``) and
            ``recall_top_k``.
        top_k: overrides ``config.recall_top_k``.
        index: a prebuilt index (:func:`recall_index`; default: GAIA's when_to_use index
            built from the store now).
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
                 top_k: int | None = None, *, index: RecallIndex | None = None,
                 touch: bool = True) -> list[Skill]:
    """:func:`recall`, as Skills (the shape the planner prompt injects)."""
    return [skill_from_procedure(r.procedure)
            for r in recall(store, embedder, goal, config, top_k, index=index, touch=touch)]
