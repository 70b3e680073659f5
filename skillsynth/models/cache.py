"""The model-call cache: a SQLite file keyed on everything that determines an answer.

A key covers the backend, the model, the sampling parameters, the prompt version and the
messages or inputs; it leaves out what does not change the answer (base URL and port,
timeouts, retries). A sweep therefore re-uses every distillation and embedding it has
already paid for, across runs and across the random ports of the embedded servers.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

from ..errors import StoreError

#: How long opening a cache waits out other processes opening it at the same moment.
_OPEN_TIMEOUT_S = 30.0

__all__ = ["CACHE_SCHEMA", "CacheStats", "CallCache", "cache_key", "file_sha256"]

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
