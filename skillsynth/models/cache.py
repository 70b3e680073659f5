"""The model-call cache: a SQLite file keyed on everything that determines an answer.

A key covers the backend, the model, the sampling parameters, the prompt version and the
messages or inputs; it leaves out what does not change the answer (base URL and port,
timeouts, retries). A sweep therefore re-uses every distillation and embedding it has
already paid for, across runs and across the random ports of the embedded servers.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import re
import sqlite3
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

from ..errors import StoreError

#: How long opening a cache waits out other processes opening it at the same moment.
_OPEN_TIMEOUT_S = 30.0

__all__ = ["CACHE_SCHEMA", "CacheStats", "CallCache", "ImportCounts", "cache_key",
           "export_answers", "file_sha256", "import_answers"]

#: The cache's one table (also made by copies a Dask worker keeps, see evaluation.shipping).
CACHE_SCHEMA = """
CREATE TABLE IF NOT EXISTS calls (
    key        TEXT PRIMARY KEY,
    kind       TEXT NOT NULL,
    model      TEXT NOT NULL,
    value      BLOB NOT NULL,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
)
"""


def file_sha256(path: str | Path) -> str:
    """The sha256 of a file's bytes, read in 1 MiB chunks (model files, corpus sources)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def cache_key(**parts: Any) -> str:
    """A stable digest of the parts (canonical JSON: sorted keys, no whitespace)."""
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class CacheStats:
    """Hits and misses since this cache object was opened, and entries on disk."""

    hits: int
    misses: int
    entries: int

    @property
    def hit_rate(self) -> float | None:
        """hits / (hits + misses), or None before the first lookup."""
        n = self.hits + self.misses
        return self.hits / n if n else None


