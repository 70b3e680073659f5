"""The released GAIA (amd-gaia) as the oracle: its own MemoryStore makes and reads the files.

A hand-written fixture can only repeat what we believe GAIA does; these tests run GAIA's
code. (a) A database GAIA made and filled is imported and analysed by skillsynth without a
byte changing. (b) A database skillsynth made opens in GAIA with no migration, and GAIA's
own procedure search finds what skillsynth wrote, with the same enabled / superseded_by
semantics. (c) compare_schema finds no difference between the two schemas, also after
skillsynth migrates an older file. The compare_schema unit tests at the end need no GAIA.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gaia_legacy import LEGACY_VERSIONS, build_legacy_db, dump_rows

from skillsynth.cli import main
from skillsynth.corpora import import_corpus
from skillsynth.store import MemoryStore, Procedure, compare_schema, installed_gaia_version
from skillsynth.store.gaia_release import TESTED_GAIA_RANGE

WHY = ("amd-gaia is not installed (pip install 'skillsynth[gaia]'); the released GAIA's "
       "MemoryStore is the oracle these tests check skillsynth's files against")
TABLES = {"tool_history": ["session_id", "tool_name", "args", "result_summary", "success",
                           "error", "duration_ms", "timestamp"],
          "conversations": ["session_id", "role", "content", "context", "timestamp"]}


@pytest.fixture
def gaia_store() -> Any:
    """GAIA's own MemoryStore class (the test is skipped, saying why, without amd-gaia)."""
    mod = pytest.importorskip("gaia.agents.base.memory_store", reason=WHY)
    return mod.MemoryStore


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _master(path: Path) -> list[tuple[Any, ...]]:
    with MemoryStore.open(path, read_only=True) as s:
        return s.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name")


def _versions(path: Path) -> list[tuple[Any, ...]]:
    with MemoryStore.open(path, read_only=True) as s:
        return s.execute("SELECT version, migrated_at FROM schema_version")


def _gaia_fresh(gaia_store: Any, path: Path) -> Path:
    gaia_store(db_path=path).close()
    return path


def _unit(*xs: float) -> np.ndarray:
    v = np.array(xs, dtype=np.float64)
    return v / np.linalg.norm(v)


# ------------------------------------------------------------------ the installed release
def test_installed_gaia_is_in_the_tested_range(gaia_store):
    from packaging.specifiers import SpecifierSet

    found = installed_gaia_version()
    assert found is not None and found in SpecifierSet(TESTED_GAIA_RANGE), found


