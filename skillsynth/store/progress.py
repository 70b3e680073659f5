"""Synthesis progress: GAIA 0.25.1's ``synthesis_marks`` and watermark (a part of MemoryStore).

A pass marks every session it handed to the distiller (``distilled`` or ``unusable``) and
every session in its window that has no goal (``unusable``: no later session can give it
one); marked sessions are never clustered again. The watermark (``meta``) is the newest
call time below which every session is consumed, so the next pass's window starts there.
``reset_synthesis_progress`` forgets both: the explicit retry after a model or threshold
change.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import StoreError
from . import schema
from .rows import _in_chunks, now_iso

__all__ = ["Mark", "SynthesisProgress"]


@dataclass(frozen=True)
class Mark:
    """One ``synthesis_marks`` row: a session a pass consumed, and how."""

    session_id: str
    outcome: str
    goal: str | None
    detail: str | None
    marked_at: str


class SynthesisProgress:
    """MemoryStore's synthesis-progress methods."""

    _conn: sqlite3.Connection
    path: Path

    if TYPE_CHECKING:
        def transaction(self) -> AbstractContextManager[None]: ...
        def _table_names(self) -> set[str]: ...
        def get_meta(self, key: str) -> str | None: ...
        def set_meta(self, key: str, value: str) -> None: ...

    def has_synthesis_progress(self) -> bool:
        """Whether the file has ``synthesis_marks`` (schema v5 and later)."""
        return "synthesis_marks" in self._table_names()

    def synthesis_watermark(self) -> str | None:
        """The stored watermark, or None when no pass has consumed anything yet."""
        return self.get_meta(schema.SYNTHESIS_WATERMARK_KEY)

    def set_synthesis_watermark(self, watermark: str) -> None:
        """Store the watermark (an ISO time; an empty one would re-read all history)."""
        if not str(watermark or "").strip():
            raise StoreError("the synthesis watermark must be a timestamp, got an empty one",
                             path=str(self.path))
        self.set_meta(schema.SYNTHESIS_WATERMARK_KEY, str(watermark))

    def synthesis_marks(self, session_ids: Iterable[str] | None = None) -> dict[str, Mark]:
        """The marks, by session id (only those of ``session_ids`` when given).

        A file without the table (older than v5) has none.
        """
        if not self.has_synthesis_progress():
            return {}
        cols = "session_id, outcome, goal, detail, marked_at"
        if session_ids is None:
            rows = self._conn.execute(f"SELECT {cols} FROM synthesis_marks").fetchall()
        else:
            rows = []
            for marks, chunk in _in_chunks(s for s in dict.fromkeys(session_ids) if s):
                rows += self._conn.execute(
                    f"SELECT {cols} FROM synthesis_marks WHERE session_id IN ({marks})",
                    chunk).fetchall()
        return {r[0]: Mark(*r) for r in rows}

    def mark_sessions(self, session_ids: Iterable[str], outcome: str, *,
                      goal: str | None = None, detail: str | None = None) -> int:
        """Mark sessions consumed (one transaction; a re-mark replaces, as GAIA's does).

        Returns:
            How many sessions were marked.
        """
        if outcome not in schema.SYNTHESIS_OUTCOMES:
            raise StoreError(f"synthesis mark outcome must be one of "
                             f"{', '.join(schema.SYNTHESIS_OUTCOMES)}, got {outcome!r}",
                             path=str(self.path))
        ids = [s for s in dict.fromkeys(session_ids) if s]
        if not ids:
            return 0
        now = now_iso()
        with self.transaction():
            self._conn.executemany(
                "INSERT INTO synthesis_marks (session_id, outcome, goal, detail, marked_at) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT(session_id) DO UPDATE SET "
                "outcome = excluded.outcome, goal = excluded.goal, "
                "detail = excluded.detail, marked_at = excluded.marked_at",
                [(s, outcome, goal, detail, now) for s in ids])
        return len(ids)

    def reset_synthesis_progress(self) -> dict[str, int | bool]:
        """Forget every mark and the watermark, so the next pass re-reads all history.

        Returns:
            ``{"marks_cleared": n, "watermark_cleared": bool}`` (GAIA's own answer).
        """
        with self.transaction():
            marks = self._conn.execute("DELETE FROM synthesis_marks").rowcount or 0
            wm = self._conn.execute("DELETE FROM meta WHERE key = ?",
                                    (schema.SYNTHESIS_WATERMARK_KEY,)).rowcount
        return {"marks_cleared": int(marks), "watermark_cleared": bool(wm)}
