"""GAIA's memory.db schema, as data (kept apart from the store logic so tests can read it).

The facts are those of the released GAIA, amd-gaia 0.25.1 (``gaia.agents.base.memory_store``),
whose ``MemoryStore`` creates schema **version 7**:

- v1: ``schema_version``, ``conversations`` (+ external-content ``conversations_fts`` kept by
  two triggers), ``knowledge`` (+ standalone ``knowledge_fts``), ``tool_history``, ``meta``.
- v2: ``knowledge.embedding``, ``knowledge.superseded_by``, ``conversations.consolidated_at``
  (ALTER TABLE) and three partial indexes over them.
- v3: ``procedures`` (#887), v4: ``skill_deltas`` (adaptive skills), v5: ``synthesis_marks``
  (sessions a synthesis pass already handed to the distiller), v6: ``forgotten``.
- v7: ``knowledge.decayed_at`` (ALTER TABLE).

GAIA runs its whole ``CREATE ... IF NOT EXISTS`` script on every open, so every table and
index of the current version exists in any file GAIA has opened, whatever version it came
from; migrations only add columns and advance the version row. Each object below records
the version that introduced it, so the schema of any older version can be rebuilt from the
same data (tests build v1..v6 files that way).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import SchemaError

__all__ = ["CURRENT_VERSION", "FTS_TABLES", "GAIA_TABLES", "INDEXES", "OLDEST_VERSION",
           "TABLES", "TOOL_TEXT_LIMIT", "TRIGGERS", "TURN_TEXT_LIMIT", "Column", "Index",
           "Table", "added_columns", "create_statements"]

#: The schema version this package creates, migrates to and writes: amd-gaia 0.25.1's.
CURRENT_VERSION = 7

#: The oldest GAIA schema skillsynth reads (a file without a version row is v1).
OLDEST_VERSION = 1

@dataclass(frozen=True)
class Column:
    """One column: its declaration as GAIA writes it, and the version that added it."""

    name: str
    decl: str
    since: int = 1


@dataclass(frozen=True)
class Table:
    """An ordinary table; columns in GAIA's order (later ones are appended by ALTER TABLE)."""

    name: str
    columns: tuple[Column, ...]
    since: int = 1

    def ddl(self, version: int = CURRENT_VERSION) -> str:
        """``CREATE TABLE IF NOT EXISTS`` with the columns that existed at ``version``."""
        cols = ",\n".join(f"    {c.name} {c.decl}".rstrip()
                          for c in self.columns if c.since <= version)
        return f"CREATE TABLE IF NOT EXISTS {self.name} (\n{cols}\n)"


@dataclass(frozen=True)
class Index:
    """One named index; ``where`` makes it partial."""

    name: str
    table: str
    on: str
    where: str | None = None
    since: int = 1

    def ddl(self) -> str:
        """``CREATE INDEX IF NOT EXISTS`` for this index."""
        tail = f" WHERE {self.where}" if self.where else ""
        return f"CREATE INDEX IF NOT EXISTS {self.name} ON {self.table}({self.on}){tail}"


def _cols(*specs: tuple[str, str] | tuple[str, str, int]) -> tuple[Column, ...]:
    return tuple(Column(*s) for s in specs)


