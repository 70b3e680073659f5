"""The labels file: ground truth kept apart from the memory database under test."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from ..errors import StoreError

__all__ = ["LabelStore", "SessionLabel", "labels_path_for"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS session_labels (
    session_id      TEXT PRIMARY KEY,
    source          TEXT NOT NULL,
    task_id         TEXT NOT NULL,
    attempt         INTEGER NOT NULL,
    success         INTEGER,
    reward          REAL,
    essential_steps TEXT,
    source_file     TEXT,
    source_record   TEXT
)
"""


def labels_path_for(db_path: str | Path) -> Path:
    """The default labels file beside a corpus database: ``<db>.labels.sqlite``."""
    p = Path(db_path)
    return p.with_name(p.name + ".labels.sqlite")


@dataclass(frozen=True)
class SessionLabel:
    """What scoring may know about one session.

    Attributes:
        session_id: the session in the corpus database.
        source: the corpus kind (``synthetic``, ``taubench``, ...).
        task_id: the task (or synthetic family) the session attempted.
        attempt: 1-based attempt index within the task, in time order.
        success: session outcome, where known.
        reward: the benchmark's reward, where it has one.
        essential_steps: ground-truth tool names, in order, where known.
        source_file, source_record: where the session came from.
    """

    session_id: str
    source: str
    task_id: str
    attempt: int
    success: bool | None = None
    reward: float | None = None
    essential_steps: tuple[str, ...] | None = None
    source_file: str | None = None
    source_record: str | None = None


class LabelStore:
    """A SQLite labels file (never a table in the memory database)."""

    def __init__(self, path: str | Path, *, create: bool = False):
        self.path = Path(path)
        if not create and not self.path.exists():
            raise StoreError("no labels file", path=str(self.path))
        self._conn = sqlite3.connect(str(self.path), isolation_level=None)
        self._conn.execute(_SCHEMA)

    def add(self, labels: Iterable[SessionLabel]) -> int:
        """Insert labels in one transaction; returns how many."""
        rows = [(x.session_id, x.source, x.task_id, x.attempt,
                 None if x.success is None else int(x.success), x.reward,
                 None if x.essential_steps is None else json.dumps(list(x.essential_steps)),
                 x.source_file, x.source_record) for x in labels]
        self._conn.execute("BEGIN")
        try:
            self._conn.executemany("INSERT INTO session_labels VALUES (?,?,?,?,?,?,?,?,?)", rows)
        except sqlite3.IntegrityError as exc:
            self._conn.execute("ROLLBACK")
            raise StoreError(f"duplicate session label: {exc}", path=str(self.path)) from exc
        self._conn.execute("COMMIT")
        return len(rows)

    def all(self) -> list[SessionLabel]:
        """Every label, by task then attempt."""
        out = []
        for r in self._conn.execute("SELECT * FROM session_labels ORDER BY task_id, attempt"):
            out.append(SessionLabel(r[0], r[1], r[2], int(r[3]),
                                    None if r[4] is None else bool(r[4]), r[5],
                                    None if r[6] is None else tuple(json.loads(r[6])), r[7], r[8]))
        return out

    def close(self) -> None:
        """Close the file."""
        self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
