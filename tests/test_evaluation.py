"""The 4th-attempt protocol: probes never leak into the history."""

from __future__ import annotations

import sqlite3

import pytest

from skillsynth.corpora import LabelStore, SessionLabel, generate_corpus
from skillsynth.errors import SkillsynthError
from skillsynth.evaluation import build_history, load_split, split_attempts


def _lab(sid, task, attempt):
    return SessionLabel(sid, "test", task, attempt, started_at=f"2026-01-0{attempt}T00:00:00")


def test_split_puts_k_attempts_in_history_and_the_next_one_out():
    labels = [_lab(f"{t}{a}", t, a) for t in "ab" for a in (1, 2, 3, 4, 5)]
    labels += [_lab("c1", "c", 1), SessionLabel("u", "gaia-db", None, None)]
    s = split_attempts(labels, k=3)
    assert [p.session_id for p in s.probes] == ["a4", "b4"]
    assert s.history == {"a1", "a2", "a3", "b1", "b2", "b3", "c1", "u"}
    assert s.left_out == {"a5", "b5"}  # after the probe: never history
    assert not s.history & {p.session_id for p in s.probes}
    with pytest.raises(SkillsynthError, match="k must be"):
        split_attempts(labels, k=0)


def test_history_store_holds_no_probe_row(tmp_path):
    gen = generate_corpus(tmp_path / "c.db", families=3, attempts=5, seed=2)
    split = load_split(gen.db_path, k=3)
    assert len(split.probes) == 3
    n = build_history(gen.db_path, split, tmp_path / "h.db")
    conn = sqlite3.connect(tmp_path / "h.db")
    seen = {r[0] for r in conn.execute("SELECT session_id FROM tool_history UNION "
                                       "SELECT session_id FROM conversations")}
    conn.close()
    assert len(seen) == n == 9 and seen <= split.history
    assert not seen & ({p.session_id for p in split.probes} | split.left_out)
    with LabelStore(gen.labels_path) as ls:  # the probes are the 4th attempts
        assert {ls.get(p.session_id).attempt for p in split.probes} == {4}
    with pytest.raises(SkillsynthError, match="exists"):
        build_history(gen.db_path, split, tmp_path / "h.db")