#: GAIA's ordinary tables, in GAIA's creation order.
TABLES: dict[str, Table] = {t.name: t for t in (
    Table(name="schema_version", columns=_cols(("version", "INTEGER NOT NULL"),
                                               ("migrated_at", "TEXT NOT NULL"))),
    Table(name="conversations", columns=_cols(
        ("id", "INTEGER PRIMARY KEY AUTOINCREMENT"), ("session_id", "TEXT NOT NULL"),
        ("role", "TEXT NOT NULL"), ("content", "TEXT NOT NULL"),
        ("context", "TEXT DEFAULT 'global'"), ("timestamp", "TEXT NOT NULL"),
        ("consolidated_at", "TEXT", 2))),
    Table(name="knowledge", columns=_cols(
        ("id", "TEXT PRIMARY KEY"), ("category", "TEXT NOT NULL"), ("content", "TEXT NOT NULL"),
        ("domain", "TEXT"), ("source", "TEXT NOT NULL DEFAULT 'tool'"),
        ("confidence", "REAL DEFAULT 0.5"), ("metadata", "TEXT"),
        ("use_count", "INTEGER DEFAULT 0"), ("context", "TEXT DEFAULT 'global'"),
        ("sensitive", "INTEGER DEFAULT 0"), ("entity", "TEXT"),
        ("created_at", "TEXT NOT NULL"), ("updated_at", "TEXT NOT NULL"),
        ("last_used", "TEXT"), ("due_at", "TEXT"), ("reminded_at", "TEXT"),
        ("embedding", "BLOB", 2), ("superseded_by", "TEXT", 2), ("decayed_at", "TEXT", 7))),
    Table(name="meta", columns=_cols(("key", "TEXT PRIMARY KEY"), ("value", "TEXT"))),
    Table(name="tool_history", columns=_cols(
        ("id", "INTEGER PRIMARY KEY AUTOINCREMENT"), ("session_id", "TEXT NOT NULL"),
        ("tool_name", "TEXT NOT NULL"), ("args", "TEXT"), ("result_summary", "TEXT"),
        ("success", "INTEGER NOT NULL"), ("error", "TEXT"), ("duration_ms", "INTEGER"),
        ("timestamp", "TEXT NOT NULL"))),
    Table(name="procedures", columns=_cols(
        ("id", "TEXT PRIMARY KEY"), ("name", "TEXT NOT NULL"),
        ("when_to_use", "TEXT NOT NULL"), ("markdown_body", "TEXT NOT NULL"),
        ("tools_required", "TEXT"), ("tool_sequence", "TEXT"),
        ("success_count", "INTEGER NOT NULL DEFAULT 0"),
        ("attempt_count", "INTEGER NOT NULL DEFAULT 0"), ("provenance", "TEXT"),
        ("version", "TEXT NOT NULL DEFAULT '1.0.0'"), ("enabled", "INTEGER NOT NULL DEFAULT 1"),
        ("embedding", "BLOB"), ("superseded_by", "TEXT"), ("created_at", "TEXT NOT NULL"),
        ("last_used_at", "TEXT")), since=3),
    Table(name="skill_deltas", columns=_cols(
        ("id", "TEXT PRIMARY KEY"), ("base_name", "TEXT NOT NULL"), ("base_root", "TEXT"),
        ("base_version", "TEXT"), ("scope", "TEXT NOT NULL"), ("kind", "TEXT NOT NULL"),
        ("learn_tier", "INTEGER NOT NULL DEFAULT 3"), ("anchor_section", "TEXT NOT NULL"),
        ("anchor_digest", "TEXT NOT NULL"), ("payload", "TEXT NOT NULL"),
        ("provenance", "TEXT NOT NULL"), ("status", "TEXT NOT NULL DEFAULT 'staged'"),
        ("success_count", "INTEGER NOT NULL DEFAULT 0"),
        ("attempt_count", "INTEGER NOT NULL DEFAULT 0"), ("embedding", "BLOB"),
        ("superseded_by", "TEXT"), ("created_at", "TEXT NOT NULL"), ("approved_at", "TEXT"),
        ("last_used_at", "TEXT")), since=4),
    Table(name="synthesis_marks", columns=_cols(
        ("session_id", "TEXT PRIMARY KEY"), ("outcome", "TEXT NOT NULL"), ("goal", "TEXT"),
        ("detail", "TEXT"), ("marked_at", "TEXT NOT NULL")), since=5),
    Table(name="forgotten", columns=_cols(
        ("id", "INTEGER PRIMARY KEY AUTOINCREMENT"), ("content", "TEXT NOT NULL"),
        ("category", "TEXT"), ("sensitive", "INTEGER NOT NULL DEFAULT 0"),
        ("forgotten_at", "TEXT NOT NULL")), since=6),
)}

#: GAIA's named indexes. GAIA (re)creates every one of them on each open.
INDEXES: dict[str, Index] = {i.name: i for i in (
    Index(name="idx_conv_session", table="conversations", on="session_id"),
    Index(name="idx_conv_ts", table="conversations", on="timestamp DESC"),
    Index(name="idx_conv_context", table="conversations", on="context"),
    Index(name="idx_knowledge_due", table="knowledge", on="due_at", where="due_at IS NOT NULL"),
    Index(name="idx_knowledge_context", table="knowledge", on="context"),
    Index(name="idx_knowledge_entity", table="knowledge", on="entity", where="entity IS NOT NULL"),
    Index(name="idx_knowledge_sensitive", table="knowledge", on="sensitive", where="sensitive = 1"),
    Index(name="idx_tool_name", table="tool_history", on="tool_name"),
    Index(name="idx_tool_session", table="tool_history", on="session_id"),
    Index(name="idx_tool_success", table="tool_history", on="success"),
    Index(name="idx_tool_ts", table="tool_history", on="timestamp DESC"),
    Index(name="idx_knowledge_no_embedding", table="knowledge", on="id", where="embedding IS NULL",
          since=2),
    Index(name="idx_knowledge_superseded", table="knowledge", on="superseded_by",
          where="superseded_by IS NOT NULL", since=2),
    Index(name="idx_conv_not_consolidated", table="conversations", on="session_id",
          where="consolidated_at IS NULL", since=2),
    Index(name="idx_proc_name", table="procedures", on="name", since=3),
    Index(name="idx_proc_enabled", table="procedures", on="enabled", where="enabled = 1", since=3),
    Index(name="idx_proc_superseded", table="procedures", on="superseded_by",
          where="superseded_by IS NOT NULL", since=3),
    Index(name="idx_delta_base", table="skill_deltas", on="base_name, scope", since=4),
    Index(name="idx_delta_active", table="skill_deltas", on="status", where="status = 'active'",
          since=4),
    Index(name="idx_delta_superseded", table="skill_deltas", on="superseded_by",
          where="superseded_by IS NOT NULL", since=4),
    Index(name="idx_synthesis_marks_outcome", table="synthesis_marks", on="outcome", since=5),
)}

