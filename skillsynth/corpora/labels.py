"""The labels file: ground truth kept apart from the memory database under test.

A corpus is a GAIA ``memory.db`` plus ``<db>.labels.sqlite``. Only scoring reads the
labels; the pipeline never opens this file. Besides one row per session it records every
import or generation that wrote to the corpus (``corpus_builds``), so a corpus says how it
was produced.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from ..errors import StoreError

__all__ = ["LabelStore", "SessionLabel", "labels_path_for"]

LABELS_VERSION = 2

_SCHEMA = """
CREATE TABLE IF NOT EXISTS labels_version (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS session_labels (
    session_id      TEXT PRIMARY KEY,
    source          TEXT NOT NULL,
    task_id         TEXT,
    attempt         INTEGER,
    success         INTEGER,
    reward          REAL,
    essential_steps TEXT,
    actions         TEXT,
    started_at      TEXT,
    flags           TEXT NOT NULL DEFAULT '[]',
    extra           TEXT NOT NULL DEFAULT '{}',
    source_file     TEXT,
    source_record   TEXT
);
CREATE INDEX IF NOT EXISTS idx_session_labels_task ON session_labels(task_id, started_at);
CREATE TABLE IF NOT EXISTS corpus_builds (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    kind        TEXT NOT NULL,
    started_at  TEXT NOT NULL,
    finished_at TEXT,
    details     TEXT NOT NULL
);
"""
_COLUMNS = ("session_id", "source", "task_id", "attempt", "success", "reward",
            "essential_steps", "actions", "started_at", "flags", "extra", "source_file",
            "source_record")


def labels_path_for(db_path: str | Path) -> Path:
    """The default labels file beside a corpus database: ``<db>.labels.sqlite``."""
    p = Path(db_path)
    return p.with_name(p.name + ".labels.sqlite")


@dataclass(frozen=True)
class SessionLabel:
    """What scoring may know about one session.

    Attributes:
        session_id: the session in the corpus database.
        source: the corpus kind (``synthetic``, ``taubench``, ``tau2``, ``gaia-db``, ``jsonl``).
        task_id: the task (or synthetic family) the session attempted; None when unknown
            (a user's own GAIA database), and such sessions are history, never probes.
        attempt: 1-based attempt index within the task, in time order (None when unknown).
        success: session outcome, where known.
        reward: the benchmark's reward, where it has one.
        essential_steps: ground-truth tool names, in order, where known.
        actions: ground-truth calls (``{"name", "arguments"}``), where the source has them.
        started_at: the session's first timestamp (orders attempts).
        flags: what the importer had to do (``synthetic-timestamps``, ``non-json-args``, ...).
        extra: source facts scoring may want (agent model, termination reason, trial).
        source_file, source_record: where the session came from.
    """

    session_id: str
    source: str
    task_id: str | None
    attempt: int | None
    success: bool | None = None
    reward: float | None = None
    essential_steps: tuple[str, ...] | None = None
    actions: tuple[dict[str, Any], ...] | None = None
    started_at: str | None = None
    flags: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)
    source_file: str | None = None
    source_record: str | None = None

    def _row(self) -> tuple[Any, ...]:
        return (self.session_id, self.source, self.task_id, self.attempt,
                None if self.success is None else int(self.success), self.reward,
                None if self.essential_steps is None else json.dumps(list(self.essential_steps)),
                None if self.actions is None else json.dumps(list(self.actions), sort_keys=True),
                self.started_at, json.dumps(list(self.flags)),
                json.dumps(self.extra, sort_keys=True), self.source_file, self.source_record)

    @classmethod
    def _from_row(cls, r: sqlite3.Row) -> SessionLabel:
        steps, actions = r["essential_steps"], r["actions"]
        return cls(session_id=r["session_id"], source=r["source"], task_id=r["task_id"],
                   attempt=r["attempt"],
                   success=None if r["success"] is None else bool(r["success"]),
                   reward=r["reward"],
                   essential_steps=None if steps is None else tuple(json.loads(steps)),
                   actions=None if actions is None else tuple(json.loads(actions)),
                   started_at=r["started_at"], flags=tuple(json.loads(r["flags"])),
                   extra=json.loads(r["extra"]), source_file=r["source_file"],
                   source_record=r["source_record"])


class LabelStore:
    """A SQLite labels file (never a table in the memory database)."""

    def __init__(self, path: str | Path, *, create: bool = False):
        self.path = Path(path)
        if not create and not self.path.exists():
            raise StoreError("no labels file", path=str(self.path))
        try:
            self._conn = sqlite3.connect(str(self.path), isolation_level=None)
            self._conn.row_factory = sqlite3.Row
            cols = {r[1] for r in self._conn.execute("PRAGMA table_info(session_labels)")}
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"not a labels file: {exc}", path=str(self.path)) from exc
        if cols and not set(_COLUMNS) <= cols:
            self._conn.close()
            raise StoreError("labels file from an older skillsynth (missing columns "
                             f"{sorted(set(_COLUMNS) - cols)}); rebuild the corpus",
                             path=str(self.path))
        self._conn.executescript(_SCHEMA)
        if self._conn.execute("SELECT COUNT(*) FROM labels_version").fetchone()[0] == 0:
            self._conn.execute("INSERT INTO labels_version VALUES (?)", (LABELS_VERSION,))

    def add(self, labels: Iterable[SessionLabel]) -> int:
        """Insert labels in one transaction; returns how many."""
        rows = [x._row() for x in labels]
        marks = ",".join("?" * len(_COLUMNS))
        self._conn.execute("BEGIN")
        try:
            self._conn.executemany(
                f"INSERT INTO session_labels ({','.join(_COLUMNS)}) VALUES ({marks})", rows)
        except sqlite3.IntegrityError as exc:
            self._conn.execute("ROLLBACK")
            raise StoreError(f"duplicate session label: {exc}", path=str(self.path)) from exc
        self._conn.execute("COMMIT")
        return len(rows)

    def all(self) -> list[SessionLabel]:
        """Every label, by task then attempt (unlabelled sessions last)."""
        rows = self._conn.execute(
            "SELECT * FROM session_labels ORDER BY task_id IS NULL, task_id, attempt, "
            "started_at, session_id")
        return [SessionLabel._from_row(r) for r in rows]

    def get(self, session_id: str) -> SessionLabel | None:
        """One session's label, or None."""
        r = self._conn.execute("SELECT * FROM session_labels WHERE session_id = ?",
                               (session_id,)).fetchone()
        return None if r is None else SessionLabel._from_row(r)

    def session_ids(self) -> set[str]:
        """The labelled sessions."""
        return {r[0] for r in self._conn.execute("SELECT session_id FROM session_labels")}

    def count_from_other_files(self, names: Iterable[str]) -> int:
        """Labelled sessions whose ``source_file`` is none of ``names`` (file names)."""
        own = list(dict.fromkeys(names))
        marks = ",".join("?" * len(own)) or "NULL"
        return int(self._conn.execute(
            f"SELECT COUNT(*) FROM session_labels WHERE source_file IS NULL "
            f"OR source_file NOT IN ({marks})", own).fetchone()[0])

    def renumber_attempts(self, source: str) -> None:
        """Set ``attempt`` to each session's 1-based rank within its task by ``started_at``.

        Sources whose attempts come from several files (tau2: one file per agent) only know
        the order once everything is imported; ties keep the session id order.
        """
        self._conn.execute("BEGIN")
        self._conn.execute(
            "UPDATE session_labels SET attempt = (SELECT rank FROM (SELECT session_id AS sid, "
            "ROW_NUMBER() OVER (PARTITION BY task_id ORDER BY started_at, session_id) AS rank "
            "FROM session_labels WHERE source = ? AND task_id IS NOT NULL) "
            "WHERE sid = session_labels.session_id) "
            "WHERE source = ? AND task_id IS NOT NULL", (source, source))
        self._conn.execute("COMMIT")

    def record_build(self, kind: str, started_at: str, finished_at: str,
                     details: dict[str, Any]) -> None:
        """Append how (part of) this corpus was produced."""
        self._conn.execute(
            "INSERT INTO corpus_builds (kind, started_at, finished_at, details) "
            "VALUES (?, ?, ?, ?)", (kind, started_at, finished_at,
                                   json.dumps(details, sort_keys=True, default=str)))

    def builds(self) -> list[dict[str, Any]]:
        """Every recorded import or generation, oldest first."""
        return [{"kind": r["kind"], "started_at": r["started_at"],
                 "finished_at": r["finished_at"], **json.loads(r["details"])}
                for r in self._conn.execute("SELECT * FROM corpus_builds ORDER BY id")]

    def close(self) -> None:
        """Close the file."""
        self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
