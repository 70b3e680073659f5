"""The procedures table: GAIA's v3 skill rows, written and read (a part of MemoryStore)."""

from __future__ import annotations

import json
import sqlite3
import uuid
from contextlib import AbstractContextManager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import SchemaError, StoreError
from .rows import Procedure, encode_embedding, now_iso

__all__ = ["ProcedureRows"]


class ProcedureRows:
    """MemoryStore's procedure methods (kept apart so the store module stays readable)."""

    _conn: sqlite3.Connection
    path: Path

    if TYPE_CHECKING:
        def transaction(self) -> AbstractContextManager[None]: ...
        def _require_writable(self) -> None: ...
        def _table_names(self) -> set[str]: ...
        def schema_version(self) -> int: ...

    # ------------------------------------------------------------------ procedures
    def _require_procedures(self) -> None:
        if "procedures" not in self._table_names():
            raise SchemaError(
                f"no procedures table (schema v{self.schema_version()}); migrate a copy with "
                "`skillsynth db migrate`", path=str(self.path))

    _PROC_COLS = ("id, name, when_to_use, markdown_body, tools_required, tool_sequence, "
                  "success_count, attempt_count, provenance, version, enabled, embedding, "
                  "superseded_by, created_at, last_used_at")

    def _row_to_procedure(self, r: tuple[Any, ...]) -> Procedure:
        def load(col: str, text: str | None, default: Any) -> Any:
            if text is None or text == "":
                return default
            try:
                return json.loads(text)
            except json.JSONDecodeError as exc:
                raise StoreError(f"procedures row {r[0]!r}: column {col} is not JSON: {exc}",
                                 path=str(self.path)) from exc
        tools = load("tools_required", r[4], [])
        seq = load("tool_sequence", r[5], [])
        return Procedure(
            id=r[0], name=r[1], when_to_use=r[2], markdown_body=r[3],
            tools_required=tuple(tools), tool_sequence=tuple(seq),
            success_count=int(r[6]), attempt_count=int(r[7]),
            provenance=load("provenance", r[8], {}), version=r[9], enabled=bool(r[10]),
            embedding=r[11], superseded_by=r[12], created_at=r[13], last_used_at=r[14])

    def put_procedure(self, proc: Procedure) -> Procedure:
        """Insert a procedure; assigns ``proc_<uuid hex>`` and ``created_at`` when empty.

        Returns the stored row as read back.
        """
        self._require_writable()
        self._require_procedures()
        pid = proc.id or f"proc_{uuid.uuid4().hex}"
        created = proc.created_at or now_iso()
        with self.transaction():
            try:
                self._conn.execute(
                    f"INSERT INTO procedures ({self._PROC_COLS}) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (pid, proc.name, proc.when_to_use, proc.markdown_body,
                     json.dumps(list(proc.tools_required)), json.dumps(list(proc.tool_sequence)),
                     proc.success_count, proc.attempt_count, json.dumps(proc.provenance),
                     proc.version, int(proc.enabled), proc.embedding, proc.superseded_by,
                     created, proc.last_used_at))
            except sqlite3.IntegrityError as exc:
                raise StoreError(f"cannot insert procedure {pid!r}: {exc}",
                                 path=str(self.path)) from exc
        return replace(proc, id=pid, created_at=created)

    def get_procedure(self, proc_id: str) -> Procedure | None:
        """One procedure by id, or None."""
        self._require_procedures()
        row = self._conn.execute(f"SELECT {self._PROC_COLS} FROM procedures WHERE id = ?",
                                 (proc_id,)).fetchone()
        return None if row is None else self._row_to_procedure(row)

    def procedures(self, *, active_only: bool = False) -> list[Procedure]:
        """All procedures in creation order; ``active_only`` keeps enabled, non-superseded."""
        self._require_procedures()
        sql = f"SELECT {self._PROC_COLS} FROM procedures"
        if active_only:
            sql += " WHERE enabled = 1 AND superseded_by IS NULL"
        sql += " ORDER BY created_at, id"
        return [self._row_to_procedure(r) for r in self._conn.execute(sql)]

    def search_procedures(self, text: str | None = None) -> list[Procedure]:
        """Enabled, non-superseded procedures whose name or when_to_use contains ``text``.

        Meaning-based search is :func:`skillsynth.pipeline.recall` (FAISS over the embeddings);
        this is the plain lookup a dashboard or a test uses.
        """
        procs = self.procedures(active_only=True)
        if not text:
            return procs
        needle = text.lower()
        return [p for p in procs if needle in p.name.lower() or needle in p.when_to_use.lower()]

    def _update(self, proc_id: str, sql: str, params: tuple[Any, ...]) -> None:
        self._require_writable()
        self._require_procedures()
        with self.transaction():
            cur = self._conn.execute(sql, (*params, proc_id))
            if cur.rowcount == 0:
                raise StoreError(f"no procedure with id {proc_id!r}", path=str(self.path))

    def supersede_procedure(self, old_id: str, new_id: str) -> None:
        """Mark ``old_id`` as superseded by ``new_id`` (Zep lineage); nothing is deleted."""
        if old_id == new_id:
            raise StoreError("a procedure cannot supersede itself", path=str(self.path))
        if self.get_procedure(new_id) is None:
            raise StoreError(f"no procedure with id {new_id!r} to supersede with",
                             path=str(self.path))
        self._update(old_id, "UPDATE procedures SET superseded_by = ? WHERE id = ?", (new_id,))

    def withdraw_procedure(self, proc_id: str) -> list[str]:
        """Delete a procedure written moments ago and undo its supersede; returns the ids of
        the rows it had superseded (active again).

        GAIA never deletes a procedure. This is for skillsynth's verification inside GAIA's
        own pass (``gaia-shipped`` with ``verify``), which judges a row only after GAIA wrote
        it and must undo a rejected one. ``put_skill`` writes the ``procedures`` row alone
        (no FTS mirror, no trigger: :mod:`skillsynth.store.schema`), and an UPDATE sets the
        prior row's ``superseded_by``; both are undone in one transaction.

        Raises:
            StoreError: no procedure has that id (nothing is changed).
        """
        self._require_writable()
        self._require_procedures()
        with self.transaction():
            prior = [r for (r,) in self._conn.execute(
                "SELECT id FROM procedures WHERE superseded_by = ? ORDER BY id", (proc_id,))]
            self._conn.execute("UPDATE procedures SET superseded_by = NULL "
                               "WHERE superseded_by = ?", (proc_id,))
            if self._conn.execute("DELETE FROM procedures WHERE id = ?",
                                  (proc_id,)).rowcount == 0:
                raise StoreError(f"no procedure with id {proc_id!r} to withdraw",
                                 path=str(self.path))
        return prior

    def touch_procedure(self, proc_id: str, when: str | None = None) -> None:
        """Set ``last_used_at`` (a recall used it)."""
        self._update(proc_id, "UPDATE procedures SET last_used_at = ? WHERE id = ?",
                     (when or now_iso(),))

    def set_procedure_enabled(self, proc_id: str, enabled: bool) -> None:
        """Enable or disable without deleting; a disabled procedure is never recalled."""
        self._update(proc_id, "UPDATE procedures SET enabled = ? WHERE id = ?", (int(enabled),))

    def record_outcome(self, proc_id: str, success: bool) -> None:
        """Count one more attempt that used the procedure, and a success if it succeeded."""
        self._update(proc_id, "UPDATE procedures SET attempt_count = attempt_count + 1, "
                     "success_count = success_count + ? WHERE id = ?", (int(bool(success)),))

    def set_procedure_embedding(self, proc_id: str, vector: Any) -> None:
        """Store the when_to_use embedding (GAIA's BLOB format)."""
        self._update(proc_id, "UPDATE procedures SET embedding = ? WHERE id = ?",
                     (encode_embedding(vector),))

