"""Partitioning goal vectors at scale: exact results without all-pairs work where the data
allows (used by :mod:`.cluster`).

Average and complete linkage cut at 1 - tau never merge two sessions not joined by a
chain of pairs with cosine >= tau, so they can run separately on any partition whose
parts are unions of that graph's components. split_groups finds one cheaply and
exactly: k-means cells, and an upper bound on the cosine between members of two cells
(triangle inequality) that proves most cell pairs share no such pair; groups of linked
cells are split again until they no longer split. A group whose every pair provably has
cosine >= tau is one cluster under both linkages (is_tight), with no pair computed.
leader_clusters is GAIA's greedy loop in blocks of matrix products; cosines within
RECHECK of tau are redone with the loop's own one-pair dot product (identical result).
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import pairwise

import numpy as np

__all__ = ["RECHECK", "SPLIT_BELOW", "is_tight", "kmeans_cells", "leader_clusters", "split_groups"]

#: Groups at most this large are not split further (their all-pairs search is cheap).
SPLIT_BELOW = 2_048
#: A matrix-product cosine this close to tau is recomputed the way the one-pair loop does.
RECHECK = 1e-4
#: Margin on every bound below: float32 products are off by far less than this.
_MARGIN = 1e-4
_CHUNK = 65_536


def is_tight(x: np.ndarray, tau: float) -> bool:
    """Whether every pair of rows provably has cosine >= tau (radius about the centroid).

    With r the largest distance from the centroid, any two rows are within 2r, so their
    inner product is at least ``min|x|^2 - 2 r^2``.
    """
    if len(x) < 2:
        return True
    c = x.mean(axis=0, dtype=np.float64).astype(np.float32)
    sq = np.einsum("ij,ij->i", x, x, dtype=np.float64)
    r2 = float(np.max(sq - 2.0 * (x @ c).astype(np.float64) + float(c @ c)))
    return float(sq.min()) - 2.0 * max(r2, 0.0) >= tau + _MARGIN


def _nearest(x: np.ndarray, cent: np.ndarray) -> np.ndarray:
    half = 0.5 * np.einsum("ij,ij->i", cent, cent)
    out = np.empty(len(x), dtype=np.int64)
    for s in range(0, len(x), _CHUNK):
        out[s:s + _CHUNK] = np.argmax(x[s:s + _CHUNK] @ cent.T - half, axis=1)
    return out


def kmeans_cells(x: np.ndarray, k: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Centroids and each row's cell: a few Lloyd rounds on a sample.

    Plain numpy: a threaded k-means call costs more in start-up than the work on the small
    groups met here, and the bounds that use these cells are correct for any cells.
    """
    from scipy.sparse import csr_matrix

    rng = np.random.default_rng(seed)
    sample = x[np.sort(rng.choice(len(x), size=min(len(x), 64 * k), replace=False))]
    cent = sample[rng.choice(len(sample), size=k, replace=False)].copy()
    for _ in range(6):
        lab = _nearest(sample, cent)
        onehot = csr_matrix((np.ones(len(lab), dtype=np.float32), (lab, np.arange(len(lab)))),
                            shape=(k, len(lab)))
        count = np.bincount(lab, minlength=k)
        sums = np.asarray(onehot @ sample)
        full = count > 0
        cent[full] = sums[full] / count[full, None]
    return cent, _nearest(x, cent)


