"""Points that travel: a Dask sweep whose workers share no folder with the submitter.

With the ``shipped`` transport (chosen when the workers run on other hosts, or asked for),
nothing on a worker writes a path of the submitting machine:

* the corpus goes to every worker once (scattered bytes, kept by sha256 in the worker's
  local directory);
* the call cache goes whole once, then at each later stage (goal similarities, first
  phase, second phase) only the rows added since (:class:`Shipper`); a worker keeps its
  own SQLite copy, made to agree with what it was sent (the submitter's answers win), and
  returns the answers its point added;
* a scatter reaches the workers present when it is made (a later one fetches from a
  peer); if every worker holding the corpus or a snapshot is lost, both are sent again
  (the corpus, and the cache whole) and the points that needed them are submitted again;
* the point runs in the worker's local directory and comes back as a gzipped tar, which
  the submitter unpacks into ``points/<id>/`` (first finished copy wins, as with a shared
  folder).

The submitter merges returned answers into its cache with first-stored-wins and counts
conflicts (the same question answered differently by two workers in one phase, e.g. two
hosts whose servers round differently): a conflicting point used its own answer, which the
sweep reports rather than hides. Points sharing a synthesis run in two phases, so the
second phase's points meet the first's answers, as on one host.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import shutil
import sqlite3
import tarfile
import tempfile
import uuid
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ...errors import StoreError
from ...models.backend import BackendSpec
from ...models.cache import CACHE_SCHEMA

__all__ = [
    "Blob",
    "CacheSnapshot",
    "MergeCounts",
    "Shipper",
    "cache_snapshot",
    "corpus_blob",
    "merge_answers",
    "pack_folder",
    "shipped_call",
    "shipped_live_corpus",
    "shipped_point",
    "unpack_folder",
]

_ROWS = "SELECT key, kind, model, value FROM calls"


@dataclass(frozen=True)
class Blob:
    """A corpus database and its labels file, as bytes, addressed by their sha256."""

    name: str
    sha256: str
    files: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True)
class CacheSnapshot:
    """The submitter's cache rows at one moment; ``version`` tells workers it is new."""

    version: str
    rows: tuple[tuple[str, str, str, bytes], ...]


@dataclass(frozen=True)
class MergeCounts:
    """Answers a worker returned: stored as new, already there alike, or conflicting."""

    added: int = 0
    same: int = 0
    conflicts: int = 0

    def __add__(self, other: MergeCounts) -> MergeCounts:
        return MergeCounts(added=self.added + other.added, same=self.same + other.same,
                           conflicts=self.conflicts + other.conflicts)


def _sqlite_bytes(path: Path, what: str) -> bytes:
    """A SQLite file's bytes: as they are when nothing waits in its write-ahead log (the
    workers' copy then has the same file sha256), else a consistent copy (backup API)."""
    wal = path.with_name(path.name + "-wal")
    if not wal.exists() or wal.stat().st_size == 0:
        try:
            return path.read_bytes()
        except OSError as exc:
            raise StoreError(f"cannot read the {what} to ship it: {exc}", path=str(path)) from exc
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / path.name
        try:
            with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as src, \
                    contextlib.closing(sqlite3.connect(copy)) as dst:
                src.backup(dst)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"cannot read the {what} to ship it: {exc}", path=str(path)) from exc
        return copy.read_bytes()


def corpus_blob(path: Path) -> Blob:
    """The corpus database and, where it has one, its labels file (``<db>.labels.sqlite``)."""
    from ...corpora.labels import labels_path_for

    files = [(path.name, _sqlite_bytes(path, "corpus"))]
    labels = labels_path_for(path)
    if labels.exists():
        files.append((labels.name, _sqlite_bytes(labels, "corpus labels")))
    h = hashlib.sha256()
    for name, data in files:
        h.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    return Blob(name=path.name, sha256=h.hexdigest(), files=tuple(files))


def cache_snapshot(cache: str | Path, *, skip: Collection[str] = ()) -> CacheSnapshot:
    """The rows of the submitter's call cache whose keys are not in ``skip`` (none when the
    file does not exist yet)."""
    if not Path(cache).exists():
        return CacheSnapshot(version=uuid.uuid4().hex, rows=())
    try:
        with contextlib.closing(sqlite3.connect(f"file:{cache}?mode=ro", uri=True)) as conn:
            conn.execute("PRAGMA busy_timeout=5000")
            rows = tuple((str(k), str(kind), str(m), bytes(v))
                         for k, kind, m, v in conn.execute(_ROWS) if k not in skip)
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"cannot read the call cache to ship it: {exc}", path=str(cache)) from exc
    return CacheSnapshot(version=uuid.uuid4().hex, rows=rows)


