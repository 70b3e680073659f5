"""MemoryStore: read and write GAIA's ``memory.db`` exactly as GAIA lays it out.

GAIA's database is not ours (house rule 13): this package creates the schema the released
GAIA creates (v7, amd-gaia 0.25.1), runs GAIA's additive migrations (v1 .. v6 -> v7) and
adds nothing else. It reads every version from 1 to 7 and refuses to write a newer one. A
user's real database can be opened ``read_only=True``; that open changes no byte of the file
and creates no ``-wal``/``-shm`` file.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self
from urllib.parse import quote

from ..errors import ReadOnlyStoreError, SchemaError, StoreError
from . import schema
from .conversations import ConversationRows
from .procedures import ProcedureRows
from .progress import SynthesisProgress
from .rows import (
    MigrationReport,
    StoreInfo,
    ToolCall,
    _filters,
    _in_chunks,
    _truncate,
    now_iso,
    serialize_args,
)

__all__ = ["CURRENT_VERSION", "MemoryStore"]

CURRENT_VERSION = schema.CURRENT_VERSION


class MemoryStore(ConversationRows, ProcedureRows, SynthesisProgress):
    """A GAIA ``memory.db`` on disk.

    Use :meth:`init` for a new database and :meth:`open` for an existing one. The object
    holds one SQLite connection (GAIA's one-connection-per-process rule); close it with
    :meth:`close` or use it as a context manager.
    """

    def __init__(self, conn: sqlite3.Connection, path: Path, *, read_only: bool):
        self._conn = conn
        self.path = path
        self.read_only = read_only
        self._tx_depth = 0

    # ------------------------------------------------------------------ open / create
    @classmethod
    def init(cls, path: str | Path) -> MemoryStore:
        """Create a new database at ``path`` with GAIA's current (v7) schema.

        Raises:
            StoreError: if ``path`` already exists (open or migrate it instead).
        """
        p = Path(path)
        if p.exists():
            raise StoreError("already exists; use `skillsynth db migrate` or MemoryStore.open",
                             path=str(p))
        p.parent.mkdir(parents=True, exist_ok=True)
        store = cls(cls._connect_rw(p), p, read_only=False)
        store._create_fresh()
        return store

    @classmethod
    def open(cls, path: str | Path, *, read_only: bool = False, migrate: bool = False,
             create: bool = False) -> MemoryStore:
        """Open an existing GAIA database.

        Args:
            path: the ``memory.db`` file.
            read_only: open without changing the file in any way (no WAL switch, no
                migration, no ``-wal``/``-shm`` created). Writes raise ReadOnlyStoreError.
            migrate: migrate an older schema to v7 on open, and create any GAIA index or
                table the file lacks (additive, as GAIA does on every open).
            create: create the database when the file does not exist.

        Raises:
            StoreError: the file is missing or not SQLite.
            SchemaError: (read-write only) the schema is older than v7 and ``migrate`` is
                false, or newer than v7.
        """
        p = Path(path)
        if not p.exists():
            if create and not read_only:
                return cls.init(p)
            raise StoreError("no such database file", path=str(p))
        if read_only:
            store = cls(cls._connect_ro(p), p, read_only=True)
            store._check_is_gaia()
            return store
        store = cls(cls._connect_rw(p), p, read_only=False)
        store._check_is_gaia()
        version = store.schema_version()
        if version > CURRENT_VERSION:
            store.close()
            raise SchemaError(
                f"schema version {version} is newer than this skillsynth understands "
                f"({CURRENT_VERSION}); open it read_only=True or upgrade skillsynth", path=str(p))
        if version < CURRENT_VERSION and not migrate:
            store.close()
            raise SchemaError(
                f"schema version {version} is older than {CURRENT_VERSION}; run "
                f"`skillsynth db migrate {p}` (additive; back the file up first) "
                "or open it read_only=True", path=str(p))
        if migrate and store._plan():
            store._migrate()
        return store

    @classmethod
    def migrate_file(cls, path: str | Path, *, dry_run: bool = False) -> MigrationReport:
        """Migrate the database at ``path`` to v7 in place (``skillsynth db migrate``).

        With ``dry_run`` the file is opened read-only and only the plan is returned.

        Raises:
            StoreError: the file is missing or not SQLite.
            SchemaError: not a GAIA database, or newer than this package understands.
        """
        p = Path(path)
        if dry_run:
            with cls.open(p, read_only=True) as store:
                return store.migrate(dry_run=True)
        if not p.exists():
            raise StoreError("no such database file", path=str(p))
        with cls(cls._connect_rw(p), p, read_only=False) as store:
            store._check_is_gaia()
            return store.migrate()

    @staticmethod
    def _connect_rw(p: Path) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(str(p), isolation_level=None)
            conn.execute("PRAGMA busy_timeout=5000")
            conn.execute("PRAGMA journal_mode=WAL")
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"cannot open as SQLite: {exc}", path=str(p)) from exc
        return conn

    @staticmethod
    def _connect_ro(p: Path) -> sqlite3.Connection:
        # With a live -wal file (GAIA running, or an unclean stop) a plain read-only
        # connection sees its committed pages. Without one, `immutable=1` keeps SQLite from
        # creating -wal/-shm files beside the user's database.
        wal = p.with_name(p.name + "-wal")
        uri = f"file:{quote(str(p.resolve()))}?mode=ro"
        if not wal.exists():
            uri += "&immutable=1"
        try:
            conn = sqlite3.connect(uri, uri=True, isolation_level=None)
            conn.execute("PRAGMA busy_timeout=5000")
            conn.execute("PRAGMA query_only=1")
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"cannot open read-only: {exc}", path=str(p)) from exc
        return conn

    def _check_is_gaia(self) -> None:
        try:
            names = self._table_names()
        except sqlite3.DatabaseError as exc:
            self.close()
            raise StoreError(f"not a SQLite database: {exc}", path=str(self.path)) from exc
        if "tool_history" not in names and "conversations" not in names:
            self.close()
            raise SchemaError("not a GAIA memory database (no tool_history or conversations "
                              "table)", path=str(self.path))

    def close(self) -> None:
        """Close the connection (idempotent)."""
        try:
            self._conn.close()
        except sqlite3.Error:
            pass

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ transactions
    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Group writes: all of them land, or none do. Nested calls join the outer one."""
        self._require_writable()
        if self._tx_depth:
            self._tx_depth += 1
            try:
                yield
            finally:
                self._tx_depth -= 1
            return
        self._conn.execute("BEGIN IMMEDIATE")
        self._tx_depth = 1
        try:
            yield
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        else:
            self._conn.execute("COMMIT")
        finally:
            self._tx_depth = 0

    def _require_writable(self) -> None:
        if self.read_only:
            raise ReadOnlyStoreError("opened read-only; reopen without read_only to write",
                                     path=str(self.path))

    # ------------------------------------------------------------------ schema
    def _table_names(self) -> set[str]:
        rows = self._conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
        return {r[0] for r in rows}

    def _columns(self, table: str) -> list[str]:
        return [r[1] for r in self._conn.execute(f"PRAGMA table_info({table})")]

    def schema_version(self) -> int:
        """GAIA's schema version: the highest ``schema_version`` row; no row means 1."""
        if "schema_version" not in self._table_names():
            return 1
        row = self._conn.execute(
            "SELECT version FROM schema_version ORDER BY version DESC LIMIT 1").fetchone()
        return int(row[0]) if row else 1

    def _objects(self, kind: str) -> set[str]:
        rows = self._conn.execute("SELECT name FROM sqlite_master WHERE type = ?", (kind,))
        return {r[0] for r in rows}

    def _create_fresh(self) -> None:
        with self.transaction():
            for sql in schema.create_statements():
                self._conn.execute(sql)
            self._conn.execute("INSERT INTO schema_version (version, migrated_at) VALUES (?, ?)",
                               (CURRENT_VERSION, now_iso()))

    def _plan(self) -> list[tuple[str, str]]:
        """(step, DDL) pairs that bring the file to GAIA's current schema, in order.

        Columns are appended to the tables that exist (GAIA's ALTER TABLE steps); every
        missing table, FTS table, trigger and index is created, as GAIA's ``CREATE ... IF
        NOT EXISTS`` script does on each open. Nothing else is touched.
        """
        version = self.schema_version()
        tables = self._table_names()
        indexes, triggers = self._objects("index"), self._objects("trigger")

        def tag(since: int) -> str:
            return f"v{since - 1}->v{since}" if since > version else "missing"

        # (order, step, DDL): GAIA's version steps in turn, objects an older GAIA should
        # already have made first; within a step, columns and tables before their indexes.
        steps: list[tuple[int, str, str]] = []
        for t in schema.TABLES.values():
            if t.name not in tables:
                steps.append((t.since, f"{tag(t.since)}: create table {t.name}", t.ddl()))
                continue
            have = set(self._columns(t.name))
            steps += [(c.since, f"{tag(c.since)}: add column {t.name}.{c.name}",
                       f"ALTER TABLE {t.name} ADD COLUMN {c.name} {c.decl}")
                      for c in t.columns if c.name not in have]
        steps += [(1, f"missing: create FTS table {name}", sql)
                  for name, sql in schema.FTS_TABLES.items() if name not in tables]
        steps += [(1, f"missing: create trigger {name}", sql)
                  for name, sql in schema.TRIGGERS.items() if name not in triggers]
        steps += [(i.since, f"{tag(i.since)}: create index {i.name} on {i.table}"
                   + ("" if i.since > version else " (GAIA creates it on every open)"), i.ddl())
                  for i in schema.INDEXES.values() if i.name not in indexes]
        steps.sort(key=lambda s: s[0] if s[0] > version else 0)
        return [(step, sql) for _, step, sql in steps]

    def migration_plan(self) -> list[str]:
        """The steps :meth:`migrate` would take (empty if the schema is already GAIA's, or
        newer than this package knows: :meth:`migrate` refuses that)."""
        if self.schema_version() > CURRENT_VERSION:
            return []
        steps = [step for step, _ in self._plan()]
        if self.schema_version() < CURRENT_VERSION:
            steps.append(f"set schema_version to {CURRENT_VERSION}")
        return steps

    def migrate(self, *, dry_run: bool = False) -> MigrationReport:
        """Migrate to GAIA's current schema additively; no existing row changes.

        Migrating a database that already has the whole current schema is a no-op. With
        ``dry_run`` nothing is written.
        """
        before = self.schema_version()
        if before > CURRENT_VERSION:
            raise SchemaError(f"schema version {before} is newer than {CURRENT_VERSION}, the "
                              "newest this skillsynth knows; nothing to migrate",
                              path=str(self.path))
        steps = tuple(self.migration_plan())
        if dry_run or not steps:
            target = CURRENT_VERSION if steps else before
            return MigrationReport(path=str(self.path), from_version=before, to_version=target,
                                   steps=steps, dry_run=dry_run)
        self._require_writable()
        self._migrate()
        return MigrationReport(path=str(self.path), from_version=before,
                               to_version=self.schema_version(), steps=steps)

    def _migrate(self) -> None:
        version = self.schema_version()
        if version > CURRENT_VERSION:
            raise SchemaError(f"schema version {version} is newer than {CURRENT_VERSION}; "
                              "nothing to migrate", path=str(self.path))
        with self.transaction():
            for _, sql in self._plan():
                self._conn.execute(sql)
            if version == CURRENT_VERSION:
                return
            # GAIA's own steps rewrite the one version row (UPDATE without WHERE); a v1
            # file without a row gets one.
            has_row = self._conn.execute("SELECT COUNT(*) FROM schema_version").fetchone()[0]
            if has_row:
                self._conn.execute("UPDATE schema_version SET version = ?, migrated_at = ?",
                                   (CURRENT_VERSION, now_iso()))
            else:
                self._conn.execute(
                    "INSERT INTO schema_version (version, migrated_at) VALUES (?, ?)",
                    (CURRENT_VERSION, now_iso()))

    def info(self) -> StoreInfo:
        """Schema version, journal mode, embedder id and row counts per GAIA table."""
        names = self._table_names()
        counts = {t: (self._conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                      if t in names else None) for t in schema.GAIA_TABLES}
        if self.read_only:
            # An immutable read-only connection reports "delete"; the file header says
            # what the file really is (bytes 18-19 are 2 in WAL mode).
            with open(self.path, "rb") as fh:
                header = fh.read(20)
            mode = "wal" if header[18:20] == b"\x02\x02" else "delete"
        else:
            mode = self._conn.execute("PRAGMA journal_mode").fetchone()[0]
        sessions = (self._conn.execute("SELECT COUNT(DISTINCT session_id) FROM tool_history")
                    .fetchone()[0] if "tool_history" in names else 0)
        return StoreInfo(path=str(self.path), schema_version=self.schema_version(),
                         journal_mode=mode, read_only=self.read_only,
                         embedder_id=self.get_meta("embedder_id") if "meta" in names else None,
                         tool_history_sessions=sessions, rows=counts,
                         synthesis=self._synthesis_state(sessions) if {
                             "synthesis_marks", "tool_history"} <= names else None,
                         synthesis_watermark=self.synthesis_watermark())

    def _synthesis_state(self, sessions: int) -> dict[str, int]:
        """How much of the history GAIA's passes consumed, by the outcome of its mark."""
        known = "SELECT DISTINCT session_id FROM tool_history"
        out = {str(o): int(n) for o, n in self._conn.execute(
            f"SELECT outcome, COUNT(*) FROM synthesis_marks WHERE session_id IN ({known}) "
            "GROUP BY outcome ORDER BY outcome")}
        out["not_consumed"] = sessions - sum(out.values())
        out["orphan_marks"] = int(self._conn.execute(
            f"SELECT COUNT(*) FROM synthesis_marks WHERE session_id NOT IN ({known})"
        ).fetchone()[0])
        return out

    # ------------------------------------------------------------------ meta
    def get_meta(self, key: str) -> str | None:
        """A value from GAIA's ``meta`` table (e.g. ``embedder_id``), or None."""
        if "meta" not in self._table_names():
            return None
        row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    def set_meta(self, key: str, value: str) -> None:
        """Write one ``meta`` value."""
        self._require_writable()
        with self.transaction():
            self._conn.execute("INSERT INTO meta (key, value) VALUES (?, ?) "
                               "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                               (key, value))

    # ------------------------------------------------------------------ tool_history
    def log_tool_call(
        self,
        session_id: str,
        tool_name: str,
        args: Any = None,
        result_summary: str | None = None,
        success: bool = True,
        *,
        error: str | None = None,
        duration_ms: int | None = None,
        timestamp: str | None = None,
    ) -> int:
        """Append one tool call as GAIA logs it and return its row id.

        ``args`` may be a mapping (serialised as GAIA does, ``json.dumps(default=str)``;
        empty -> NULL) or an already-serialised string. ``args``, ``result_summary`` and
        ``error`` are truncated to GAIA's 500 characters.
        """
        self._require_writable()
        args_text = serialize_args(args)
        with self.transaction():
            cur = self._conn.execute(
                "INSERT INTO tool_history (session_id, tool_name, args, result_summary, "
                "success, error, duration_ms, timestamp) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (session_id, tool_name, _truncate(args_text), _truncate(result_summary),
                 int(bool(success)), _truncate(error), duration_ms, timestamp or now_iso()))
        return int(cur.lastrowid or 0)

    def add_tool_calls(self, calls: Iterable[ToolCall]) -> int:
        """Append many calls in one transaction (all or none); returns how many."""
        n = 0
        with self.transaction():
            for c in calls:
                self.log_tool_call(c.session_id, c.tool_name, c.args, c.result_summary,
                                   c.success, error=c.error, duration_ms=c.duration_ms,
                                   timestamp=c.timestamp)
                n += 1
        return n

    def tool_calls(self, session_id: str | None = None, *, after_id: int | None = None
                   ) -> list[ToolCall]:
        """Tool calls in insertion order, optionally of one session or after a row id."""
        sql = ("SELECT id, session_id, tool_name, args, result_summary, success, error, "
               "duration_ms, timestamp FROM tool_history")
        cond, params = _filters(session=("session_id = ?", session_id),
                                after=("id > ?", after_id))
        if cond:
            sql += " WHERE " + " AND ".join(cond)
        sql += " ORDER BY id"
        return [ToolCall(id=r[0], session_id=r[1], tool_name=r[2], args=r[3],
                         result_summary=r[4], success=bool(r[5]), error=r[6],
                         duration_ms=r[7], timestamp=r[8])
                for r in self._conn.execute(sql, params)]

    def session_ids(self) -> list[str]:
        """Sessions that have tool calls, in order of their first call."""
        rows = self._conn.execute(
            "SELECT session_id FROM tool_history GROUP BY session_id ORDER BY MIN(id)")
        return [r[0] for r in rows]

    def sessions_with_calls(self, session_ids: Iterable[str]) -> set[str]:
        """Those of ``session_ids`` that have tool_history rows (provenance checks)."""
        found: set[str] = set()
        for marks, chunk in _in_chunks(dict.fromkeys(session_ids)):
            found.update(r[0] for r in self._conn.execute(
                f"SELECT DISTINCT session_id FROM tool_history WHERE session_id IN ({marks})",
                chunk))
        return found

    # ------------------------------------------------------------------ raw access
    def execute(self, sql: str, params: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
        """Run a read query and return all rows (for notebooks and analyses)."""
        if not sql.lstrip().lower().startswith(("select", "with", "pragma")):
            raise StoreError("execute() is for reads; use the store's methods to write",
                             path=str(self.path))
        return self._conn.execute(sql, tuple(params)).fetchall()

