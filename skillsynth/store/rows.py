"""The rows of GAIA's ``memory.db`` as frozen dataclasses, and the helpers that write them
the way GAIA does (timestamps, serialized arguments, embeddings, truncation)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import numpy as np

from ..errors import StoreError
from . import schema

__all__ = ["MigrationReport", "Procedure", "StoreInfo", "ToolCall", "Turn", "decode_embedding",
           "encode_embedding", "now_iso", "serialize_args"]

def now_iso() -> str:
    """Local time, ISO-8601 with offset and microseconds: GAIA's timestamp format."""
    return datetime.now().astimezone().isoformat(timespec="microseconds")


def serialize_args(args: Any) -> str | None:
    """GAIA's ``args`` text: JSON of at most 500 characters that always parses.

    As amd-gaia 0.25.1 logs a call: an empty value is NULL; a mapping is
    ``json.dumps(default=str)`` and, when that is too long, its long values are shortened
    (to 200, then 60, then 0 characters, ``...`` appended, ``"_truncated": true`` added),
    and as a last resort only the keys that fit are kept. A string is taken as already
    serialised: kept when it fits, bounded the same way when it is a long JSON object, cut
    at 500 otherwise (it was not JSON to begin with).
    """
    if not args:
        return None
    if isinstance(args, str):
        if len(args) <= schema.TOOL_TEXT_LIMIT:
            return args
        try:
            parsed = json.loads(args)
        except json.JSONDecodeError:
            return args[:schema.TOOL_TEXT_LIMIT]
        return _bounded(parsed) if isinstance(parsed, dict) else args[:schema.TOOL_TEXT_LIMIT]
    text = json.dumps(args, default=str)
    if len(text) <= schema.TOOL_TEXT_LIMIT or not isinstance(args, Mapping):
        return text[:schema.TOOL_TEXT_LIMIT]
    return _bounded(args)


def _bounded(args: Mapping[Any, Any]) -> str:
    """A long mapping's JSON shortened value by value until it fits (GAIA 0.25.1's rule)."""
    limit_chars = schema.TOOL_TEXT_LIMIT
    for keep in (200, 60, 0):
        short: dict[Any, Any] = {}
        for key, value in args.items():
            as_text = value if isinstance(value, str) else json.dumps(value, default=str)
            short[key] = as_text[:keep] + "..." if len(as_text) > keep else value
        short["_truncated"] = True
        text = json.dumps(short, default=str)
        if len(text) <= limit_chars:
            return text
    names: list[str] = []
    for name in sorted(str(k) for k in args):
        if len(json.dumps({"_truncated": True, "keys": [*names, name]})) > limit_chars:
            break
        names.append(name)
    return json.dumps({"_truncated": True, "keys": names})


