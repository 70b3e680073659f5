"""Recall above the flat limit returns what a flat scan returns, on one thread."""

from __future__ import annotations

import faiss
import numpy as np
import pytest

from skillsynth.pipeline import recall as recall_mod
from skillsynth.pipeline.recall import CellIndex, ProcedureIndex, one_thread
from skillsynth.store import Procedure, encode_embedding


def _vectors(rng, n, families, dim, noise):
    centers = rng.standard_normal((families, dim)).astype(np.float32)
    v = centers[rng.integers(0, families, size=n)] + \
        noise * rng.standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _flat(mat, q, k, tau):
    index = faiss.IndexFlatIP(mat.shape[1])
    index.add(mat)
    scores, ids = index.search(q, k)
    return [(int(i), float(s)) for s, i in zip(scores[0], ids[0], strict=True)
            if i >= 0 and s >= tau]


@pytest.mark.parametrize("families,noise", [(30, 0.2), (10, 0.8), (1, 5.0)])
@pytest.mark.parametrize("tau", [-1.0, 0.3, 0.8])
@pytest.mark.parametrize("k", [1, 2, 25])
def test_cell_index_equals_a_flat_scan(families, noise, tau, k):
    rng = np.random.default_rng(families)
    mat = _vectors(rng, 1_500, families, 24, noise)
    cells = CellIndex(mat)
    for q in _vectors(rng, 30, families, 24, noise):  # new families as well as near ones
        for query in (q, mat[rng.integers(len(mat))]):
            query = query[None, :].copy()
            scores, ids = cells.search(query, k, tau)
            got = [(int(i), float(s)) for s, i in zip(scores[0], ids[0], strict=True)
                   if i >= 0 and s >= tau]
            want = _flat(mat, query, k, tau)
            assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-6)
            # equal scores may come in either order; the sets of ids above the k-th agree
            assert {i for i, s in got if s > want[-1][1] + 1e-6} == \
                {i for i, s in want if s > want[-1][1] + 1e-6} if want else got == []


def test_cells_that_cannot_reach_tau_are_not_scanned():
    rng = np.random.default_rng(0)
    mat = _vectors(rng, 4_000, 40, 64, 0.1)
    cells = CellIndex(mat)
    cells.search(mat[:1].copy(), 2, 0.8)
    assert 0 < cells.scanned < cells.nlist // 4


def test_procedure_index_above_the_flat_limit_recalls_the_same(monkeypatch):
    rng = np.random.default_rng(1)
    mat = _vectors(rng, 600, 20, 16, 0.3)
    procs = [Procedure(name=f"p{i}", when_to_use="w", markdown_body="b",
                       embedding=encode_embedding(v), id=f"proc_{i}")
             for i, v in enumerate(mat)]
    flat = ProcedureIndex(procs)
    monkeypatch.setattr(recall_mod, "FLAT_LIMIT", 100)
    celled = ProcedureIndex(procs)
    assert celled._cells is not None and flat._cells is None
    for q in _vectors(rng, 20, 20, 16, 0.3):
        for tau in (0.5, 0.9):
            a = [(r.procedure.id, round(r.score, 5)) for r in flat.search(q, top_k=2, tau=tau)]
            b = [(r.procedure.id, round(r.score, 5)) for r in celled.search(q, top_k=2, tau=tau)]
            assert a == b


def test_one_thread_restores_the_thread_count():
    before = faiss.omp_get_max_threads()
    with one_thread():
        assert faiss.omp_get_max_threads() == 1
    assert faiss.omp_get_max_threads() == before
    with pytest.raises(RuntimeError), one_thread():
        raise RuntimeError
    assert faiss.omp_get_max_threads() == before
