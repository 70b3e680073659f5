"""Import a source into a corpus: a GAIA-schema ``memory.db`` plus its labels file.

One transaction per session: a session is written whole or not at all, and sessions
already written stay when a later record is bad. A bad record stops the import with an
error naming file, record and field, or, with ``skip_bad``, becomes a counted skip in the
:class:`ImportReport`. Sessions already in the corpus are left alone and counted, so an
interrupted import can simply be run again. A JSONL session's id is the file's own: one
that arrives again with other content (other calls, results or turns) is a conflict, left
alone but reported by file, line and id and counted, and the import is partial. Elsewhere a
session's id comes from its content (the
format's own identifying fields and a digest of its messages and calls), so the same
trajectories imported again from a renamed, truncated or merged copy are recognised too;
an id an earlier release gave the session counts as present as well (see
:mod:`~skillsynth.corpora.legacy`), so corpora built before content ids are never given a
second copy of a session either.
"""

from __future__ import annotations

import contextlib
import logging
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, get_args

from tqdm.auto import tqdm

from .. import __version__
from ..errors import CorpusFormatError
from ..models.cache import file_sha256
from ..store import MemoryStore, ToolCall, Turn, now_iso
from .gaiadb import read_gaia_db
from .jsonl import read_jsonl
from .labels import LabelStore, labels_path_for
from .legacy import legacy_taubench_index, record_stored_key
from .records import BadRecord, SessionRecord
from .tau2 import load_tasks, read_tau2
from .taubench import read_taubench

__all__ = ["FORMATS", "ImportFormat", "ImportReport", "import_corpus", "write_session"]

log = logging.getLogger(__name__)

ImportFormat = Literal["taubench", "tau2", "gaia-db", "jsonl"]
FORMATS: tuple[str, ...] = get_args(ImportFormat)
#: How many session ids a report lists for a kind of problem (the counts are complete).
LIST_LIMIT = 50
#: How many skipped records are logged one by one (the report lists them all).
LOG_LIMIT = 10


