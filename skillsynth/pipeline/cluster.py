"""Cluster: group detected sequences by the meaning of their goals, then qualify clusters.

Three methods over the same unit-length goal embeddings:

* ``agglomerative`` (default; #887's "agglomerate at cosine >= SIMILARITY_TAU"): average
  linkage (``complete`` optional) cut at distance ``1 - tau``. Both can only merge inside
  a connected component of the graph 'cosine >= tau', so exact linkage runs per
  component. For scale the components are looked for group by group: k-means cells and a
  bound on the cosine across two cells prove most sessions apart without comparing them,
  and a group whose pairs are all provably >= tau is one cluster with no pair compared
  (:func:`split_groups`). The partition is the exact one at every size. Where the bound
  proves nothing (a loose blob, vectors with no structure) a group falls back to the
  all-pairs search, exact and quadratic; a component above :data:`COMPONENT_LIMIT` that
  is not one cluster is refused rather than given a dense matrix.
* ``hdbscan``: density clustering on the same vectors (noise points become singletons).
* ``gaia-greedy``: GAIA's shipped seed clustering, the peer to beat: sessions sorted by
  normalised goal text, each joins the first seed with cosine >= tau or becomes a seed
  (computed in blocks of matrix products, identical to the one-by-one loop).
* ``per-session``: no clustering; every session is its own cluster (the CortexPrism peer,
  which extracts a skill from each session and deduplicates afterwards). No embedding.

Qualification: at least ``min_occurrences`` sessions and a success rate of at least
``min_success_rate``. The rate is per *call* by default (GAIA's definition: successful /
attempted calls over the members), or per *session* (members whose session succeeded);
every :class:`Cluster` records which was used.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Literal

import numpy as np

from ..config import Thresholds
from ..errors import ConfigError, EmbedderError, PipelineError
from ..models.embed import Embeds
from .detect import SessionSequence

__all__ = [
    "COMPONENT_LIMIT",
    "METHODS",
    "RECHECK",
    "SPLIT_BELOW",
    "Cluster",
    "Method",
    "RateDefinition",
    "cluster_by_goal",
    "embed_goals",
    "is_tight",
    "kmeans_cells",
    "leader_clusters",
    "normalise_goal",
    "requalify",
    "split_groups",
]

Method = Literal["agglomerative", "hdbscan", "gaia-greedy", "per-session"]
RateDefinition = Literal["calls", "session"]
METHODS: tuple[Method, ...] = ("agglomerative", "hdbscan", "gaia-greedy", "per-session")



@dataclass(frozen=True)
class Cluster:
    """Sessions whose goals mean the same thing, and whether they qualify for distillation.

    Attributes:
        members: the sequences, in input order.
        method: the clustering method that produced it.
        rate_definition: ``"calls"`` (GAIA) or ``"session"``.
        success_rate: under ``rate_definition``.
        qualified: size and success rate meet the thresholds.
        reason: why it does not qualify (empty when it does).
    """

    members: tuple[SessionSequence, ...]
    method: str
    rate_definition: str
    success_rate: float
    qualified: bool
    reason: str = ""

    @property
    def size(self) -> int:
        """Distinct sessions in the cluster."""
        return len(self.members)

    @property
    def failed_share(self) -> float:
        """Share of members whose label says the task failed (unknown outcomes count as not)."""
        return sum(1 for m in self.members if m.outcome is False) / len(self.members)

    @property
    def session_ids(self) -> tuple[str, ...]:
        """Member session ids (what provenance lists)."""
        return tuple(m.session_id for m in self.members)

    @property
    def goals(self) -> tuple[str, ...]:
        """Member goals (the phrasings a distillation prompt shows)."""
        return tuple(m.goal or "" for m in self.members)

    @property
    def successful_sessions(self) -> int:
        """Members whose session succeeded."""
        return sum(1 for m in self.members if m.succeeded)

    def representative(self) -> SessionSequence:
        """The successful member with the shortest successful span (ties: earliest)."""
        ok = [m for m in self.members if m.succeeded] or list(self.members)
        return min(ok, key=lambda m: m.successful_calls)


def normalise_goal(text: str) -> str:
    """Lowercase, punctuation to spaces, whitespace collapsed (GAIA's sort key)."""
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


def embed_goals(sequences: Sequence[SessionSequence], embedder: Embeds) -> np.ndarray:
    """Unit-length goal embeddings, one row per sequence (goals must be present)."""
    goals = []
    for s in sequences:
        if s.goal is None:
            raise PipelineError(f"session {s.session_id} has no goal; cluster only "
                                  "DetectReport.qualified sequences")
        goals.append(s.goal)
    return embedder.embed(goals, kind="document", progress=len(goals) > 256)


def _check_vectors(vectors: np.ndarray, n: int) -> np.ndarray:
    v = np.ascontiguousarray(vectors, dtype=np.float32)
    if v.ndim != 2 or v.shape[0] != n:
        raise EmbedderError(f"expected {n} embeddings, got an array of shape {v.shape}")
    if n and not np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-3):
        raise EmbedderError("goal embeddings must be L2-normalised")
    return v