def encode_embedding(vector: Any) -> bytes:
    """Encode a vector as GAIA stores it: little-endian float32, L2-normalised.

    Raises:
        StoreError: if the vector is not 1-D, not finite, or not of unit length.
    """
    arr = np.asarray(vector, dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0:
        raise StoreError(f"an embedding must be a non-empty 1-D vector, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise StoreError("an embedding contains NaN or infinity")
    norm = float(np.linalg.norm(arr))
    if abs(norm - 1.0) > 1e-3:
        raise StoreError(f"GAIA stores L2-normalised embeddings; this one has norm {norm:.4f}")
    return arr.astype("<f4").tobytes()


def decode_embedding(blob: bytes) -> np.ndarray:
    """Decode a GAIA embedding BLOB into a float32 vector (native byte order)."""
    if len(blob) % 4:
        raise StoreError(f"embedding BLOB of {len(blob)} bytes is not a float32 vector")
    return np.frombuffer(blob, dtype="<f4").astype(np.float32)


@dataclass(frozen=True)
class ToolCall:
    """One ``tool_history`` row: a tool call the agent made.

    The one model of GAIA's rows: the store reads and writes it, and every importer builds
    it (:class:`~skillsynth.corpora.records.SessionRecord`); ``id`` is the store's row id
    (None for a row not yet written).
    """

    session_id: str
    tool_name: str
    args: str | None
    result_summary: str | None
    success: bool
    timestamp: str
    error: str | None = None
    duration_ms: int | None = None
    id: int | None = None

    def as_stored(self) -> ToolCall:
        """This row as the store holds it once written: GAIA's ``args`` text, ``args``,
        ``result_summary`` and ``error`` cut at GAIA's 500 characters, no row id."""
        return replace(self, args=_truncate(serialize_args(self.args)),
                       result_summary=_truncate(self.result_summary),
                       error=_truncate(self.error), success=bool(self.success), id=None)


@dataclass(frozen=True)
class Turn:
    """One ``conversations`` row. The goal of a session is its first ``user`` turn.

    Like :class:`ToolCall`, what the store and every importer share; an imported turn is
    written with GAIA's default ``context``.
    """

    session_id: str
    role: str
    content: str
    timestamp: str
    context: str = "global"
    consolidated_at: str | None = None
    id: int | None = None


@dataclass(frozen=True)
class Procedure:
    """One ``procedures`` row (#887): a synthesized skill and its track record.

    ``tools_required`` and ``tool_sequence`` are the decoded JSON columns; ``embedding``
    is the raw BLOB (use :meth:`vector`).
    """

    name: str
    when_to_use: str
    markdown_body: str
    tools_required: tuple[str, ...] = ()
    tool_sequence: tuple[dict[str, Any], ...] = ()
    success_count: int = 0
    attempt_count: int = 0
    provenance: dict[str, Any] = field(default_factory=dict)
    version: str = "1.0.0"
    enabled: bool = True
    embedding: bytes | None = None
    superseded_by: str | None = None
    created_at: str = ""
    last_used_at: str | None = None
    id: str = ""

    def vector(self) -> np.ndarray | None:
        """The decoded embedding, or ``None`` when the row has none."""
        return None if self.embedding is None else decode_embedding(self.embedding)

    @property
    def active(self) -> bool:
        """Recallable: enabled and not superseded."""
        return self.enabled and self.superseded_by is None


@dataclass(frozen=True)
class MigrationReport:
    """What :meth:`MemoryStore.migrate` did (or, with ``dry_run``, would do)."""

    path: str
    from_version: int
    to_version: int
    steps: tuple[str, ...]
    dry_run: bool = False


def _truncate(text: str | None, limit: int = schema.TOOL_TEXT_LIMIT) -> str | None:
    if text is None:
        return None
    return text if len(text) <= limit else text[:limit]


@dataclass(frozen=True)
class StoreInfo:
    """What ``skillsynth db info`` shows about one ``memory.db``.

    Attributes:
        path: the file.
        schema_version: GAIA's schema version (1 to 7; a newer one is read as it is).
        journal_mode: ``wal`` or ``delete`` (read from the file header when read-only).
        read_only: the store was opened read-only.
        embedder_id: the embedder whose vectors the store holds (None before any).
        tool_history_sessions: sessions with at least one tool call.
        rows: row count per GAIA table (None: the table is absent at this version).
        synthesis: GAIA's pass bookkeeping (v5+; None before): sessions with tool calls a
            pass consumed, by outcome (``distilled``, ``unusable``), ``not_consumed``, and
            ``orphan_marks`` (marks of sessions with no tool call left: ignored, counted).
        synthesis_watermark: the newest call time a pass fully consumed (None: none yet).
    """

    path: str
    schema_version: int
    journal_mode: str
    read_only: bool
    embedder_id: str | None
    tool_history_sessions: int
    rows: dict[str, int | None]
    synthesis: dict[str, int] | None = None
    synthesis_watermark: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {"path": self.path, "schema_version": self.schema_version,
                "journal_mode": self.journal_mode, "read_only": self.read_only,
                "embedder_id": self.embedder_id,
                "tool_history_sessions": self.tool_history_sessions, "rows": dict(self.rows),
                "synthesis": self.synthesis, "synthesis_watermark": self.synthesis_watermark}


def _in_chunks(values: Iterable[Any], size: int = 500) -> Iterator[tuple[str, list[Any]]]:
    """``(placeholders, values)`` pairs for ``IN (...)`` under SQLite's parameter cap."""
    vals = list(values)
    for i in range(0, len(vals), size):
        chunk = vals[i:i + size]
        yield ", ".join("?" * len(chunk)), chunk


def _filters(**conditions: tuple[str, Any]) -> tuple[list[str], list[Any]]:
    """The ``WHERE`` terms and parameters of the ``(term, value)`` pairs whose value is set
    (a ``None`` value means no filter on that column)."""
    set_ = [(term, value) for term, value in conditions.values() if value is not None]
    return [t for t, _ in set_], [v for _, v in set_]
