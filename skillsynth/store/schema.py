"""GAIA's memory.db schema, as data (kept apart from the store logic so tests can read it).

Facts from GAIA's ``memory_store.py`` (v2) and the #887 ``procedures`` table (v3). The
names of the three ``procedures`` indexes are not given in the spec; we use
``idx_proc_name``, ``idx_proc_enabled`` (partial) and ``idx_proc_superseded`` (partial).
"""

from __future__ import annotations

__all__ = ["BASE_SQL", "CURRENT_VERSION", "GAIA_TABLES", "TOOL_TEXT_LIMIT", "TRIGGERS",
           "V2_COLUMNS", "V2_INDEX_SQL", "V3_SQL"]

#: The schema version this package creates and migrates to.
CURRENT_VERSION = 3

#: Tables (and their columns in order) that a v1 database has. v1 lacks
#: ``knowledge.embedding``, ``knowledge.superseded_by`` and ``conversations.consolidated_at``.
BASE_SQL = """
CREATE TABLE IF NOT EXISTS schema_version (
    version     INTEGER NOT NULL,
    migrated_at TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS conversations (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id  TEXT NOT NULL,
    role        TEXT NOT NULL,
    content     TEXT NOT NULL,
    context     TEXT DEFAULT 'global',
    timestamp   TEXT NOT NULL,
    consolidated_at TEXT
);
CREATE INDEX IF NOT EXISTS idx_conv_session ON conversations(session_id);
CREATE INDEX IF NOT EXISTS idx_conv_ts ON conversations(timestamp DESC);
CREATE INDEX IF NOT EXISTS idx_conv_context ON conversations(context);

CREATE VIRTUAL TABLE IF NOT EXISTS conversations_fts USING fts5(
    content,
    content=conversations,
    content_rowid=id,
    tokenize='porter unicode61'
);

CREATE TABLE IF NOT EXISTS knowledge (
    id          TEXT PRIMARY KEY,
    category    TEXT NOT NULL,
    content     TEXT NOT NULL,
    domain      TEXT,
    source      TEXT NOT NULL DEFAULT 'tool',
    confidence  REAL DEFAULT 0.5,
    metadata    TEXT,
    use_count   INTEGER DEFAULT 0,
    context     TEXT DEFAULT 'global',
    sensitive   INTEGER DEFAULT 0,
    entity      TEXT,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    last_used   TEXT,
    due_at      TEXT,
    reminded_at TEXT,
    embedding   BLOB,
    superseded_by TEXT
);
CREATE INDEX IF NOT EXISTS idx_knowledge_due ON knowledge(due_at)
    WHERE due_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS idx_knowledge_context ON knowledge(context);
CREATE INDEX IF NOT EXISTS idx_knowledge_entity ON knowledge(entity)
    WHERE entity IS NOT NULL;
CREATE INDEX IF NOT EXISTS idx_knowledge_sensitive ON knowledge(sensitive)
    WHERE sensitive = 1;

CREATE VIRTUAL TABLE IF NOT EXISTS knowledge_fts USING fts5(
    content, domain, category, tokenize='porter unicode61'
);

CREATE TABLE IF NOT EXISTS tool_history (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id  TEXT NOT NULL,
    tool_name   TEXT NOT NULL,
    args        TEXT,
    result_summary TEXT,
    success     INTEGER NOT NULL,
    error       TEXT,
    duration_ms INTEGER,
    timestamp   TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_tool_name ON tool_history(tool_name);
CREATE INDEX IF NOT EXISTS idx_tool_session ON tool_history(session_id);
CREATE INDEX IF NOT EXISTS idx_tool_success ON tool_history(success);
CREATE INDEX IF NOT EXISTS idx_tool_ts ON tool_history(timestamp DESC);

CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT
);
"""

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

#: v1 -> v2: additive columns, then indexes over them.
V2_COLUMNS: list[tuple[str, str, str]] = [
    ("knowledge", "embedding", "BLOB"),
    ("knowledge", "superseded_by", "TEXT"),
    ("conversations", "consolidated_at", "TEXT"),
]
V2_INDEX_SQL: list[str] = [
    "CREATE INDEX IF NOT EXISTS idx_knowledge_no_embedding ON knowledge(id) WHERE embedding IS NULL",
    ("CREATE INDEX IF NOT EXISTS idx_knowledge_superseded "
    "ON knowledge(superseded_by) WHERE superseded_by IS NOT NULL"),
    ("CREATE INDEX IF NOT EXISTS idx_conv_not_consolidated "
    "ON conversations(session_id) WHERE consolidated_at IS NULL"),
]

#: v2 -> v3: the procedures table (#887), created additively.
V3_SQL = """
CREATE TABLE IF NOT EXISTS procedures (
    id              TEXT PRIMARY KEY,
    name            TEXT NOT NULL,
    when_to_use     TEXT NOT NULL,
    markdown_body   TEXT NOT NULL,
    tools_required  TEXT,
    tool_sequence   TEXT,
    success_count   INTEGER NOT NULL DEFAULT 0,
    attempt_count   INTEGER NOT NULL DEFAULT 0,
    provenance      TEXT,
    version         TEXT NOT NULL DEFAULT '1.0.0',
    enabled         INTEGER NOT NULL DEFAULT 1,
    embedding       BLOB,
    superseded_by   TEXT,
    created_at      TEXT NOT NULL,
    last_used_at    TEXT
);
CREATE INDEX IF NOT EXISTS idx_proc_name ON procedures(name);
CREATE INDEX IF NOT EXISTS idx_proc_enabled ON procedures(enabled) WHERE enabled = 1;
CREATE INDEX IF NOT EXISTS idx_proc_superseded ON procedures(superseded_by)
    WHERE superseded_by IS NOT NULL;
"""

#: The GAIA tables skillsynth reports on (``db info``), in display order.
GAIA_TABLES = ["schema_version", "conversations", "knowledge", "tool_history", "meta", "procedures"]

#: GAIA truncates these tool_history columns to this many characters when logging.
TOOL_TEXT_LIMIT = 500
