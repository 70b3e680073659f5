"""Opening a user's database read-only changes nothing on disk."""

from __future__ import annotations

import hashlib
import json
import sqlite3

import pytest
from gaia_legacy import LEGACY_VERSIONS, build_legacy_db

from skillsynth.cli import main
from skillsynth.errors import ReadOnlyStoreError, SchemaError
from skillsynth.store import MemoryStore, Procedure


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _siblings(path):
    return sorted(p.name for p in path.parent.iterdir())


def _read_everything(s: MemoryStore) -> None:
    s.info()
    s.tool_calls()
    s.turns()
    s.first_user_turns()
    s.session_ids()
    s.search_conversations("invoice")
    s.get_meta("embedder_id")
    if s.schema_version() >= 3:
        s.procedures()


def test_read_only_open_of_v7_changes_no_byte(store, db_path):
    store.log_tool_call("s1", "read_file", {"path": "a.txt"}, "ok", True)
    store.add_turn("s1", "user", "open the invoice")
    store.put_procedure(Procedure(name="p", when_to_use="w", markdown_body="b"))
    store.close()
    before, files = _digest(db_path), _siblings(db_path)
    assert files == ["memory.db"]
    with MemoryStore.open(db_path, read_only=True) as s:
        _read_everything(s)
        for write in (lambda: s.log_tool_call("s", "t"), lambda: s.add_turn("s", "user", "x"),
                      lambda: s.set_meta("k", "v"),
                      lambda: s.set_procedure_enabled("proc_x", False)):
            with pytest.raises(ReadOnlyStoreError):
                write()
    assert _digest(db_path) == before
    assert _siblings(db_path) == files


@pytest.mark.parametrize("version", LEGACY_VERSIONS)
def test_read_only_open_of_every_older_version_neither_migrates_nor_writes(tmp_path, version,
                                                                           capsys):
    path = tmp_path / "memory.db"
    build_legacy_db(path, version)
    before, files = _digest(path), _siblings(path)
    with MemoryStore.open(path, read_only=True) as s:
        assert s.schema_version() == version
        _read_everything(s)
        if version < 3:
            with pytest.raises(SchemaError, match="procedures"):
                s.procedures()
        rows = s.info().rows
    assert rows["synthesis_marks"] == (1 if version >= 5 else None)
    assert rows["forgotten"] == (1 if version >= 6 else None)
    assert main(["db", "info", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["schema_version"] == version
    assert _digest(path) == before and _siblings(path) == files


def test_read_only_sees_rows_still_in_a_live_wal(tmp_path):
    # GAIA running: its connection is open and recent rows are only in memory.db-wal.
    path = tmp_path / "memory.db"
    gaia = MemoryStore.init(path)
    gaia._conn.execute("PRAGMA wal_autocheckpoint=0")
    gaia.log_tool_call("live", "search_file", None, "ok", True)
    main_before = _digest(path)
    with MemoryStore.open(path, read_only=True) as s:
        assert [c.session_id for c in s.tool_calls()] == ["live"]
    assert _digest(path) == main_before
    gaia.close()


def test_not_a_database_is_a_store_error(tmp_path):
    from skillsynth.errors import StoreError

    bad = tmp_path / "memory.db"
    bad.write_text("not sqlite")
    with pytest.raises(StoreError, match="memory.db"):
        MemoryStore.open(bad, read_only=True)
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE x (a)").connection.close()
    with pytest.raises(SchemaError, match="not a GAIA memory database"):
        MemoryStore.open(other, read_only=True)