# -- scale: exact results without all-pairs work where the data allows ----------------
#
# Average and complete linkage cut at 1 - tau never merge two sessions not joined by a
# chain of pairs with cosine >= tau, so they can run separately on any partition whose
# parts are unions of that graph's components. split_groups finds one cheaply and
# exactly: k-means cells, and an upper bound on the cosine between members of two cells
# (triangle inequality) that proves most cell pairs share no such pair; groups of linked
# cells are split again until they no longer split. A group whose every pair provably has
# cosine >= tau is one cluster under both linkages (is_tight), with no pair computed.
# leader_clusters is GAIA's greedy loop in blocks of matrix products; cosines within
# RECHECK of tau are redone with the loop's own one-pair dot product (identical result).

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


#: A tau component larger than this that is not provably one cluster is refused: its
#: exact linkage needs a dense matrix of this size squared.
COMPONENT_LIMIT = 30_000


def _components(v: np.ndarray, tau: float) -> list[list[int]]:
    """Connected components of the graph 'cosine >= tau' (exact FAISS range search)."""
    import faiss
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    n, d = v.shape
    index = faiss.IndexFlatIP(d)
    index.add(v)
    lims, _, ids = index.range_search(v, float(tau) - 1e-6)
    graph = csr_matrix((np.ones(len(ids), dtype=np.int8), ids.astype(np.int64), lims),
                       shape=(n, n))
    _, labels = connected_components(graph, directed=True, connection="weak")
    groups: dict[int, list[int]] = {}
    for i, lab in enumerate(labels.tolist()):
        groups.setdefault(lab, []).append(i)
    return list(groups.values())


def _linkage(sub: np.ndarray, tau: float, linkage: str) -> list[list[int]]:
    """Average or complete linkage of one tau component, cut at distance 1 - tau."""
    from scipy.cluster.hierarchy import fcluster
    from scipy.cluster.hierarchy import linkage as scipy_linkage
    from scipy.spatial.distance import squareform

    sims = sub @ sub.T
    if float(sims.min()) >= tau + 1e-5:  # every merge is below the cut: one cluster
        return [list(range(len(sub)))]
    condensed = squareform(np.clip(1.0 - sims, 0.0, 2.0), checks=False)
    del sims
    labels = fcluster(scipy_linkage(condensed, method=linkage), t=1.0 - tau + 1e-9,
                      criterion="distance")
    groups: dict[int, list[int]] = {}
    for i, lab in enumerate(labels.tolist()):
        groups.setdefault(lab, []).append(i)
    return list(groups.values())


def _agglomerative(v: np.ndarray, tau: float, linkage: str) -> list[list[int]]:
    """Exact linkage per tau component, components found group by group (split_groups).

    Clusters come ordered by their component's first session, then their own first
    session, as from one exact search over all sessions.
    """
    keyed: list[tuple[int, int, list[int]]] = []
    for idx, tight in split_groups(v, tau):
        first = int(idx[0])
        if tight:
            keyed.append((first, first, idx.tolist()))
            continue
        sub = v[idx]
        for comp in _components(sub, tau):
            members = idx[comp]
            if len(comp) > 1 and not is_tight(sub[comp], tau):
                if len(comp) > COMPONENT_LIMIT:
                    raise PipelineError(
                        f"{len(comp)} sessions form one chain of cosine >= {tau} that is "
                        f"not one cluster; exact {linkage} linkage of more than "
                        f"{COMPONENT_LIMIT} needs a dense matrix of that size squared: "
                        "raise similarity_tau or use method 'gaia-greedy'")
                for part in _linkage(sub[comp], tau, linkage):
                    keyed.append((int(members[0]), int(members[part[0]]),
                                  members[part].tolist()))
            else:
                keyed.append((int(members[0]), int(members[0]), members.tolist()))
    keyed.sort(key=lambda t: (t[0], t[1]))
    return [g for _, _, g in keyed]


def _hdbscan(v: np.ndarray, min_size: int) -> list[list[int]]:
    import hdbscan

    if v.shape[0] < 2:
        return [[i] for i in range(v.shape[0])]
    # min_samples=1: clusters of min_occurrences (3) sessions are the normal case here, and
    # the default min_samples (= min_cluster_size) turns such small groups into noise.
    # Euclidean distance on unit vectors is monotone in cosine.
    labels = hdbscan.HDBSCAN(min_cluster_size=max(2, min_size), min_samples=1,
                             metric="euclidean", allow_single_cluster=True
                             ).fit_predict(v.astype(np.float64))
    groups: dict[int, list[int]] = {}
    out: list[list[int]] = []
    for i, lab in enumerate(labels):
        if lab < 0:
            out.append([i])
        else:
            groups.setdefault(int(lab), []).append(i)
    return list(groups.values()) + out


