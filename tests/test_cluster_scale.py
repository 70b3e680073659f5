"""The cluster stage at scale gives exactly the straightforward methods' clusters."""

from __future__ import annotations

import numpy as np
import pytest

from skillsynth.config import Thresholds
from skillsynth.errors import PipelineError
from skillsynth.pipeline import cluster
from skillsynth.pipeline.cluster import cluster_by_goal
from skillsynth.pipeline.detect import SessionSequence


def _reference_agglomerative(v, tau, linkage):
    """The straightforward method: exact tau components, then linkage over each one."""
    from scipy.cluster.hierarchy import fcluster
    from scipy.cluster.hierarchy import linkage as scipy_linkage

    out = []
    for comp in cluster._components(v, tau):
        if len(comp) == 1:
            out.append(comp)
            continue
        sub = v[comp]
        dist = np.clip(1.0 - sub @ sub.T, 0.0, 2.0)
        z = scipy_linkage(dist[np.triu_indices(len(comp), k=1)], method=linkage)
        groups: dict[int, list[int]] = {}
        for idx, lab in zip(comp, fcluster(z, t=1.0 - tau + 1e-9, criterion="distance"),
                            strict=True):
            groups.setdefault(int(lab), []).append(idx)
        out.extend(groups.values())
    return out


def _reference_greedy(v, order, tau):
    """GAIA's loop, one pair at a time."""
    seeds: list[int] = []
    groups: list[list[int]] = []
    for i in order:
        for g, seed in enumerate(seeds):
            if float(v[i] @ v[seed]) >= tau:
                groups[g].append(int(i))
                break
        else:
            seeds.append(int(i))
            groups.append([int(i)])
    return groups


def _families(rng, n, families, dim, noise):
    centers = rng.standard_normal((families, dim)).astype(np.float32)
    v = centers[rng.integers(0, families, size=n)] + \
        noise * rng.standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


CASES = [  # (families, dim, noise): separated, loose, overlapping, no structure at all
    (40, 32, 0.05), (25, 48, 0.6), (30, 48, 0.9), (1, 16, 5.0)]


@pytest.mark.parametrize("families,dim,noise", CASES)
@pytest.mark.parametrize("tau", [0.5, 0.8, 0.9])
@pytest.mark.parametrize("linkage", ["average", "complete"])
def test_agglomerative_equals_the_straightforward_method(monkeypatch, families, dim, noise,
                                                         tau, linkage):
    monkeypatch.setattr(cluster, "SPLIT_BELOW", 40)  # split and recurse at test size
    v = _families(np.random.default_rng(families + dim), 1_200, families, dim, noise)
    assert cluster._agglomerative(v, tau, linkage) == _reference_agglomerative(v, tau, linkage)


def test_split_groups_are_unions_of_components_and_tight_groups_are_cliques(monkeypatch):
    rng = np.random.default_rng(7)
    v = _families(rng, 3_000, 60, 32, 0.1)
    groups = list(cluster.split_groups(v, 0.8, split_below=40))
    assert len(groups) > 1  # the bound proves families apart
    assert sorted(np.concatenate([g for g, _ in groups]).tolist()) == list(range(3_000))
    of = np.empty(3_000, dtype=np.int64)
    for k, (g, tight) in enumerate(groups):
        of[g] = k
        assert np.all(np.diff(g) > 0)
        if tight:
            assert float((v[g] @ v[g].T).min()) >= 0.8
    for comp in cluster._components(v, 0.8):
        assert len(set(of[comp].tolist())) == 1


def test_one_giant_loose_component_is_refused_with_advice(monkeypatch):
    monkeypatch.setattr(cluster, "COMPONENT_LIMIT", 50)
    t = np.linspace(0, 1.2, 200)  # an arc: each neighbour close, the ends far apart
    v = np.stack([np.cos(t), np.sin(t)], axis=1).astype(np.float32)
    with pytest.raises(PipelineError, match="gaia-greedy"):
        cluster._agglomerative(v, 0.99, "average")


@pytest.mark.parametrize("families,dim,noise", CASES)
@pytest.mark.parametrize("tau", [0.5, 0.8, 0.95])
def test_gaia_greedy_equals_gaia_loop(families, dim, noise, tau):
    rng = np.random.default_rng(dim)
    v = _families(rng, 700, families, dim, noise)
    order = rng.permutation(len(v))
    got = cluster.leader_clusters(v, order, tau, block=97)
    assert got == _reference_greedy(v, order, tau)


def test_gaia_greedy_near_tau_is_decided_like_the_loop():
    # cosines that sit on tau: the batched product may round either way, the loop decides
    a = np.array([1.0, 0.0], dtype=np.float32)
    ang = np.arccos(np.float32(0.8))
    b = np.array([np.cos(ang), np.sin(ang)], dtype=np.float32)
    v = np.vstack([a, b, b, a, -a])
    tau = float(v[1] @ v[0])
    order = np.arange(len(v))
    assert cluster.leader_clusters(v, order, tau, block=2) == \
        _reference_greedy(v, order, tau)


def test_cluster_by_goal_order_and_members_unchanged_for_gaia_greedy():
    rng = np.random.default_rng(5)
    v = _families(rng, 300, 12, 16, 0.3)
    goals = [f"goal {int(i)}" for i in rng.integers(0, 50, size=300)]
    seqs = [SessionSequence(f"s{i}", g, (), ()) for i, g in enumerate(goals)]
    cfg = Thresholds(similarity_tau=0.8, min_occurrences=1, min_success_rate=0.0)
    got = [c.session_ids for c in cluster_by_goal(seqs, None, cfg, "gaia-greedy",
                                                  embeddings=v)]
    order = sorted(range(300), key=lambda i: (cluster.normalise_goal(goals[i]), i))
    ref = _reference_greedy(v, order, 0.8)
    ref.sort(key=len, reverse=True)  # cluster_by_goal: largest first, stable
    assert got == [tuple(f"s{i}" for i in sorted(g)) for g in ref]
