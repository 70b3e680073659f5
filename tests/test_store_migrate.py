"""v1 .. v6 -> v7 migration is additive: no pre-existing stored value changes, and the
result has exactly the schema of a fresh database."""

from __future__ import annotations

import sqlite3

import pytest
from gaia_legacy import LEGACY_VERSIONS, build_legacy_db, dump_rows, table_columns
from test_store_schema import EXPECTED_COLUMNS

from skillsynth.errors import SchemaError
from skillsynth.store import CURRENT_VERSION, MemoryStore, compare_schema

# schema_version is the one table a migration must change (its row records the new version
# and time, as GAIA's migration does), so it is compared separately.
CHANGED_BY_DESIGN = ("schema_version",)
# Indexes GAIA creates on every open; an older GAIA's v2 file can lack them.
EVERY_OPEN = ("idx_tool_success", "idx_tool_ts", "idx_knowledge_due")


def test_current_version_is_gaias_v7():
    assert CURRENT_VERSION == 7


@pytest.mark.parametrize("version", LEGACY_VERSIONS)
def test_legacy_db_migrates_to_v7_with_rows_byte_identical(tmp_path, version):
    path = tmp_path / "memory.db"
    build_legacy_db(path, version)
    cols_before = {t: c for t, c in table_columns(path).items() if t not in CHANGED_BY_DESIGN}
    before = dump_rows(path, cols_before)
    assert all(before[t] for t in ("conversations", "knowledge", "tool_history", "meta"))

    with MemoryStore.open(path, read_only=True) as s:
        assert s.schema_version() == version
    with pytest.raises(SchemaError, match="db migrate"):
        MemoryStore.open(path)
    with MemoryStore.open(path, migrate=True) as s:
        assert s.schema_version() == 7
        assert len(s.procedures()) == (1 if version >= 3 else 0)

    assert dump_rows(path, cols_before) == before
    after_cols = table_columns(path)
    for table, expected in EXPECTED_COLUMNS.items():
        assert after_cols[table] == [c for c, _, _ in expected], table
    fresh = tmp_path / "fresh.db"
    MemoryStore.init(fresh).close()
    assert compare_schema(fresh, path) == []


def test_migration_reports_plan_then_is_a_noop(tmp_path):
    path = tmp_path / "memory.db"
    build_legacy_db(path, 2)
    with MemoryStore.open(path, read_only=True) as s:
        plan = s.migrate(dry_run=True)
    assert plan.from_version == 2 and plan.to_version == 7
    assert plan.steps[0] == "v2->v3: create table procedures"
    assert "v6->v7: add column knowledge.decayed_at" in plan.steps
    assert "v4->v5: create table synthesis_marks" in plan.steps
    assert plan.steps[-1] == "set schema_version to 7"
    with MemoryStore.open(path, read_only=True) as s:
        assert s.schema_version() == 2  # the dry run wrote nothing

    with MemoryStore.open(path, migrate=True) as s:
        version_rows = s.execute("SELECT version, migrated_at FROM schema_version")
    cols = table_columns(path)
    dump = dump_rows(path, cols)
    with MemoryStore.open(path) as s:
        report = s.migrate()
        assert report.steps == () and report.from_version == report.to_version == 7
        assert s.execute("SELECT version, migrated_at FROM schema_version") == version_rows
    assert dump_rows(path, cols) == dump
    assert table_columns(path) == cols


def test_v1_without_version_row_gains_v2_and_v7_columns(tmp_path):
    path = tmp_path / "memory.db"
    build_legacy_db(path, 1)
    cols = table_columns(path)
    assert "embedding" not in cols["knowledge"]
    with MemoryStore.open(path, migrate=True) as s:
        assert s.schema_version() == 7
        assert s.execute("SELECT COUNT(*) FROM schema_version") == [(1,)]
        assert s.turns()[0].consolidated_at is None
    cols = table_columns(path)
    for table, expected in EXPECTED_COLUMNS.items():
        assert cols[table] == [c for c, _, _ in expected], table


def test_v2_lacking_every_open_indexes_gains_them(tmp_path):
    path = tmp_path / "memory.db"
    build_legacy_db(path, 2)
    conn = sqlite3.connect(path)
    for name in EVERY_OPEN:
        conn.execute(f"DROP INDEX {name}")
    conn.close()
    with MemoryStore.open(path, read_only=True) as s:
        plan = s.migration_plan()
    for name in EVERY_OPEN:
        assert any(f"create index {name} " in step for step in plan), name
    MemoryStore.migrate_file(path)
    fresh = tmp_path / "fresh.db"
    MemoryStore.init(fresh).close()
    assert compare_schema(fresh, path) == []


def test_current_version_missing_an_index_is_repaired_by_migrate(store, db_path):
    store._conn.execute("DROP INDEX idx_tool_ts")
    assert store.migration_plan() == [
        "missing: create index idx_tool_ts on tool_history (GAIA creates it on every open)"]
    report = store.migrate()
    assert report.from_version == report.to_version == 7 and len(report.steps) == 1
    assert store.execute("SELECT name FROM sqlite_master WHERE name = 'idx_tool_ts'")
    assert store.migrate().steps == ()


def test_newer_schema_is_refused_for_writing_naming_both_versions(store, db_path):
    store._conn.execute("UPDATE schema_version SET version = 8")
    store.close()
    with pytest.raises(SchemaError, match=r"schema version 8 is newer .*\(7\)"):
        MemoryStore.open(db_path)
    with pytest.raises(SchemaError, match="8 is newer than 7"):
        MemoryStore.migrate_file(db_path)
    with pytest.raises(SchemaError, match="8 is newer than 7"):
        MemoryStore.migrate_file(db_path, dry_run=True)
    with MemoryStore.open(db_path, read_only=True) as s:
        assert s.schema_version() == 8
        assert s.info().schema_version == 8