def test_core_skillsynth_works_without_gaia(tmp_path):
    # Importing skillsynth pulls no GAIA module; then `sys.modules["gaia"] = None` makes any
    # import of GAIA fail, as on a machine without amd-gaia, and the store still works.
    code = ("import sys\n"
            "import skillsynth, skillsynth.cli, skillsynth.store, skillsynth.corpora\n"
            "assert not [m for m in sys.modules if m.split('.')[0] == 'gaia'], 'gaia imported'\n"
            "sys.modules['gaia'] = None\n"
            "from skillsynth.cli import main\n"
            f"p = {str(tmp_path / 'm.db')!r}\n"
            "assert main(['db', 'init', p]) == 0 and main(['db', 'info', p]) == 0\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr


def test_installed_gaia_version_is_none_without_the_distribution(monkeypatch):
    from importlib.metadata import PackageNotFoundError

    from skillsynth.store import gaia_release

    def missing(name: str) -> str:
        raise PackageNotFoundError(name)

    monkeypatch.setattr(gaia_release, "version", missing)
    assert installed_gaia_version() is None


# ------------------------------------------------------------------ (a) GAIA writes, we read
def _fill_like_gaia(store: Any) -> str:
    for i in range(3):
        sid = f"gaia-session-{i}"
        store.store_turn(sid, "user", f"find the invoice for order {i}")
        store.log_tool_call(sid, "search_file", {"pattern": "*invoice*"}, "3 files", True,
                            duration_ms=12)
        store.log_tool_call(sid, "read_file", {"path": f"inv{i}.pdf", "body": "x" * 900},
                            "", False, error="ENOENT")
        store.store_turn(sid, "assistant", "Here it is.")
    store.log_tool_call("goalless", "list_dir", {}, "ok", True)
    store.mark_sessions_synthesized(["gaia-session-0", "gaia-session-1"], "distilled",
                                    goal="find the invoice")
    store.mark_sessions_synthesized(["gaia-session-2"], "unusable", detail="SKIP")
    store.set_synthesis_watermark("2026-12-01T10:00:00+00:00")
    return str(store.put_skill(
        "find-invoice", "the user wants an invoice found", "1. search_file\n2. read_file",
        tools_required=["search_file", "read_file"],
        provenance={"source": "synthesized", "from_sessions": ["gaia-session-0"]}))


def test_gaia_made_db_is_imported_and_analysed_byte_identically(gaia_store, tmp_path, capsys):
    src = tmp_path / "memory.db"
    g = gaia_store(db_path=src)
    proc_id = _fill_like_gaia(g)
    g.close()
    before, siblings = _digest(src), sorted(p.name for p in tmp_path.iterdir())
    assert siblings == ["memory.db"]

    with MemoryStore.open(src, read_only=True) as s:
        info = s.info()
        assert info.schema_version == 7 and info.tool_history_sessions == 4
        assert (info.rows["synthesis_marks"], info.rows["procedures"]) == (3, 1)
        assert info.rows["skill_deltas"] == info.rows["forgotten"] == 0
        (proc,) = s.procedures(active_only=True)
        assert proc.id == proc_id and proc.tools_required == ("search_file", "read_file")
        assert proc.provenance["from_sessions"] == ["gaia-session-0"]
        assert s.first_user_turns()["gaia-session-1"].content == "find the invoice for order 1"
        bounded = s.tool_calls("gaia-session-0")[1].args
        assert bounded is not None and json.loads(bounded)["path"] == "inv0.pdf"
    assert main(["db", "info", str(src), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"]["synthesis_marks"] == 3
    assert main(["corpus", "import", "--format", "gaia-db", str(src),
                 str(tmp_path / "cli.db"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["sessions_imported"] == 4
    rep = import_corpus("gaia-db", src, tmp_path / "corpus.db")
    assert (rep.sessions_imported, rep.sessions_without_goal) == (4, 1)

    assert _digest(src) == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("memory.db")) \
        == ["memory.db"]
    assert dump_rows(src, TABLES) == dump_rows(tmp_path / "corpus.db", TABLES)
    assert compare_schema(src, tmp_path / "corpus.db") == []


# ------------------------------------------------------------------ (b) we write, GAIA reads
def test_skillsynth_db_opens_in_gaia_unmigrated_and_gaia_finds_its_procedures(gaia_store,
                                                                             tmp_path):
    path = tmp_path / "memory.db"
    with MemoryStore.init(path) as s:
        for i in range(2):
            sid = f"ss-{i}"
            s.add_turn(sid, "user", f"book a flight {i}")
            for tool in ("search_flights", "book_flight", "send_receipt"):
                s.log_tool_call(sid, tool, {"leg": i}, "ok", True)
        live = s.put_procedure(Procedure(
            name="book-flight", when_to_use="the user wants to book a flight",
            markdown_body="1. search_flights\n2. book_flight", tools_required=(
                "search_flights", "book_flight"), tool_sequence=({"tool": "search_flights"},),
            provenance={"source": "skillsynth", "from_sessions": ["ss-0", "ss-1"]}))
        off = s.put_procedure(Procedure(name="cancel-flight", when_to_use="cancel a flight",
                                        markdown_body="1. cancel"))
        old = s.put_procedure(Procedure(name="book-flight-old", when_to_use="book a flight",
                                        markdown_body="1. book_flight"))
        s.set_procedure_enabled(off.id, False)
        s.supersede_procedure(old.id, live.id)
        for p, v in ((live, _unit(1, 0, 0)), (off, _unit(0, 1, 0)), (old, _unit(1, 1, 0))):
            s.set_procedure_embedding(p.id, v)
    master, versions = _master(path), _versions(path)

    g = gaia_store(db_path=path)
    try:
        assert [r["id"] for r in g.search_skills()] == [live.id]
        assert [r["id"] for r in g.iter_skills_with_embeddings()] == [live.id]
        assert g.search_skills(skill_id=off.id) == g.search_skills(skill_id=old.id) == []
        (got,) = g.search_skills(name="book-flight", with_embedding=True)
        assert got["tools_required"] == ["search_flights", "book_flight"]
        assert got["provenance"]["from_sessions"] == ["ss-0", "ss-1"]
        assert got["version"] == "1.0.0" and got["enabled"] is True
        assert np.allclose(np.frombuffer(got["embedding"], "<f4"), [1, 0, 0])
        every = {r["id"]: r for r in g.search_skills(enabled_only=False,
                                                     include_superseded=True)}
        assert every[off.id]["enabled"] is False and every[old.id]["superseded_by"] == live.id
        # GAIA's DETECT reads skillsynth's tool calls and goals.
        assert [(x["session_id"], x["goal"], x["tools"]) for x in g.iter_sessions()] == [
            (f"ss-{i}", f"book a flight {i}", ["search_flights", "book_flight", "send_receipt"])
            for i in range(2)]
        # The other way round: GAIA supersedes; skillsynth's recallable set follows.
        newer = g.put_skill("book-flight-v2", "book a flight, v2", "1. book_flight")
        assert g.supersede_skill(live.id, newer)
    finally:
        g.close()

    assert _versions(path) == versions  # no migration: same version row, same time
    added = {r[1] for r in _master(path)} - {r[1] for r in master}
    assert added == set() and _master(path) == master  # GAIA created no table or index
    with MemoryStore.open(path) as s:
        assert [p.name for p in s.search_procedures()] == ["book-flight-v2"]


# ------------------------------------------------------------------ (c) the schemas are one
def test_fresh_skillsynth_schema_equals_gaias(gaia_store, tmp_path):
    gaia = _gaia_fresh(gaia_store, tmp_path / "gaia.db")
    MemoryStore.init(tmp_path / "ss.db").close()
    assert compare_schema(gaia, tmp_path / "ss.db",
                          labels=(f"amd-gaia {installed_gaia_version()}", "skillsynth")) == []


@pytest.mark.parametrize("version", LEGACY_VERSIONS)
def test_migrated_legacy_file_equals_gaias_schema_and_gaia_leaves_it(gaia_store, tmp_path,
                                                                     version):
    gaia = _gaia_fresh(gaia_store, tmp_path / "gaia.db")
    path = tmp_path / "memory.db"
    build_legacy_db(path, version)
    if version == 2:  # an older GAIA's v2 file lacks the indexes GAIA makes on every open
        conn = sqlite3.connect(path)
        for name in ("idx_tool_success", "idx_tool_ts", "idx_knowledge_due"):
            conn.execute(f"DROP INDEX {name}")
        conn.close()
    assert compare_schema(gaia, path)  # the oracle sees the old file as different
    MemoryStore.migrate_file(path)
    assert compare_schema(gaia, path, labels=("gaia", f"migrated v{version}")) == []
    master, versions = _master(path), _versions(path)
    gaia_store(db_path=path).close()
    assert _master(path) == master and _versions(path) == versions


# ------------------------------------------------------------------ compare_schema itself
@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path]:
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    MemoryStore.init(a).close()
    MemoryStore.init(b).close()
    assert compare_schema(a, b) == []
    return a, b


def _alter(path: Path, *sql: str) -> None:
    conn = sqlite3.connect(path)
    for s in sql:
        conn.execute(s)
    conn.commit()
    conn.close()


def test_compare_schema_names_a_dropped_index(pair):
    a, b = pair
    _alter(b, "DROP INDEX idx_tool_ts")
    assert compare_schema(a, b, labels=("a", "b")) == [
        "index idx_tool_ts: in a, missing from b"]


def test_compare_schema_names_columns_tables_triggers_and_version(pair):
    a, b = pair
    _alter(b, "DROP TABLE forgotten", "ALTER TABLE meta ADD COLUMN note TEXT DEFAULT 'x'",
           "DROP INDEX idx_proc_enabled",
           "CREATE INDEX idx_proc_enabled ON procedures(enabled) WHERE enabled = 0",
           "DROP TRIGGER conv_fts_ad", "UPDATE schema_version SET version = 6")
    diffs = compare_schema(a, b, labels=("a", "b"))
    assert diffs == [
        "schema_version: 7 in a, 6 in b",
        "table forgotten: in a, missing from b",
        "column meta.note: in b, missing from a",
        "index idx_proc_enabled: where 'enabled=1' in a, 'enabled=0' in b",
        "trigger conv_fts_ad: in a, missing from b",
    ]


def test_compare_schema_names_a_changed_default_and_type(tmp_path, pair):
    a, _ = pair
    c = tmp_path / "c.db"
    conn = sqlite3.connect(c)
    for stmt in ("CREATE TABLE tool_history (id INTEGER PRIMARY KEY, session_id TEXT)",
                 "CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER DEFAULT 0)"):
        conn.execute(stmt)
    conn.close()
    diffs = compare_schema(a, c, labels=("a", "c"))
    assert "column meta.value: type 'TEXT' in a, 'INTEGER' in c" in diffs
    assert "column meta.value: default None in a, '0' in c" in diffs
    assert "table tool_history: AUTOINCREMENT True in a, False in c" in diffs
    assert "column tool_history.tool_name: in a, missing from c" in diffs
    assert "column tool_history.session_id: not null True in a, False in c" in diffs


def test_v1_file_gaia_cannot_open_is_repaired_by_skillsynth(gaia_store, tmp_path):
    # amd-gaia 0.25.1 reads an empty schema_version table as a fresh install, creates its
    # new tables, then fails on the v2 index over the missing knowledge.embedding column,
    # leaving the file half-changed. skillsynth's plan adds what is missing either way.
    path = tmp_path / "memory.db"
    build_legacy_db(path, 1)
    rows = dump_rows(path, TABLES)
    # In its own process: the failed open leaves its connection (and lock) unreleased.
    code = ("from gaia.agents.base.memory_store import MemoryStore\n"
            f"MemoryStore(db_path={str(path)!r}).close()\n")
    subprocess.run([sys.executable, "-c", code], capture_output=True, check=False)
    report = MemoryStore.migrate_file(path)
    assert report.to_version == 7 and report.steps
    assert compare_schema(_gaia_fresh(gaia_store, tmp_path / "gaia.db"), path) == []
    assert dump_rows(path, TABLES) == rows
    gaia_store(db_path=path).close()  # and now GAIA opens it


# ------------------------------------------------------------------ logging, as GAIA logs it
ARGS_CASES = [
    {},
    {"path": "a.txt"},
    {"path": "notes.md", "content": "x" * 5000},  # one long value: shortened, path kept
    {"content": "é" * 300, "more": list(range(300)), "n": 3},  # a long list, as JSON text
    {f"key{i:03d}": "v" * 30 for i in range(40)},  # many short values: only keys fit
    {f"k{i}": i for i in range(200)},
]


def test_tool_calls_and_turns_are_stored_as_gaia_stores_them(gaia_store, tmp_path):
    ours, theirs = tmp_path / "ours.db", _gaia_fresh(gaia_store, tmp_path / "gaia.db")
    gaia = gaia_store(db_path=theirs)
    turns = ["find the invoice", "", "   ", "y" * 9000]
    try:
        with MemoryStore.init(ours) as s:
            for i, args in enumerate(ARGS_CASES):
                gaia.log_tool_call("s", "write_file", args, "r" * 700, i % 2 == 0,
                                   error="e" * 900)
                s.log_tool_call("s", "write_file", args, "r" * 700, i % 2 == 0,
                                error="e" * 900)
            for text in turns:
                gaia.store_turn("s", "user", text)
                s.add_turn("s", "user", text)
    finally:
        gaia.close()
    for table, cols in (("tool_history", TABLES["tool_history"][:-2]),
                        ("conversations", ["session_id", "role", "content", "context"])):
        got = {p: sqlite3.connect(p).execute(f"SELECT {', '.join(cols)} FROM {table} "
                                             "ORDER BY id").fetchall() for p in (ours, theirs)}
        assert got[ours] == got[theirs], table
    stored = [json.loads(a) for (a,) in sqlite3.connect(ours).execute(
        "SELECT args FROM tool_history WHERE args IS NOT NULL ORDER BY id")]
    assert stored[1]["path"] == "notes.md" and stored[1]["_truncated"] is True
    assert all(len(json.dumps(a)) <= 500 for a in stored)  # every one parses and fits