def _split_once(x: np.ndarray, tau: float, seed: int) -> list[np.ndarray]:
    """Row indices of groups of linked cells (one group when nothing could be proved apart)."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    m = len(x)
    k = int(min(256, max(2, np.sqrt(m))))
    cent, labels = kmeans_cells(x, k, seed)
    cc = np.einsum("ij,ij->i", cent, cent).astype(np.float64)
    sq = np.einsum("ij,ij->i", x, x, dtype=np.float64)
    top = np.full((k, k), -np.inf)  # top[a, b]: the largest x . c_b over x in cell a
    r2 = np.full(k, -np.inf)  # the largest squared distance from c_a over cell a
    order = np.argsort(labels, kind="stable")
    for s in range(0, m, _CHUNK):
        rows = order[s:s + _CHUNK]
        lab = labels[rows]
        dots = (x[rows] @ cent.T).astype(np.float64)
        starts = np.flatnonzero(np.r_[True, lab[1:] != lab[:-1]])
        cells = lab[starts]
        top[cells] = np.maximum(top[cells], np.maximum.reduceat(dots, starts, axis=0))
        own = sq[rows] - 2.0 * dots[np.arange(len(rows)), lab] + cc[lab]
        r2[cells] = np.maximum(r2[cells], np.maximum.reduceat(own, starts))
    filled = np.isfinite(r2)
    # y = c_b + e with |e| <= R_b, so x . y <= x . c_b + |x| R_b; both directions hold.
    radius = np.sqrt(np.maximum(r2, 0.0) + 1e-5)
    bound = top + np.sqrt(sq.max()) * radius[None, :]
    bound = np.minimum(bound, bound.T)
    link = (bound >= tau - _MARGIN) & filled[:, None] & filled[None, :]
    n_groups, group = connected_components(csr_matrix(link), directed=False)
    if n_groups - int((~filled).sum()) <= 1:
        return [np.arange(m)]
    of_row = group[labels]
    sort = np.argsort(of_row, kind="stable")
    bounds = np.flatnonzero(np.r_[True, of_row[sort][1:] != of_row[sort][:-1], True])
    return [sort[a:b] for a, b in pairwise(bounds.tolist())]


def split_groups(v: np.ndarray, tau: float, *, split_below: int | None = None,
                 seed: int = 0) -> Iterator[tuple[np.ndarray, bool]]:
    """Partition rows into groups, each a union of components of the graph 'cosine >= tau'.

    Yields ``(row indices ascending, tight)``; a tight group has every pair's cosine
    provably >= tau. Exact whatever the k-means cells are: the cells only decide how much
    is proved apart.
    """
    limit = SPLIT_BELOW if split_below is None else split_below
    stack = [np.arange(len(v))]
    while stack:
        idx = stack.pop()
        x = v if len(idx) == len(v) else v[idx]
        if is_tight(x, tau):
            yield idx, True
            continue
        if len(idx) <= limit:
            yield idx, False
            continue
        parts = _split_once(x, tau, seed)
        if len(parts) == 1:
            yield idx, False
        else:
            stack.extend(np.sort(idx[p]) for p in parts)


def _hits(sims: np.ndarray, v: np.ndarray, rows: np.ndarray, cols: np.ndarray,
          tau: float) -> np.ndarray:
    """``sims >= tau``, with near-tau entries decided by the one-pair dot product."""
    hit = sims >= tau
    near = np.argwhere(np.abs(sims - tau) <= RECHECK)
    for r, c in near:
        hit[r, c] = float(v[rows[r]] @ v[cols[c]]) >= tau
    return hit


def leader_clusters(v: np.ndarray, order: np.ndarray, tau: float, *, block: int = 4_096
                    ) -> list[list[int]]:
    """Rows visited in ``order`` join the first seed with cosine >= tau, or become seeds.

    Groups come in seed order, members in visiting order (GAIA's loop, batched).
    """
    n, d = v.shape
    seeds = np.empty((min(n, 1_024), d), dtype=np.float32)
    seed_rows: list[int] = []
    of_seed: list[list[int]] = []
    for s in range(0, n, block):
        rows = order[s:s + block]
        xb = v[rows]
        got = np.full(len(rows), -1, dtype=np.int64)
        ns = len(seed_rows)
        if ns:
            hit = _hits(xb @ seeds[:ns].T, v, rows, np.asarray(seed_rows), tau)
            has = hit.any(axis=1)
            got[has] = hit.argmax(axis=1)[has]
        rest = np.flatnonzero(got < 0)
        while rest.size:  # new seeds from this block, in visiting order
            first, rest = rest[0], rest[1:]
            sid = len(seed_rows)
            if sid == len(seeds):
                seeds = np.vstack([seeds, np.empty_like(seeds)])
            seeds[sid] = xb[first]
            seed_rows.append(int(rows[first]))
            got[first] = sid
            if rest.size:
                hit = _hits((xb[rest] @ xb[first])[:, None], v, rows[rest],
                            np.asarray([rows[first]]), tau)[:, 0]
                got[rest[hit]] = sid
                rest = rest[~hit]
        for sid in range(len(of_seed), len(seed_rows)):
            of_seed.append([])
        for r, g in zip(rows.tolist(), got.tolist(), strict=True):
            of_seed[g].append(r)
    return of_seed
