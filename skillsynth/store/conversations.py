"""Conversation turns: GAIA's ``conversations`` table and its FTS5 mirror (a part of
MemoryStore). A session's goal is its first user turn, so synthesis reads goals from here.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from . import schema
from .rows import Turn, _filters, _in_chunks, now_iso

__all__ = ["ConversationRows"]


class ConversationRows:
    """MemoryStore's conversation methods."""

    _conn: sqlite3.Connection

    if TYPE_CHECKING:
        def transaction(self) -> AbstractContextManager[None]: ...
        def _require_writable(self) -> None: ...
        def _columns(self, table: str) -> list[str]: ...

    def add_turn(self, session_id: str, role: str, content: str, *,
                 context: str = "global", timestamp: str | None = None) -> int:
        """Append one conversation turn as GAIA 0.25.1 stores it: cut to 4000 characters,
        an empty or blank one skipped (returns 0). The FTS mirror is GAIA's trigger's."""
        self._require_writable()
        if not content or not content.strip():
            return 0
        with self.transaction():
            cur = self._conn.execute(
                "INSERT INTO conversations (session_id, role, content, context, timestamp) "
                "VALUES (?, ?, ?, ?, ?)",
                (session_id, role, content[:schema.TURN_TEXT_LIMIT], context,
                 timestamp or now_iso()))
        return int(cur.lastrowid or 0)

    def turns(self, session_id: str | None = None, *, role: str | None = None) -> list[Turn]:
        """Conversation turns in insertion order, optionally filtered."""
        cond, params = _filters(session=("session_id = ?", session_id),
                                role=("role = ?", role))
        return self._select_turns(cond, params)

    def _select_turns(self, cond: list[str], params: list[Any]) -> list[Turn]:
        consolidated = ("consolidated_at" if "consolidated_at" in self._columns("conversations")
                        else "NULL")
        sql = (f"SELECT id, session_id, role, content, context, timestamp, {consolidated} "
               "FROM conversations")
        if cond:
            sql += " WHERE " + " AND ".join(cond)
        return [Turn(id=r[0], session_id=r[1], role=r[2], content=r[3], context=r[4],
                     timestamp=r[5], consolidated_at=r[6])
                for r in self._conn.execute(sql + " ORDER BY id", params)]

    def _turns_in(self, column: str, values: Iterable[Any], role: str | None = None
                  ) -> list[Turn]:
        """Turns whose ``column`` is one of ``values`` (chunked under SQLite's parameter cap)."""
        out: list[Turn] = []
        for marks, chunk in _in_chunks(values):
            cond = [f"{column} IN ({marks})"]
            if role is not None:
                cond.append("role = ?")
            out += self._select_turns(cond, [*chunk, *([role] if role is not None else [])])
        return sorted(out, key=lambda t: t.id or 0)

    def first_user_turns(self, sessions: Iterable[str] | None = None) -> dict[str, Turn]:
        """Each session's first ``role='user'`` turn: GAIA's definition of its goal.

        ``sessions`` limits the read to those sessions (an incremental pass needs no more).
        """
        turns = (self.turns(role="user") if sessions is None
                 else self._turns_in("session_id", sessions, role="user"))
        out: dict[str, Turn] = {}
        for t in turns:
            out.setdefault(t.session_id, t)
        return out

    def search_conversations(self, query: str, limit: int = 20) -> list[Turn]:
        """Full-text search over ``conversations_fts`` (GAIA's FTS5 mirror)."""
        words = [w for w in "".join(c if c.isalnum() or c.isspace() else " "
                                    for c in query).split() if w]
        if not words:
            return []
        match = " AND ".join(f'"{w}"' for w in words)
        rows = self._conn.execute(
            "SELECT rowid FROM conversations_fts WHERE conversations_fts MATCH ? "
            "ORDER BY rank LIMIT ?", (match, limit)).fetchall()
        return self._turns_in("id", [r[0] for r in rows])
