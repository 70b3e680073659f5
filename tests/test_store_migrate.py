"""v1/v2 -> v3 migration is additive: no pre-existing stored value changes."""

from __future__ import annotations

import pytest
from gaia_legacy import build_legacy_db, dump_rows, table_columns
from test_store_schema import EXPECTED_COLUMNS

from skillsynth.errors import SchemaError
from skillsynth.store import MemoryStore

# schema_version is the one table a migration must change (its row records the new version
# and time, as GAIA's migration does), so it is compared separately.
CHANGED_BY_DESIGN = ("schema_version",)


@pytest.mark.parametrize("version", [1, 2])
def test_legacy_db_migrates_to_v3_with_rows_byte_identical(tmp_path, version):
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
        assert s.schema_version() == 3
        assert s.procedures() == []

    assert dump_rows(path, cols_before) == before
    after_cols = table_columns(path)
    for table, expected in EXPECTED_COLUMNS.items():
        # ALTER TABLE appends, so a migrated v1 has the v2 columns last; same set either way.
        assert sorted(after_cols[table]) == sorted(c for c, _, _ in expected), table


def test_migration_reports_plan_then_is_a_noop(tmp_path):
    path = tmp_path / "memory.db"
    build_legacy_db(path, 2)
    with MemoryStore.open(path, read_only=True) as s:
        plan = s.migrate(dry_run=True)
    assert plan.from_version == 2 and plan.to_version == 3 and plan.steps
    with MemoryStore.open(path, read_only=True) as s:
        assert s.schema_version() == 2  # the dry run wrote nothing

    with MemoryStore.open(path, migrate=True) as s:
        version_rows = s.execute("SELECT version, migrated_at FROM schema_version")
    cols = table_columns(path)
    dump = dump_rows(path, cols)
    with MemoryStore.open(path) as s:
        report = s.migrate()
        assert report.steps == () and report.from_version == report.to_version == 3
        assert s.execute("SELECT version, migrated_at FROM schema_version") == version_rows
    assert dump_rows(path, cols) == dump
    assert table_columns(path) == cols


def test_v1_without_version_row_gains_v2_columns(tmp_path):
    path = tmp_path / "memory.db"
    build_legacy_db(path, 1)
    cols = table_columns(path)
    assert "embedding" not in cols["knowledge"]
    with MemoryStore.open(path, migrate=True) as s:
        assert s.schema_version() == 3
        assert s.turns()[0].consolidated_at is None
    cols = table_columns(path)
    for table, expected in EXPECTED_COLUMNS.items():
        assert sorted(cols[table]) == sorted(c for c, _, _ in expected), table


def test_newer_schema_is_refused_for_writing(store, db_path):
    store._conn.execute("UPDATE schema_version SET version = 4")
    store.close()
    with pytest.raises(SchemaError, match="newer"):
        MemoryStore.open(db_path)
    with MemoryStore.open(db_path, read_only=True) as s:
        assert s.schema_version() == 4
