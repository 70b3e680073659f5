"""Detect and cluster on real SQLite stores, with controlled embeddings."""

from __future__ import annotations

import numpy as np
import pytest

from skillsynth.config import Thresholds
from skillsynth.errors import EmbedderError, SkillsynthError
from skillsynth.pipeline.cluster import cluster_by_goal, normalise_goal
from skillsynth.pipeline.detect import Watermark, extract_sequences

CFG = Thresholds()


def _session(store, sid, goal, tools, *, fail=()):
    with store.transaction():
        for i, t in enumerate(tools):
            store.log_tool_call(sid, t, {"i": i}, "ok" if i not in fail else None,
                                i not in fail, error="boom" if i in fail else None)
        if goal is not None:
            store.add_turn(sid, "user", goal)
            store.add_turn(sid, "user", "a later question is not the goal")


def _vec(*xs):
    v = np.array(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


def test_detect_goal_span_and_counts(store):
    _session(store, "a", "find the invoice", ["search_file", "read_file", "read_file", "x"],
             fail=(1,))
    _session(store, "b", None, ["search_file", "read_file", "write_file"])
    _session(store, "c", "too short", ["search_file", "read_file"])
    rep = extract_sequences(store, CFG)
    by = {s.session_id: s for s in rep.sequences}
    a = by["a"]
    assert a.goal == "find the invoice"
    assert (a.successful_calls, a.attempted_calls) == (3, 4)
    assert a.tool_names == ("search_file", "read_file", "x")
    assert rep.without_goal == ("b",) and rep.too_short == 1
    assert [s.session_id for s in rep.qualified] == ["a"]


def test_watermark_reads_only_new_sessions(store, tmp_path):
    wm = Watermark(tmp_path / "state" / "watermark.json")
    _session(store, "a", "g1", ["t1", "t2", "t3"])
    first = extract_sequences(store, CFG, watermark=wm)
    assert [s.session_id for s in first.sequences] == ["a"]
    assert extract_sequences(store, CFG, watermark=wm).sequences == ()
    _session(store, "b", "g2", ["t1", "t2", "t3"])
    store.log_tool_call("a", "t4", None, "ok", True)
    third = extract_sequences(store, CFG, watermark=wm)
    by = {s.session_id: s for s in third.sequences}
    assert set(by) == {"a", "b"} and by["a"].attempted_calls == 4  # whole session re-read
    again = extract_sequences(store, CFG, watermark=wm, reread=True)
    assert {s.session_id for s in again.sequences} == {"a", "b"}


def _three_plus_two(store):
    for i in range(3):
        _session(store, f"inv{i}", f"find invoice {i}", ["search_file", "read_file", "reply"])
    for i in range(2):
        _session(store, f"mail{i}", f"draft mail {i}", ["list_inbox", "draft_reply", "send"])
    seqs = extract_sequences(store, CFG).qualified
    vecs = np.vstack([_vec(1, 0.05 * i, 0) for i in range(3)] +
                     [_vec(0, 0.05 * i, 1) for i in range(2)])
    return seqs, vecs


@pytest.mark.parametrize("method", ["agglomerative", "gaia-greedy", "hdbscan"])
def test_three_similar_qualify_two_do_not(store, method):
    seqs, vecs = _three_plus_two(store)
    clusters = cluster_by_goal(seqs, None, CFG, method, embeddings=vecs)
    qualified = [c for c in clusters if c.qualified]
    if method == "hdbscan":  # density: the two mail sessions are noise or a small cluster
        assert [c.session_ids for c in qualified] == [("inv0", "inv1", "inv2")]
        return
    assert [c.session_ids for c in qualified] == [("inv0", "inv1", "inv2")]
    mail = next(c for c in clusters if "mail0" in c.session_ids)
    assert not mail.qualified and "min_occurrences" in mail.reason
    assert qualified[0].method == method and qualified[0].rate_definition == "calls"


def test_low_success_rate_does_not_qualify_under_either_definition(store):
    for i in range(3):
        _session(store, f"s{i}", f"goal {i}", ["a", "b", "c", "d", "e", "f"],
                 fail=(0, 1, 5) if i < 2 else ())
    seqs = extract_sequences(store, CFG).qualified
    vecs = np.vstack([_vec(1, 0.01 * i) for i in range(3)])
    (calls,) = cluster_by_goal(seqs, None, CFG, embeddings=vecs, rate="calls")
    assert calls.success_rate == pytest.approx(12 / 18) and not calls.qualified
    assert "success rate" in calls.reason
    (sess,) = cluster_by_goal(seqs, None, CFG, embeddings=vecs, rate="session")
    assert sess.success_rate == pytest.approx(1 / 3) and not sess.qualified


def test_agglomerative_respects_tau_and_linkage():
    # A chain in one plane: cos(a,b) = cos(b,c) = 0.9 but cos(a,c) = 0.62. All three are one
    # connected component at tau 0.85, so single linkage would merge them; average and
    # complete linkage must not.
    ang_b, ang_c = np.arccos(0.9), np.arccos(0.62)
    a, b, c = _vec(1, 0, 0), _vec(np.cos(ang_b), np.sin(ang_b), 0), \
        _vec(np.cos(ang_c), np.sin(ang_c), 0)
    assert float(b @ c) == pytest.approx(0.9, abs=1e-3)
    from skillsynth.pipeline.detect import SessionSequence

    seqs = [SessionSequence(s, f"goal {s}", (), ()) for s in "abc"]
    vecs = np.vstack([a, b, c])
    cfg = Thresholds(similarity_tau=0.85, min_occurrences=1, min_success_rate=0.0)
    for linkage in ("average", "complete"):
        got = sorted(cl.session_ids for cl in cluster_by_goal(seqs, None, cfg, embeddings=vecs,
                                                               linkage=linkage))
        assert got in ([("a",), ("b", "c")], [("a", "b"), ("c",)]), linkage
    loose = cluster_by_goal(seqs, None, cfg.merge(similarity_tau=0.5), embeddings=vecs)
    assert [cl.session_ids for cl in loose] == [("a", "b", "c")]


def test_gaia_greedy_uses_sorted_goal_text_seeds():
    from skillsynth.pipeline.detect import SessionSequence

    seqs = [SessionSequence("z", "Zebra task", (), ()), SessionSequence("a", "alpha task", (), ())]
    vecs = np.vstack([_vec(1, 0.3), _vec(1, 0)])
    cfg = Thresholds(similarity_tau=0.9, min_occurrences=1, min_success_rate=0.0)
    (cl,) = cluster_by_goal(seqs, None, cfg, "gaia-greedy", embeddings=vecs)
    assert cl.session_ids == ("z", "a")
    assert normalise_goal("  Find   the INVOICE! ") == "find the invoice"


def test_bad_inputs_are_loud(store):
    from skillsynth.pipeline.detect import SessionSequence

    seqs = [SessionSequence("a", "g", (), ())]
    with pytest.raises(EmbedderError, match="normalised"):
        cluster_by_goal(seqs, None, CFG, embeddings=np.array([[2.0, 0.0]]))
    with pytest.raises(EmbedderError, match="expected 1"):
        cluster_by_goal(seqs, None, CFG, embeddings=np.zeros((2, 2)))
    with pytest.raises(SkillsynthError, match="method"):
        cluster_by_goal(seqs, None, CFG, "kmeans", embeddings=np.array([[1.0, 0.0]]))
    with pytest.raises(SkillsynthError, match="embedder"):
        cluster_by_goal(seqs, None, CFG)