class CallCache:
    """A persistent cache of model answers in a SQLite file (safe across threads)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + _OPEN_TIMEOUT_S
        while True:
            conn = None
            try:
                conn = sqlite3.connect(str(self.path), check_same_thread=False,
                                       isolation_level=None)
                conn.execute("PRAGMA busy_timeout=5000")
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute(CACHE_SCHEMA)
                self._conn = conn
                break
            except sqlite3.OperationalError as exc:
                # processes opening a new cache at once race for the switch to WAL, which
                # SQLite reports as locked without waiting on the busy timeout
                if conn is not None:
                    conn.close()
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise StoreError(f"cannot open the call cache: {exc}",
                                     path=str(self.path)) from exc
                time.sleep(0.05)
            except sqlite3.DatabaseError as exc:
                raise StoreError(f"cannot open the call cache: {exc}",
                                 path=str(self.path)) from exc
        self._lock = threading.Lock()
        self._hits = 0
        self._misses = 0

    def get(self, key: str) -> bytes | None:
        """The cached value for ``key`` (counted as a hit), or None (a miss)."""
        with self._lock:
            row = self._conn.execute("SELECT value FROM calls WHERE key = ?", (key,)).fetchone()
            if row is None:
                self._misses += 1
                return None
            self._hits += 1
            return bytes(row[0])

    def put(self, key: str, value: bytes, *, kind: str, model: str) -> bytes:
        """Store an answer and return the stored one: an existing entry wins.

        Answers are immutable. Two processes that asked the same question at once (sweep
        workers) may have got different answers from the server; both then use the one
        stored first, so every run that reads this cache sees the same answer.
        """
        with self._lock:
            self._conn.execute("INSERT OR IGNORE INTO calls (key, kind, model, value) "
                               "VALUES (?, ?, ?, ?)", (key, kind, model, value))
            row = self._conn.execute("SELECT value FROM calls WHERE key = ?", (key,)).fetchone()
        return bytes(row[0]) if row is not None else value

    def stats(self) -> CacheStats:
        """Counts for reports (``cache hits`` in a pass report, hit rate in a sweep)."""
        with self._lock:
            n = self._conn.execute("SELECT COUNT(*) FROM calls").fetchone()[0]
            return CacheStats(hits=self._hits, misses=self._misses, entries=int(n))

    def close(self) -> None:
        """Close the file (idempotent)."""
        with self._lock:
            self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- answers that travel: a sweep's model answers shipped beside its spec ------------------

_KEY = re.compile(r"[0-9a-f]{64}")
_KINDS = ("chat", "embed")


@dataclass(frozen=True)
class ImportCounts:
    """What an import did: answers added, already here alike, already here differing."""

    added: int
    present: int
    differing: int


def export_answers(cache: str | Path, out: str | Path, *, kinds: Iterable[str] = ("chat",),
                   model: str | None = None, since: str | None = None,
                   until: str | None = None) -> int:
    """Write the cache's answers to ``out`` (gzipped JSON lines, sorted by key); their count.

    Why: a live sweep costs hours of a model's time and its answers are what make it
    reproducible. Shipped with the sweep's spec and imported on another machine, they let
    the sweep resume where it stopped without asking the model again for anything it has
    answered: the key covers everything that determines an answer. ``model``, ``since`` and
    ``until`` (ISO times compared with each answer's ``created_at``; ``until`` excluded, so
    a sweep started then with the same model on the same cache is left out) narrow what is
    written. The file's bytes depend only on the answers, so a re-export of the same
    answers changes nothing in git.
    """
    kinds = tuple(kinds)
    bad = [k for k in kinds if k not in _KINDS]
    if bad or not kinds:
        raise StoreError(f"answer kinds must be among {', '.join(_KINDS)}, got {kinds}")
    sql = (f"SELECT key, kind, model, value, created_at FROM calls WHERE kind IN "
           f"({','.join('?' * len(kinds))})")
    params: list[Any] = list(kinds)
    if model is not None:
        sql += " AND model = ?"
        params.append(model)
    if since is not None:
        sql += " AND created_at >= ?"
        params.append(since)
    if until is not None:
        sql += " AND created_at < ?"
        params.append(until)
    with CallCache(cache) as c, c._lock:
        rows = c._conn.execute(sql + " ORDER BY key", params).fetchall()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    with open(tmp, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as fh:
        for key, kind, mdl, value, created in rows:
            record = {"key": key, "kind": kind, "model": mdl, "created_at": created}
            try:
                record["text"] = bytes(value).decode("utf-8")
            except UnicodeDecodeError:  # embeddings: little-endian float32
                record["b64"] = base64.b64encode(bytes(value)).decode("ascii")
            fh.write((json.dumps(record, sort_keys=True, ensure_ascii=False) + "\n")
                     .encode("utf-8"))
    tmp.replace(out)
    return len(rows)


def _read_answers(path: Path) -> list[tuple[str, str, str, bytes, str | None]]:
    """Every answer of an exported file, checked before any is stored."""
    def bad(line: int, field: str, what: str) -> StoreError:
        return StoreError(f"line {line}, field {field!r}: {what}", path=str(path))

    rows = []
    try:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise StoreError(f"not a gzipped answers file: {exc}", path=str(path)) from exc
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise bad(n, "(line)", f"not JSON: {exc.msg}") from exc
        if not isinstance(rec, dict):
            raise bad(n, "(line)", "not a JSON object")
        key, kind, mdl = rec.get("key"), rec.get("kind"), rec.get("model")
        if not isinstance(key, str) or not _KEY.fullmatch(key):
            raise bad(n, "key", "not a 64-hex-digit cache key")
        if kind not in _KINDS:
            raise bad(n, "kind", f"must be one of {', '.join(_KINDS)}, got {kind!r}")
        if not isinstance(mdl, str) or not mdl:
            raise bad(n, "model", "missing")
        if ("text" in rec) == ("b64" in rec):
            raise bad(n, "text", "an answer has exactly one of 'text' and 'b64'")
        if "text" in rec:
            if not isinstance(rec["text"], str):
                raise bad(n, "text", "not a string")
            value = rec["text"].encode("utf-8")
        else:
            try:
                value = base64.b64decode(rec["b64"], validate=True)
            except (ValueError, TypeError) as exc:
                raise bad(n, "b64", "not base64") from exc
        created = rec.get("created_at")
        rows.append((key, kind, mdl, value, created if isinstance(created, str) else None))
    return rows


def import_answers(cache: str | Path, files: Iterable[str | Path]) -> ImportCounts:
    """Add exported answers to the cache, all or none; an answer already here wins.

    Answers are immutable (see :meth:`CallCache.put`): where this cache already holds a
    different answer for a key, runs on this machine have used it, so it is kept and the
    difference counted (a machine whose llama.cpp samples differently shows up here).
    """
    rows = [row for f in files for row in _read_answers(Path(f))]
    added = present = differing = 0
    with CallCache(cache) as c, c._lock:
        conn = c._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            for key, kind, mdl, value, created in rows:
                old = conn.execute("SELECT value FROM calls WHERE key = ?", (key,)).fetchone()
                if old is not None:
                    present += bytes(old[0]) == value
                    differing += bytes(old[0]) != value
                    continue
                conn.execute("INSERT INTO calls (key, kind, model, value, created_at) VALUES "
                             "(?, ?, ?, ?, COALESCE(?, strftime('%Y-%m-%dT%H:%M:%fZ', 'now')))",
                             (key, kind, mdl, value, created))
                added += 1
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return ImportCounts(added=added, present=present, differing=differing)