@dataclass
class ImportReport:
    """What an import read, wrote and skipped.

    ``skipped``: one entry per bad record or unreadable stretch (file, record, field,
    error; ``records``, how many records it held, ``bytes``, its size where it could not
    be parsed at all, ``resumed``, whether reading went on after it). ``records_skipped``
    sums ``records``. Where reading could not resume (a cut file, a break in a list's
    last element), ``unread_bytes`` and ``partial_files`` say how much was not read and
    ``status`` is ``partial``. ``conflicts``: each JSONL session whose id the corpus already
    holds with other content (file, record, session id), left alone and counted in
    ``sessions_conflicting``; the status is then ``partial`` too.
    """

    format: str
    db_path: str
    labels_path: str
    files: list[str] = field(default_factory=list)
    sessions_imported: int = 0
    calls_imported: int = 0
    sessions_without_calls: int = 0
    sessions_without_goal: int = 0
    sessions_without_goal_ids: list[str] = field(default_factory=list)
    already_present: int = 0
    labels_completed: int = 0
    empty_files: list[str] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    records_skipped: int = 0
    unread_bytes: int = 0
    partial_files: list[str] = field(default_factory=list)
    sessions_conflicting: int = 0
    conflicts: list[dict[str, Any]] = field(default_factory=list)
    flags: dict[str, int] = field(default_factory=dict)
    status: str = "ok"

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``--json``)."""
        return asdict(self)


def _expand(fmt: str, sources: Sequence[str | Path]) -> list[Path]:
    files: list[Path] = []
    for s in sources:
        p = Path(s)
        if p.is_dir() and fmt != "gaia-db":
            suffixes = (".jsonl", ".jsonl.gz") if fmt == "jsonl" else (".json", ".json.gz")
            found = sorted(f for f in p.iterdir() if f.name.endswith(suffixes)
                           and not f.name.startswith("tasks"))
            if not found:
                raise CorpusFormatError(f"no {'/'.join(suffixes)} files in the folder",
                                        file=str(p))
            files.extend(found)
        elif not p.exists():
            raise CorpusFormatError("no such file", file=str(p))
        else:
            files.append(p)
    return files


def _records(fmt: str, files: list[Path], tasks: Path | None, offset: int
             ) -> Iterator[tuple[Path, SessionRecord | BadRecord]]:
    fallback = load_tasks(tasks) if tasks else None
    for f in files:
        if fmt == "taubench":
            recs: Iterator[SessionRecord | BadRecord] = read_taubench(f, first_index=offset)
        elif fmt == "tau2":
            recs = read_tau2(f, fallback_tasks=fallback, first_index=offset)
        elif fmt == "jsonl":
            recs = read_jsonl(f, first_index=offset)
        else:
            recs = read_gaia_db(f)
        for rec in recs:
            yield f, rec
        offset += 100_000  # keeps synthetic clocks of later files after earlier ones


def import_corpus(fmt: ImportFormat | str, sources: Sequence[str | Path] | str | Path,
                  db_path: str | Path, *, tasks: str | Path | None = None,
                  skip_bad: bool = False, labels_path: str | Path | None = None,
                  progress: bool = False, dry_run: bool = False) -> ImportReport:
    """Import ``sources`` (files, or folders of them) of format ``fmt`` into ``db_path``.

    Args:
        fmt: ``taubench``, ``tau2``, ``gaia-db`` or ``jsonl``.
        sources: one path or several; a folder means its ``.json``/``.jsonl`` files
            (``tasks*`` files excluded: pass those as ``tasks``).
        db_path: the corpus database, created when missing (GAIA's schema).
        tasks: tau2 only, a tasks file for simulations whose task is not in their file.
        skip_bad: count and list bad records instead of stopping at the first.
        labels_path: the labels file (default ``<db>.labels.sqlite``).
        progress: show a progress bar.
        dry_run: read every record and report what would be imported, what is already
            present and what would be skipped, writing nothing (no database or labels file
            is created); the report's status is ``dry-run``.

    Raises:
        CorpusFormatError: a bad record (without ``skip_bad``), naming file, record and
            field; sessions written before it stay (and are named in a warning), while a
            database or labels file the failed import created with nothing in it is removed;
            or no file held a record at all.
    """
    if fmt not in FORMATS:
        raise CorpusFormatError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if tasks is not None and fmt != "tau2":
        raise CorpusFormatError("--tasks applies to the tau2 format only", file=str(tasks))
    srcs = [sources] if isinstance(sources, (str, Path)) else list(sources)
    files = _expand(fmt, srcs)
    db = Path(db_path)
    if fmt == "gaia-db" and any(f.resolve() == db.resolve() for f in files if db.exists()):
        raise CorpusFormatError("the corpus database must not be the source database",
                                file=str(db))
    lab = Path(labels_path) if labels_path else labels_path_for(db)
    report = ImportReport(format=fmt, db_path=str(db), labels_path=str(lab),
                          files=[str(f) for f in files])
    if dry_run:
        _plan(fmt, files, db, lab, tasks, skip_bad, report)
        return report
    created = [p for p in (db, lab) if not p.exists()]
    seen: Counter[Path] = Counter()
    try:
        _import(fmt, files, db, lab, tasks, skip_bad, progress, report, seen)
        report.empty_files = [str(f) for f in files if not seen[f]]
        if report.empty_files and not report.sessions_imported and not report.already_present:
            raise CorpusFormatError("no record in the file(s): nothing to import",
                                    file=", ".join(report.empty_files))
    except BaseException:
        if report.sessions_imported == 0:  # nothing of value written: leave no empty files
            for p in created:
                for q in (p, p.with_name(p.name + "-wal"), p.with_name(p.name + "-shm")):
                    q.unlink(missing_ok=True)
        else:
            done = sorted({str(f) for f in files if seen[f]})
            log.warning("the import stopped; %d session(s) from %s were written and stay "
                        "(re-running resumes; finished sessions are left alone)",
                        report.sessions_imported, ", ".join(done))
        raise
    if report.empty_files:
        log.warning("no record in %s", ", ".join(report.empty_files))
    return report


def _import(fmt: str, files: list[Path], db: Path, lab: Path, tasks: str | Path | None,
            skip_bad: bool, progress: bool, report: ImportReport, seen: Counter[Path]) -> None:
    """The import proper (see :func:`import_corpus`); counts records per file in ``seen``."""
    begun = now_iso()
    flags: Counter[str] = Counter()
    store = MemoryStore.open(db) if db.exists() else MemoryStore.init(db)
    with store, LabelStore(lab, create=True) as labels:
        present = labels.session_ids()
        # a session is committed to memory.db, then its label to the labels file: after a
        # kill between the two, the session is in the database only. It is never written
        # twice; its label is added on the re-run.
        in_db = {r[0] for r in store.execute(
            "SELECT session_id FROM tool_history UNION SELECT session_id FROM conversations")}
        # tau-bench sessions an earlier release named by file name and position
        old = legacy_taubench_index(store, labels) if fmt == "taubench" else {}
        # synthetic clocks start after the sessions of other sources; sessions of these
        # same files (an interrupted run being resumed) do not move them, so a resumed
        # import writes the timestamps an uninterrupted one would have
        offset = labels.count_from_other_files(f.name for f in files)
        try:
            for src, rec in tqdm(_records(fmt, files, Path(tasks) if tasks else None, offset),
                                 desc=f"import {fmt}", unit="session", disable=not progress):
                seen[src] += 1
                if isinstance(rec, BadRecord):
                    if not skip_bad:
                        raise rec.error
                    _skip(report, rec)
                    continue
                known = _known_as(rec, present, in_db, old)
                if known is not None and fmt == "jsonl" and _conflicts(
                        rec, store.tool_calls(known), store.turns(known)):
                    _conflict(report, src, rec)
                    continue
                if known is not None:
                    if known not in present:  # in memory.db only: a kill lost its label
                        labels.add([replace(rec.label, session_id=known)])
                        present.add(known)
                        report.labels_completed += 1
                    report.already_present += 1
                    continue
                write_session(store, rec)
                labels.add([rec.label])
                present.add(rec.session_id)
                report.sessions_imported += 1
                report.calls_imported += len(rec.calls)
                report.sessions_without_calls += not rec.calls
                if not any(t.role == "user" for t in rec.turns):
                    report.sessions_without_goal += 1
                    if len(report.sessions_without_goal_ids) < LIST_LIMIT:
                        report.sessions_without_goal_ids.append(rec.session_id)
                flags.update(rec.label.flags)
            if skip_bad and report.skipped and not report.sessions_imported \
                    and not report.already_present:
                raise CorpusFormatError(
                    f"none of {len(report.skipped)} record(s) is a valid {fmt} record (first: "
                    f"{report.skipped[0]['error']}); is --format right?",
                    file=str(files[0]) if len(files) == 1 else None)
            if len(report.skipped) > LOG_LIMIT:
                log.warning("... and %d more bad records skipped (all in the report)",
                            len(report.skipped) - LOG_LIMIT)
            if report.partial_files or report.conflicts:
                report.status = "partial"
            if report.partial_files:
                log.warning("partial import: %d byte(s) of %s could not be read",
                            report.unread_bytes, ", ".join(report.partial_files))
        except BaseException:
            report.status = "failed"
            raise
        finally:
            report.flags = dict(sorted(flags.items()))
            if fmt in ("taubench", "tau2"):  # label source == format for these two
                labels.renumber_attempts(fmt)
            labels.record_build("import", begun, now_iso(), {
                "format": fmt, "skillsynth": __version__, "status": report.status,
                "files": [{"name": f.name, "sha256": file_sha256(f)} for f in files if f.is_file()],
                "tasks": None if tasks is None else {"name": Path(tasks).name,
                                                     "sha256": file_sha256(tasks)},
                "counts": {k: v for k, v in report.as_dict().items()
                           if isinstance(v, int)}})


def _plan(fmt: str, files: list[Path], db: Path, lab: Path, tasks: str | Path | None,
          skip_bad: bool, report: ImportReport) -> None:
    """What :func:`_import` would do, counted into ``report``, with nothing written."""
    report.status = "dry-run"
    present: set[str] = set()
    in_db: set[str] = set()
    old: dict[str, str] = {}
    offset = 0
    planned: dict[str, SessionRecord] = {}  # what this run would write, by id
    with contextlib.ExitStack() as stack:
        store = stack.enter_context(MemoryStore.open(db, read_only=True)) \
            if db.exists() else None
        if store is not None:
            in_db = {r[0] for r in store.execute(
                "SELECT session_id FROM tool_history UNION SELECT session_id FROM conversations")}
            if lab.exists():
                with LabelStore(lab) as labels:
                    present = labels.session_ids()
                    old = legacy_taubench_index(store, labels) if fmt == "taubench" else {}
                    offset = labels.count_from_other_files(f.name for f in files)
        for src, rec in _records(fmt, files, Path(tasks) if tasks else None, offset):
            if isinstance(rec, BadRecord):
                if not skip_bad:
                    raise rec.error
                _skip(report, rec)
                continue
            known = _known_as(rec, present, in_db, old)
            if known is not None and fmt == "jsonl":
                first = planned.get(known)
                held: tuple[Sequence[ToolCall], Sequence[Turn]] = \
                    (first.calls, first.turns) if first is not None else \
                    (store.tool_calls(known), store.turns(known)) if store is not None else ((), ())
                if _conflicts(rec, *held):
                    _conflict(report, src, rec)
                    continue
            if known is not None:
                report.already_present += 1
                continue
            planned[rec.session_id] = rec
            present.add(rec.session_id)
            report.sessions_imported += 1
            report.calls_imported += len(rec.calls)
            report.sessions_without_calls += not rec.calls
            report.sessions_without_goal += not any(t.role == "user" for t in rec.turns)


def _conflicts(rec: SessionRecord, calls: Sequence[ToolCall], turns: Sequence[Turn]) -> bool:
    """``rec`` is not what the corpus holds under its id (``calls``, ``turns``): other
    calls, arguments, results or turns. Timestamps an importer made up (a session with
    none; a goal turn's) take no part, so the same file read from another place agrees."""
    made_up = "synthetic-timestamps" in rec.label.flags
    return _content(rec.calls, rec.turns, made_up) != _content(calls, turns, made_up)


def _content(calls: Sequence[ToolCall], turns: Sequence[Turn], made_up: bool
             ) -> tuple[Any, ...]:
    """What a session's rows say, as the store holds them (call times left out where
    ``made_up``)."""
    return (tuple(replace(c.as_stored(), timestamp="" if made_up else c.timestamp)
                  for c in calls), tuple((t.role, t.content) for t in turns))


def _conflict(report: ImportReport, src: Path, rec: SessionRecord) -> None:
    """Count a session whose id the corpus holds with other content; it is left alone."""
    report.sessions_conflicting += 1
    report.conflicts.append({"file": str(src), "record": rec.record,
                             "session_id": rec.session_id})
    if len(report.conflicts) <= LOG_LIMIT:  # the report keeps them all
        log.warning("conflict: %s, %s: session %r is already in the corpus with other "
                    "content; left as it is", src, rec.record, rec.session_id)


def _known_as(rec: SessionRecord, present: set[str], in_db: set[str],
              old: dict[str, str]) -> str | None:
    """The id under which ``rec`` is already in the corpus (its own, else an id an
    earlier release gave it: by alias, or by what the store holds of it), or None."""
    for sid in (rec.session_id, *rec.aliases):
        if sid in present or sid in in_db:
            return sid
    return old.get(record_stored_key(rec)) if old else None


def _skip(report: ImportReport, rec: BadRecord) -> None:
    """Count a bad record (``skip_bad``): exactly the records it held, and, where reading
    could not resume after it, the bytes left unread."""
    err = rec.error
    report.skipped.append({"file": err.file, "record": err.record, "field": err.field,
                           "error": str(err), "records": rec.records, "bytes": rec.bytes,
                           "resumed": rec.resumed})
    report.records_skipped += rec.records
    if not rec.resumed:
        report.unread_bytes += rec.bytes
        if err.file and err.file not in report.partial_files:
            report.partial_files.append(err.file)
    if len(report.skipped) <= LOG_LIMIT:  # the report keeps them all
        log.warning("skipped: %s", err)


def write_session(store: MemoryStore, rec: SessionRecord) -> None:
    """One session in one transaction (calls first, then turns, as GAIA writes them)."""
    with store.transaction():
        store.add_tool_calls(rec.calls)
        for t in rec.turns:
            store.add_turn(rec.session_id, t.role, t.content, timestamp=t.timestamp)

