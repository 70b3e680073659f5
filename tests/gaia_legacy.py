"""Builders for older GAIA databases (v1 .. v6), with rows in every table.

Each version's schema is rebuilt from skillsynth's schema data (every object records the
version that introduced it). v1 lacks ``knowledge.embedding``, ``knowledge.superseded_by``
and ``conversations.consolidated_at`` and has no ``schema_version`` row; v2 .. v6 have one.
"""

from __future__ import annotations

import sqlite3
import struct
from pathlib import Path

from skillsynth.store import schema as _schema

LEGACY_VERSIONS = tuple(range(1, _schema.CURRENT_VERSION))


def build_legacy_db(path: Path, version: int) -> None:
    """Create a GAIA ``memory.db`` at schema ``version`` (1..6) with rows in every table."""
    assert version in LEGACY_VERSIONS
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("BEGIN")
    for stmt in _schema.create_statements(version):
        conn.execute(stmt)
    if version >= 2:
        conn.execute("INSERT INTO schema_version VALUES (?, '2026-05-01T09:00:00.000000+02:00')",
                     (version,))
    ts = "2026-05-0{}T10:00:00.123456+02:00"
    for i in range(1, 4):
        sid = f"6f1c2d3e-0000-4000-8000-00000000000{i}"
        conn.execute("INSERT INTO conversations (session_id, role, content, context, timestamp) "
                     "VALUES (?, 'user', ?, 'global', ?)", (sid, f"find the invoice #{i}: é ünï",
                                                             ts.format(i)))
        conn.execute("INSERT INTO conversations (session_id, role, content, timestamp) "
                     "VALUES (?, 'assistant', 'done', ?)", (sid, ts.format(i)))
        conn.execute(
            "INSERT INTO tool_history (session_id, tool_name, args, result_summary, success, "
            "error, duration_ms, timestamp) VALUES (?, 'search_file', ?, 'ok', 1, NULL, 12, ?)",
            (sid, '{"pattern": "*invoice*"', ts.format(i)))
        conn.execute(
            "INSERT INTO tool_history (session_id, tool_name, args, result_summary, success, "
            "error, duration_ms, timestamp) VALUES (?, 'read_file', NULL, NULL, 0, 'ENOENT', "
            "NULL, ?)", (sid, ts.format(i)))
    emb_cols = ", embedding, superseded_by" if version >= 2 else ""
    emb_vals = ", ?, NULL" if version >= 2 else ""
    params: tuple = ("k1", "fact", "The user's invoices live in ~/Documents/invoices", "files",
                     0.75, '{"k": [1, 2]}', ts.format(1), ts.format(1))
    if version >= 2:
        params += (struct.pack("<3f", 0.6, 0.8, 0.0),)
    conn.execute(
        "INSERT INTO knowledge (id, category, content, domain, confidence, metadata, "
        f"created_at, updated_at{emb_cols}) VALUES (?, ?, ?, ?, ?, ?, ?, ?{emb_vals})", params)
    conn.execute("INSERT INTO knowledge_fts (rowid, content, domain, category) "
                 "VALUES (1, 'The user''s invoices live in ~/Documents/invoices', 'files', 'fact')")
    conn.execute("INSERT INTO meta VALUES ('embedder_id', 'user.embeddinggemma-300m-GGUF:768')")
    if version >= 3:
        conn.execute(
            "INSERT INTO procedures (id, name, when_to_use, markdown_body, tools_required, "
            "provenance, created_at) VALUES ('proc_0', 'find-invoice', 'find an invoice', "
            "'1. search_file', '[\"search_file\"]', '{\"source\": \"synthesized\"}', ?)",
            (ts.format(4),))
    if version >= 4:
        conn.execute(
            "INSERT INTO skill_deltas (id, base_name, scope, kind, anchor_section, "
            "anchor_digest, payload, provenance, created_at) VALUES ('delta_0', 'email', "
            "'user', 'replace_section', 'steps', 'ab12', '{}', '{\"source\": \"user\"}', ?)",
            (ts.format(4),))
    if version >= 5:
        conn.execute("INSERT INTO synthesis_marks VALUES (?, 'unusable', 'find the invoice', "
                     "'SKIP', ?)", ("6f1c2d3e-0000-4000-8000-000000000001", ts.format(5)))
    if version >= 6:
        conn.execute("INSERT INTO forgotten (content, category, sensitive, forgotten_at) "
                     "VALUES ('my old address', 'fact', 0, ?)", (ts.format(6),))
    conn.execute("COMMIT")
    conn.close()


def table_columns(path: Path) -> dict[str, list[str]]:
    """Column names of every table in the file, FTS shadow tables included."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    cols = {t: [r[1] for r in conn.execute(f'PRAGMA table_info("{t}")')] for t in names}
    conn.close()
    return cols


def dump_rows(path: Path, columns: dict[str, list[str]]) -> dict[str, list[tuple]]:
    """The given columns of every row of the given tables as SQL literals (``quote()``),
    sorted, so equal dumps mean byte-identical stored values."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    out = {}
    for t, cols in columns.items():
        sel = ", ".join(f'quote("{c}")' for c in cols)
        out[t] = sorted(conn.execute(f'SELECT {sel} FROM "{t}"').fetchall())
    conn.close()
    return out
