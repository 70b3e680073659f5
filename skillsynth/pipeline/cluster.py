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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ..config import Thresholds
from ..errors import ConfigError, EmbedderError, PipelineError
from ..models.embed import Embeds
from .detect import SessionSequence
from .partition import RECHECK, SPLIT_BELOW, is_tight, kmeans_cells, leader_clusters, split_groups

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
    "representative",
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
        return representative(self.members)


def representative(members: Sequence[SessionSequence]) -> SessionSequence:
    """The run that stands for ``members``: the successful one with the shortest successful
    span (ties: earliest; with no successful member, among all)."""
    ok = [m for m in members if m.succeeded] or list(members)
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
    return Cluster(members=members, method=method, rate_definition=rate, success_rate=r,
                   qualified=not reasons, reason="; ".join(reasons))


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