class Shipper:
    """What travels to a cluster's workers, each thing once: the corpus (by path), and the
    submitter's cache, whole at the first stage, then only the rows added since (a stage's
    tasks depend on every snapshot sent so far, so a worker that joins late still gets them
    all); and the answers that come back, merged into that cache."""

    def __init__(self, client: Any, cache: str | Path):
        self._client = client
        self._cache = cache
        self._keys: set[str] = set()
        self._sent: list[Any] = []
        self._corpora: dict[Path, Any] = {}

    def corpus(self, path: Path) -> Any:
        """The corpus at ``path`` on every worker (a future; read and sent once, and again
        if every worker that held it is gone)."""
        sent = self._corpora.get(path)
        if sent is None or not _held(sent):
            self._corpora[path] = self._client.scatter(corpus_blob(path), broadcast=True)
        return self._corpora[path]

    def snapshots(self) -> list[Any]:
        """Scatter what is new since the last call; the futures of every snapshot sent.

        A broadcast reaches the workers present when it is made; one that joins later
        fetches from a peer when its first task needs it. If every holder of a snapshot is
        gone, the cache is sent whole again (a worker's copy is made to agree with it)."""
        if self.lost(self._sent):
            self._sent.clear()
            self._keys.clear()
        snap = cache_snapshot(self._cache, skip=self._keys)
        if snap.rows or not self._sent:
            self._sent.append(self._client.scatter(snap, broadcast=True))
            self._keys.update(row[0] for row in snap.rows)
        return list(self._sent)

    @staticmethod
    def lost(sent: Sequence[Any]) -> bool:
        """Whether any of these scattered futures left with every worker that held it (Dask
        then cancels the tasks that need it, for "lost dependencies" or as "already
        forgotten")."""
        return not all(_held(f) for f in sent)

    def take_back(self, answers: list[tuple[str, str, str, bytes]]) -> MergeCounts:
        """A task's returned answers, stored in the submitter's cache (first stored wins)."""
        return merge_answers(self._cache, answers)


def _held(future: Any) -> bool:
    """Whether a scattered future's data is still on some worker (a scatter has no recipe to
    recompute it: when its last holder leaves, Dask cancels it)."""
    return bool(future.status == "finished")


def merge_answers(cache: str | Path, rows: list[tuple[str, str, str, bytes]]) -> MergeCounts:
    """Store a worker's answers in the submitter's cache: an existing entry wins."""
    added = same = conflicts = 0
    try:
        with contextlib.closing(sqlite3.connect(str(cache), isolation_level=None)) as conn:
            conn.execute("PRAGMA busy_timeout=5000")
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(CACHE_SCHEMA)
            conn.execute("BEGIN IMMEDIATE")
            for key, kind, model, value in rows:
                old = conn.execute("SELECT value FROM calls WHERE key = ?", (key,)).fetchone()
                if old is None:
                    conn.execute("INSERT INTO calls (key, kind, model, value) VALUES (?, ?, ?, ?)",
                                 (key, kind, model, value))
                    added += 1
                elif bytes(old[0]) == value:
                    same += 1
                else:
                    conflicts += 1
            conn.execute("COMMIT")
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"cannot store the workers' answers: {exc}", path=str(cache)) from exc
    return MergeCounts(added=added, same=same, conflicts=conflicts)


def pack_folder(folder: Path) -> bytes:
    """A folder as a gzipped tar of its contents (paths relative to it)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for item in sorted(folder.iterdir()):
            tar.add(item, arcname=item.name)
    return buf.getvalue()


def unpack_folder(data: bytes, folder: Path) -> None:
    """Unpack :func:`pack_folder`'s bytes into ``folder`` (refusing links and escapes)."""
    folder.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        tar.extractall(folder, filter="data")


# -- the worker's side ---------------------------------------------------------------------

def _worker_home() -> Path:
    from distributed import get_worker

    home = Path(get_worker().local_directory) / "skillsynth"
    home.mkdir(parents=True, exist_ok=True)
    return home


def _materialize_corpus(blob: Blob, home: Path) -> Path:
    folder = home / "corpus" / blob.sha256
    if not (folder / blob.name).exists():  # written whole, then renamed into place
        tmp = home / "corpus" / f".{blob.sha256}.{uuid.uuid4().hex[:8]}"
        tmp.mkdir(parents=True)
        for name, data in blob.files:
            (tmp / name).write_bytes(data)
        try:
            tmp.rename(folder)
        except OSError:  # another task of this worker placed it first
            shutil.rmtree(tmp, ignore_errors=True)
    return folder / blob.name


