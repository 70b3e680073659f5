"""The synthetic corpus generator: seeded, GAIA-schema store, labels kept apart."""

from __future__ import annotations

import sqlite3

import pytest
from test_store_schema import EXPECTED_COLUMNS

from skillsynth.config import Thresholds
from skillsynth.corpora import FAMILIES, LabelStore, NoiseConfig, generate_corpus
from skillsynth.errors import SkillsynthError
from skillsynth.pipeline.detect import extract_sequences
from skillsynth.store import MemoryStore


def _rows(path):
    conn = sqlite3.connect(path)
    rows = conn.execute("SELECT session_id, tool_name, args, success, timestamp "
                        "FROM tool_history ORDER BY id").fetchall()
    conn.close()
    return rows


def test_same_seed_same_corpus_other_seed_differs(tmp_path):
    a = generate_corpus(tmp_path / "a.db", seed=7)
    b = generate_corpus(tmp_path / "b.db", seed=7)
    c = generate_corpus(tmp_path / "c.db", seed=8)
    assert _rows(a.db_path) == _rows(b.db_path)
    assert [r[1:4] for r in _rows(a.db_path)] != [r[1:4] for r in _rows(c.db_path)]
    assert a.sessions == len(FAMILIES) * 5


def test_labels_live_outside_the_memory_db(tmp_path):
    rep = generate_corpus(tmp_path / "m.db", families=3, attempts=4, seed=1)
    conn = sqlite3.connect(rep.db_path)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table' "
                                         "AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '%fts%'")}
    conn.close()
    assert tables == set(EXPECTED_COLUMNS)
    with LabelStore(rep.labels_path) as ls:
        labels = ls.all()
    assert len(labels) == 12
    assert {x.task_id for x in labels} == {f.id for f in FAMILIES[:3]}
    assert sorted(x.attempt for x in labels if x.task_id == FAMILIES[0].id) == [1, 2, 3, 4]
    # no label value leaks into what the pipeline reads
    conn = sqlite3.connect(rep.db_path)
    text = " ".join(str(v) for t in ("tool_history", "conversations")
                    for row in conn.execute(f"SELECT * FROM {t}") for v in row)
    conn.close()
    assert not [f.id for f in FAMILIES if f.id in text]
    assert "generator" not in text and "seed=" not in text


def test_without_noise_every_span_is_the_true_procedure(tmp_path):
    rep = generate_corpus(tmp_path / "m.db", seed=2, noise=NoiseConfig(0, 0, 0))
    with LabelStore(rep.labels_path) as ls:
        truth = {x.session_id: x.essential_steps for x in ls.all()}
    with MemoryStore.open(rep.db_path, read_only=True) as s:
        seqs = extract_sequences(s, Thresholds(min_steps=1)).sequences
    assert seqs and all(seq.tool_names == truth[seq.session_id] for seq in seqs)
    assert all(seq.goal for seq in seqs)


def test_noise_adds_failures_and_abandons(tmp_path):
    rep = generate_corpus(tmp_path / "m.db", seed=3, attempts=20,
                          noise=NoiseConfig(fail_rate=0.5, explore_rate=0.5, abandon_rate=0.5))
    with LabelStore(rep.labels_path) as ls:
        labels = ls.all()
    assert 0 < sum(1 for x in labels if not x.success) < len(labels)
    assert any(not r[3] for r in _rows(rep.db_path))


def test_bad_arguments_are_loud(tmp_path):
    with pytest.raises(SkillsynthError, match="families"):
        generate_corpus(tmp_path / "m.db", families=len(FAMILIES) + 1)
    with pytest.raises(SkillsynthError, match="abandon_rate"):
        NoiseConfig(abandon_rate=1.5)
