"""A fresh memory.db has exactly GAIA's v7 schema (facts read off amd-gaia 0.25.1's
``memory_store.py``; ``test_gaia_oracle.py`` also checks it against GAIA itself)."""

from __future__ import annotations

import sqlite3

from skillsynth.store import MemoryStore

# (column, declared type, default) per table, in order: the facts of GAIA's schema.
EXPECTED_COLUMNS: dict[str, list[tuple[str, str, str | None]]] = {
    "schema_version": [("version", "INTEGER", None), ("migrated_at", "TEXT", None)],
    "conversations": [
        ("id", "INTEGER", None), ("session_id", "TEXT", None), ("role", "TEXT", None),
        ("content", "TEXT", None), ("context", "TEXT", "'global'"), ("timestamp", "TEXT", None),
        ("consolidated_at", "TEXT", None)],
    "knowledge": [
        ("id", "TEXT", None), ("category", "TEXT", None), ("content", "TEXT", None),
        ("domain", "TEXT", None), ("source", "TEXT", "'tool'"), ("confidence", "REAL", "0.5"),
        ("metadata", "TEXT", None), ("use_count", "INTEGER", "0"),
        ("context", "TEXT", "'global'"), ("sensitive", "INTEGER", "0"), ("entity", "TEXT", None),
        ("created_at", "TEXT", None), ("updated_at", "TEXT", None), ("last_used", "TEXT", None),
        ("due_at", "TEXT", None), ("reminded_at", "TEXT", None), ("embedding", "BLOB", None),
        ("superseded_by", "TEXT", None), ("decayed_at", "TEXT", None)],
    "tool_history": [
        ("id", "INTEGER", None), ("session_id", "TEXT", None), ("tool_name", "TEXT", None),
        ("args", "TEXT", None), ("result_summary", "TEXT", None), ("success", "INTEGER", None),
        ("error", "TEXT", None), ("duration_ms", "INTEGER", None), ("timestamp", "TEXT", None)],
    "meta": [("key", "TEXT", None), ("value", "TEXT", None)],
    "procedures": [
        ("id", "TEXT", None), ("name", "TEXT", None), ("when_to_use", "TEXT", None),
        ("markdown_body", "TEXT", None), ("tools_required", "TEXT", None),
        ("tool_sequence", "TEXT", None), ("success_count", "INTEGER", "0"),
        ("attempt_count", "INTEGER", "0"), ("provenance", "TEXT", None),
        ("version", "TEXT", "'1.0.0'"), ("enabled", "INTEGER", "1"), ("embedding", "BLOB", None),
        ("superseded_by", "TEXT", None), ("created_at", "TEXT", None),
        ("last_used_at", "TEXT", None)],
    "skill_deltas": [
        ("id", "TEXT", None), ("base_name", "TEXT", None), ("base_root", "TEXT", None),
        ("base_version", "TEXT", None), ("scope", "TEXT", None), ("kind", "TEXT", None),
        ("learn_tier", "INTEGER", "3"), ("anchor_section", "TEXT", None),
        ("anchor_digest", "TEXT", None), ("payload", "TEXT", None),
        ("provenance", "TEXT", None), ("status", "TEXT", "'staged'"),
        ("success_count", "INTEGER", "0"), ("attempt_count", "INTEGER", "0"),
        ("embedding", "BLOB", None), ("superseded_by", "TEXT", None),
        ("created_at", "TEXT", None), ("approved_at", "TEXT", None),
        ("last_used_at", "TEXT", None)],
    "synthesis_marks": [
        ("session_id", "TEXT", None), ("outcome", "TEXT", None), ("goal", "TEXT", None),
        ("detail", "TEXT", None), ("marked_at", "TEXT", None)],
    "forgotten": [
        ("id", "INTEGER", None), ("content", "TEXT", None), ("category", "TEXT", None),
        ("sensitive", "INTEGER", "0"), ("forgotten_at", "TEXT", None)],
}
PRIMARY_KEYS = {"conversations": "id", "knowledge": "id", "tool_history": "id", "meta": "key",
                "procedures": "id", "skill_deltas": "id", "synthesis_marks": "session_id",
                "forgotten": "id"}
EXPECTED_INDEXES = {
    "idx_conv_session", "idx_conv_ts", "idx_conv_context", "idx_conv_not_consolidated",
    "idx_knowledge_due", "idx_knowledge_context", "idx_knowledge_entity",
    "idx_knowledge_sensitive", "idx_knowledge_no_embedding", "idx_knowledge_superseded",
    "idx_tool_name", "idx_tool_session", "idx_tool_success", "idx_tool_ts",
    "idx_proc_name", "idx_proc_enabled", "idx_proc_superseded",
    "idx_delta_base", "idx_delta_active", "idx_delta_superseded", "idx_synthesis_marks_outcome",
}
PARTIAL_INDEXES = {"idx_proc_enabled", "idx_proc_superseded", "idx_knowledge_due",
                   "idx_knowledge_entity", "idx_knowledge_sensitive",
                   "idx_knowledge_no_embedding", "idx_knowledge_superseded",
                   "idx_conv_not_consolidated", "idx_delta_active", "idx_delta_superseded"}


def _conn(path):
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def test_fresh_db_has_exactly_gaias_tables_and_columns(store, db_path):
    conn = _conn(db_path)
    tables = {r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' "
        "AND name NOT LIKE '%_fts_%'")}
    assert tables == set(EXPECTED_COLUMNS) | {"conversations_fts", "knowledge_fts"}
    for table, expected in EXPECTED_COLUMNS.items():
        info = conn.execute(f"PRAGMA table_info({table})").fetchall()
        assert [(r[1], r[2], r[4]) for r in info] == expected, table
        pk = [r[1] for r in info if r[5]]
        assert pk == ([PRIMARY_KEYS[table]] if table in PRIMARY_KEYS else []), table


def test_fresh_db_has_gaias_indexes_fts_and_triggers(store, db_path):
    conn = _conn(db_path)
    idx = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE type='index' "
                            "AND sql IS NOT NULL").fetchall())
    assert set(idx) == EXPECTED_INDEXES
    for name in PARTIAL_INDEXES:
        assert " WHERE " in idx[name], name
    fts = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE name IN "
                            "('conversations_fts', 'knowledge_fts')").fetchall())
    assert "content=conversations" in fts["conversations_fts"]
    assert "porter unicode61" in fts["conversations_fts"]
    assert "porter unicode61" in fts["knowledge_fts"]
    assert [r[1] for r in conn.execute("PRAGMA table_info(knowledge_fts)")] == \
        ["content", "domain", "category"]
    triggers = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='trigger'")}
    assert triggers == {"conv_fts_ai", "conv_fts_ad"}


def test_fresh_db_is_wal_version_7_with_one_version_row(store, db_path):
    conn = _conn(db_path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    rows = conn.execute("SELECT version, migrated_at FROM schema_version").fetchall()
    assert len(rows) == 1 and rows[0][0] == 7
    assert store.schema_version() == 7
    assert store._conn.execute("PRAGMA busy_timeout").fetchone()[0] == 5000


def test_fts_trigger_mirrors_turns(store):
    store.add_turn("s1", "user", "Summarise the quarterly sales report")
    store.add_turn("s2", "user", "Draft a reply to Alice")
    hits = store.search_conversations("summarising reports")  # porter stemming
    assert [t.session_id for t in hits] == ["s1"]


def test_init_refuses_existing_file(store, db_path):
    import pytest

    from skillsynth.errors import StoreError

    with pytest.raises(StoreError, match="already exists"):
        MemoryStore.init(db_path)