def _seed_cache(snapshots: Sequence[CacheSnapshot], home: Path) -> tuple[Path, int]:
    """The worker's cache, agreeing with ``snapshots`` (each applied once, in order); and its
    last row id before the point (the rows after it are what the point adds)."""
    path = home / "cache.db"
    with contextlib.closing(sqlite3.connect(str(path), isolation_level=None)) as conn:
        conn.execute("PRAGMA busy_timeout=30000")
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(CACHE_SCHEMA)
        conn.execute("CREATE TABLE IF NOT EXISTS seeded (version TEXT PRIMARY KEY)")
        conn.execute("BEGIN IMMEDIATE")
        for snapshot in snapshots:
            if conn.execute("SELECT 1 FROM seeded WHERE version = ?",
                            (snapshot.version,)).fetchone() is not None:
                continue
            for key, kind, model, value in snapshot.rows:  # the submitter's answers win
                old = conn.execute("SELECT value FROM calls WHERE key = ?", (key,)).fetchone()
                if old is None or bytes(old[0]) != value:
                    conn.execute("INSERT OR REPLACE INTO calls (key, kind, model, value) "
                                 "VALUES (?, ?, ?, ?)", (key, kind, model, value))
            conn.execute("INSERT INTO seeded (version) VALUES (?)", (snapshot.version,))
        last = int(conn.execute("SELECT COALESCE(MAX(rowid), 0) FROM calls").fetchone()[0])
        conn.execute("COMMIT")
    return path, last


def _answers_since(cache: Path, last: int) -> list[tuple[str, str, str, bytes]]:
    with contextlib.closing(sqlite3.connect(str(cache))) as conn:
        conn.execute("PRAGMA busy_timeout=30000")
        return [(str(k), str(kind), str(m), bytes(v)) for k, kind, m, v
                in conn.execute(f"{_ROWS} WHERE rowid > ? ORDER BY rowid", (last,))]


@contextlib.contextmanager
def _on_this_worker(corpus: Blob | None, snapshots: Sequence[CacheSnapshot],
                    backend: BackendSpec
                    ) -> Iterator[tuple[Path | None, BackendSpec, Callable[[], list[Any]]]]:
    """The corpus and the cache on this worker; the backend with the worker's cache."""
    from .backends import worker_backend

    home = _worker_home()
    path = None if corpus is None else _materialize_corpus(corpus, home)
    cache, last = _seed_cache(snapshots, home)
    yield path, worker_backend(replace(backend, cache=str(cache))), \
        lambda: _answers_since(cache, last)


def shipped_call(fn: Callable[..., Any], corpus: Blob | None,
                 snapshots: Sequence[CacheSnapshot],
                 backend: BackendSpec, *args: Any, **kwargs: Any) -> dict[str, Any]:
    """``fn(corpus_path, *args, backend=..., **kwargs)`` on a worker (the goal
    similarities); its result and the answers it added."""
    with _on_this_worker(corpus, snapshots, backend) as (path, wb, answers):
        value = fn(path, *args, backend=wb, **kwargs)
        return {"value": value, "answers": answers()}


def shipped_live_corpus(live: Callable[..., Path], snapshots: Sequence[CacheSnapshot],
                        backend: BackendSpec, spec: Any) -> dict[str, Any]:
    """A live-history corpus built on a worker; its bytes and the answers it added."""
    with _on_this_worker(None, snapshots, backend) as (_, wb, answers):
        run_dir = _worker_home() / "live" / uuid.uuid4().hex
        try:
            db = live(spec, run_dir, wb)
            return {"corpus": corpus_blob(db), "answers": answers()}
        finally:
            shutil.rmtree(run_dir, ignore_errors=True)


def shipped_point(point: Any, spec: Any, corpus: Blob, snapshots: Sequence[CacheSnapshot],
                  backend: BackendSpec) -> dict[str, Any]:
    """One point on a worker, in its local directory: ``{"error", "folder", "answers"}``
    (``folder`` is the packed point; never raises for the point's own failure)."""
    from .execute import execute_point, failure_text
    from .notebooks import find_notebook

    with _on_this_worker(corpus, snapshots, backend) as (path, wb, answers):
        assert path is not None
        staging = _worker_home() / "points" / f"{point.id}-{uuid.uuid4().hex[:8]}"
        error: str | None = None
        try:
            execute_point(point, spec, path, wb, staging,
                           find_notebook("sweep_point.ipynb"))
        except Exception as exc:  # noqa: BLE001 (recorded as the point's failure)
            error = failure_text(exc)
        try:
            folder = pack_folder(staging) if staging.exists() else None
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return {"error": error, "folder": folder, "answers": answers()}

