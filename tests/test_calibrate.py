"""Calibration of similarity_tau and recall_tau on labelled corpora (real SQLite stores).

The embedder and the distiller are FAKES (named so): the family embedder puts each
synthetic family on its own axis, so the right answers are known. The real embedder's
calibration is the shipped data file, checked in test_config.py and test_models_local.py.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from fakes import FakeBlurEmbedder, FakeDistiller, FakeFamilyEmbedder

from skillsynth.config import Thresholds
from skillsynth.corpora.synthetic import generate_corpus
from skillsynth.errors import ConfigError
from skillsynth.evaluation.tuning.calibrate import (
    Calibration,
    CalibrationCorpus,
    calibrate,
    cluster_purity,
    history_partitions,
    tau_table,
)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    db = tmp_path_factory.mktemp("cal") / "synth.db"
    generate_corpus(db, families=6, seed=0, attempts=5)
    return db


def test_tau_table_by_hand():
    # scores 0.9 (pos), 0.7 (neg), 0.6 (pos), 0.2 (neg)
    rows = {r.tau: r for r in tau_table(np.array([0.9, 0.7, 0.6, 0.2]),
                                        np.array([True, False, True, False]),
                                        grid=(0.5, 0.65, 0.8, 0.95))}
    assert (rows[0.5].precision, rows[0.5].recall) == (2 / 3, 1.0)
    assert rows[0.5].f1 == pytest.approx(0.8)
    assert (rows[0.65].precision, rows[0.65].recall) == (0.5, 0.5)
    assert (rows[0.8].precision, rows[0.8].recall) == (1.0, 0.5)
    assert (rows[0.95].precision, rows[0.95].recall, rows[0.95].f1) == (None, 0.0, None)


def test_clustering_calibration_separates_the_fake_families(corpus):
    cal = calibrate([CalibrationCorpus(str(corpus))], FakeFamilyEmbedder())
    (c,) = cal.corpora
    assert c["families"] == 6 and c["same_family_pairs"] > 0 and len(c["sha256"]) == 64
    # same family ~0.99, others ~0.0: every tau in between is perfect; ties go to the higher
    assert cal.at("clustering", 0.5).f1 == 1.0
    assert cal.similarity_tau == max(r.tau for r in cal.clustering if r.f1 == 1.0)
    assert cal.recall_tau is None and cal.chat_model is None and cal.recall == ()
    again = Calibration.from_dict(json.loads(cal.to_json()))
    assert again == cal


def test_recall_calibration_runs_a_pass_on_the_history_only(corpus):
    llm = FakeDistiller()
    cal = calibrate([CalibrationCorpus(str(corpus))], FakeFamilyEmbedder(), llm=llm,
                    chat_model="fake-distiller")
    (c,) = cal.corpora
    rec = c["recall"]
    # 6 families x 5 attempts: 3 each in the history, attempts 4 and 5 are the queries
    assert (rec["history_sessions"], rec["queries"]) == (18, 12)
    assert rec["procedures"] >= 1 and rec["pass"]["llm_calls"] == llm.calls
    assert cal.recall_tau is not None and cal.chat_model == "fake-distiller"
    assert cal.settings_block() == {"similarity_tau": cal.similarity_tau,
                                    "recall_tau": cal.recall_tau,
                                    "reconcile_tau": cal.reconcile_tau}
    assert cal.at("recall", cal.recall_tau).precision == 1.0
    # recall_tau maximises F0.5: precision weighs twice recall (a wrong recall hurts a probe)
    for r in cal.recall:
        if r.precision is not None and r.recall:
            p, q = r.precision, r.recall
            assert r.score == pytest.approx(1.25 * p * q / (0.25 * p + q), abs=1e-3)
    best = max(r.score or 0.0 for r in cal.recall)
    assert cal.recall_tau == max(r.tau for r in cal.recall if (r.score or 0.0) == best)
    # the fake's triggers of different families are orthogonal (cosine ~0): no merge above
    assert rec["procedure_pairs"] > 0 and 0 < cal.reconcile_tau <= 0.1


def test_a_corpus_family_rule_is_parsed_and_checked():
    assert CalibrationCorpus.parse("a.db::tools") == CalibrationCorpus("a.db", "tools")
    assert CalibrationCorpus.parse("a.db") == CalibrationCorpus("a.db", "task")
    with pytest.raises(ConfigError, match="family must be one of"):
        CalibrationCorpus.parse("a.db::topic")


def test_a_corpus_without_labels_or_with_one_family_is_refused(tmp_path, corpus):
    from skillsynth.store import MemoryStore

    bare = tmp_path / "bare.db"
    MemoryStore.init(bare).close()
    with pytest.raises(ConfigError, match="calibration needs labels: no labels file"):
        calibrate([CalibrationCorpus(str(bare))], FakeFamilyEmbedder())
    one = tmp_path / "one.db"
    generate_corpus(one, families=1, seed=0, attempts=4)
    with pytest.raises(ConfigError, match="at least two labelled families; found 1"):
        calibrate([CalibrationCorpus(str(one))], FakeFamilyEmbedder())
    with pytest.raises(ConfigError, match="at least one labelled corpus"):
        calibrate([], FakeFamilyEmbedder())
    with pytest.raises(ConfigError, match="not found"):
        calibrate([CalibrationCorpus(str(tmp_path / "nope.db"))], FakeFamilyEmbedder())


# ------------------------------------------------------------------ the objective
def test_cluster_purity_by_hand():
    # clusters of 2+ members: (a, a, b) -> 2 of 3 in the majority; (b, b) -> 2 of 2
    assert cluster_purity([["a", "a", "b"], ["c"], ["b", "b"]], 2) == pytest.approx(4 / 5)
    assert cluster_purity([["a"], ["b"]], 2) is None          # nothing would be synthesized
    assert cluster_purity([["a", None, "a"]], 2) == 1.0       # unlabelled members not counted
    assert cluster_purity([["a", "b", "c", "d"]], 3) == 0.25  # one procedure for everything


def test_the_purity_partitions_are_the_synthesis_pass_clustering():
    import numpy as np

    from skillsynth.pipeline.cluster import cluster_by_goal
    from skillsynth.pipeline.detect import SessionSequence

    rng = np.random.default_rng(0)
    centres = rng.normal(size=(5, 8))
    v = np.vstack([c + rng.normal(scale=s, size=(6, 8)) for c in centres
                   for s in (0.3, 0.9)]).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    seqs = [SessionSequence(f"s{i}", f"goal {i}", (), ()) for i in range(len(v))]
    grid = (0.1, 0.3, 0.5, 0.6, 0.7, 0.8, 0.9)
    for tau, labels in zip(grid, history_partitions(v, grid), strict=True):
        ours = {frozenset(np.flatnonzero(labels == lab).tolist()) for lab in set(labels)}
        theirs = cluster_by_goal(seqs, None, Thresholds(similarity_tau=tau), embeddings=v)
        assert ours == {frozenset(int(s[1:]) for s in c.session_ids)
                        for c in theirs}, tau


def test_similarity_tau_is_chosen_by_pairs_and_cluster_purity(corpus):
    # every family shares one direction: cross-family goals sit at cosine ~0.5, so below it
    # the history clusters into one procedure for everything
    cal = calibrate([CalibrationCorpus(str(corpus))], FakeBlurEmbedder())
    rows = {r.tau: r for r in cal.clustering}
    # one cluster of every family: its largest family's share (three families or more here)
    assert rows[0.3].purity <= 1 / 3 and rows[0.3].score < rows[0.3].f1 + 0.1
    assert rows[0.9].purity == 1.0
    for r in cal.clustering:
        f1, pur = r.f1 or 0.0, r.purity
        want = 0.0 if not pur or not f1 else 2 * f1 * pur / (f1 + pur)
        assert r.score == pytest.approx(want, abs=1e-3)
    best = max(r.score for r in cal.clustering)
    assert cal.similarity_tau == max(r.tau for r in cal.clustering if r.score == best)
    assert rows[cal.similarity_tau].purity == 1.0 and cal.method.startswith("purity-f05")