#: The FTS5 tables (both since v1): ``conversations_fts`` mirrors ``conversations`` through
#: the triggers below; ``knowledge_fts`` is standalone and kept by GAIA's code.
FTS_TABLES: dict[str, str] = {
    "conversations_fts": (
        "CREATE VIRTUAL TABLE IF NOT EXISTS conversations_fts USING fts5(\n"
        "    content,\n    content=conversations,\n    content_rowid=id,\n"
        "    tokenize='porter unicode61'\n)"),
    "knowledge_fts": ("CREATE VIRTUAL TABLE IF NOT EXISTS knowledge_fts USING "
                      "fts5(content, domain, category, tokenize='porter unicode61')"),
}

#: Triggers that keep the external-content ``conversations_fts`` in step (insert and delete
#: only: GAIA's turns are append-only).
TRIGGERS: dict[str, str] = {
    "conv_fts_ai": """
CREATE TRIGGER IF NOT EXISTS conv_fts_ai AFTER INSERT ON conversations BEGIN
    INSERT INTO conversations_fts(rowid, content) VALUES (new.id, new.content);
END""",
    "conv_fts_ad": """
CREATE TRIGGER IF NOT EXISTS conv_fts_ad AFTER DELETE ON conversations BEGIN
    INSERT INTO conversations_fts(conversations_fts, rowid, content)
    VALUES ('delete', old.id, old.content);
END""",
}


def added_columns(after: int, upto: int = CURRENT_VERSION) -> list[tuple[int, Table, Column]]:
    """Columns a migration from ``after`` to ``upto`` appends to tables that already existed
    at ``after`` (GAIA adds them with ``ALTER TABLE ... ADD COLUMN``)."""
    return [(c.since, t, c) for t in TABLES.values() if t.since <= after
            for c in t.columns if after < c.since <= upto]


def create_statements(version: int = CURRENT_VERSION) -> list[str]:
    """The DDL of GAIA's schema as it stood at ``version``: tables, FTS, triggers, indexes.

    The ``schema_version`` row is the caller's to write (a v1 file has none).
    """
    if not OLDEST_VERSION <= version <= CURRENT_VERSION:
        raise SchemaError(f"GAIA schema versions are {OLDEST_VERSION}..{CURRENT_VERSION}, "
                         f"not {version}")
    out = [t.ddl(version) for t in TABLES.values() if t.since <= version]
    out += list(FTS_TABLES.values()) + list(TRIGGERS.values())
    out += [i.ddl() for i in INDEXES.values() if i.since <= version]
    return out


#: The GAIA tables skillsynth reports on (``db info``), in display order.
GAIA_TABLES = ["schema_version", "conversations", "knowledge", "tool_history", "meta",
               "procedures", "skill_deltas", "synthesis_marks", "forgotten"]

#: ``meta`` key of the synthesis watermark: the newest ``tool_history`` timestamp a pass
#: fully consumed (amd-gaia 0.25.1; the next pass reads only calls strictly newer).
SYNTHESIS_WATERMARK_KEY = "skill_synthesis_watermark"
#: The outcomes a ``synthesis_marks`` row may hold: a procedure came of the session's
#: cluster, or the distiller could not make one (SKIP, malformed) or the session had no goal.
SYNTHESIS_OUTCOMES = ("distilled", "unusable")

#: GAIA truncates these tool_history columns to this many characters when logging.
TOOL_TEXT_LIMIT = 500
#: GAIA (0.25.1) cuts a conversation turn to this many characters (and skips empty ones).
TURN_TEXT_LIMIT = 4000