def _gaia_greedy(v: np.ndarray, goals: Sequence[str], tau: float) -> list[list[int]]:
    order = sorted(range(len(goals)), key=lambda i: (normalise_goal(goals[i]), i))
    return leader_clusters(v, np.asarray(order, dtype=np.int64), tau)


def _rate(members: Sequence[SessionSequence], definition: RateDefinition) -> float:
    if definition == "calls":
        attempted = sum(m.attempted_calls for m in members)
        return sum(m.successful_calls for m in members) / attempted if attempted else 0.0
    return sum(1 for m in members if m.succeeded) / len(members)


def cluster_by_goal(
    sequences: Sequence[SessionSequence],
    embedder: Embeds | None,
    config: Thresholds,
    method: Method = "agglomerative",
    *,
    embeddings: np.ndarray | None = None,
    linkage: Literal["average", "complete"] = "average",
    rate: RateDefinition = "calls",
) -> list[Cluster]:
    """Cluster sequences by goal and qualify each cluster.

    Args:
        sequences: detected sequences with goals (``DetectReport.qualified``).
        embedder: embeds the goals; may be None when ``embeddings`` are given.
        config: ``similarity_tau``, ``min_occurrences``, ``min_success_rate``.
        method: ``agglomerative``, ``hdbscan``, ``gaia-greedy`` or ``per-session``.
        embeddings: precomputed unit-length goal vectors, one row per sequence.
        linkage: for ``agglomerative``.
        rate: ``"calls"`` (GAIA's per-call rate, the default) or ``"session"``.

    Returns:
        Clusters, qualified ones first, each sorted by size (largest first).
    """
    if method not in METHODS:
        raise ConfigError(f"unknown cluster method {method!r}; choose one of "
                              f"{', '.join(METHODS)}")
    if linkage not in ("average", "complete"):
        raise ConfigError(f"linkage must be 'average' or 'complete', got {linkage!r}",
                          key="linkage")
    if rate not in ("calls", "session"):
        raise ConfigError(f"rate must be 'calls' or 'session', got {rate!r}", key="rate")
    seqs = list(sequences)
    if not seqs:
        return []
    if method == "per-session":
        return _qualify([[i] for i in range(len(seqs))], seqs, config, method, rate)
    if embeddings is None:
        if embedder is None:
            raise PipelineError("cluster_by_goal needs an embedder or embeddings=")
        embeddings = embed_goals(seqs, embedder)
    v = _check_vectors(embeddings, len(seqs))
    tau = config.similarity_tau
    if method == "agglomerative":
        groups = _agglomerative(v, tau, linkage)
    elif method == "hdbscan":
        groups = _hdbscan(v, config.min_occurrences)
    else:
        groups = _gaia_greedy(v, [s.goal or "" for s in seqs], tau)
    return _qualify(groups, seqs, config, method, rate)


def _judge(members: tuple[SessionSequence, ...], config: Thresholds, method: str,
           rate: RateDefinition) -> Cluster:
    r = _rate(members, rate)
    reasons = []
    if len(members) < config.min_occurrences:
        reasons.append(f"{len(members)} session(s) < min_occurrences {config.min_occurrences}")
    if r < config.min_success_rate:
        reasons.append(f"success rate {r:.2f} ({rate}) < min_success_rate "
                       f"{config.min_success_rate}")
    return Cluster(members, method, rate, r, not reasons, "; ".join(reasons))


def _sorted(clusters: list[Cluster]) -> list[Cluster]:
    clusters.sort(key=lambda c: (not c.qualified, -c.size))
    return clusters


def _qualify(groups: list[list[int]], seqs: Sequence[SessionSequence], config: Thresholds,
             method: str, rate: RateDefinition) -> list[Cluster]:
    return _sorted([_judge(tuple(seqs[i] for i in sorted(g)), config, method, rate)
                    for g in groups])


def requalify(clusters: Sequence[Cluster], config: Thresholds) -> list[Cluster]:
    """The same groups judged again under ``config`` (min_occurrences, min_success_rate).

    Grouping depends only on the method and tau; a view that moves the other sliders
    re-judges groups it already has instead of clustering again.
    """
    rates: dict[str, RateDefinition] = {"calls": "calls", "session": "session"}
    return _sorted([_judge(c.members, config, c.method, rates[c.rate_definition])
                    for c in clusters])
