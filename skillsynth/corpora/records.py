"""What every importer produces, and the reading helpers they share.

An importer is a generator over one source that yields, per session, either a
:class:`SessionRecord` (fully parsed and checked, nothing written yet) or a
:class:`BadRecord` (the :class:`CorpusFormatError` that record raised). The writer in
:mod:`skillsynth.corpora.importing` decides whether a bad record stops the import or is a
counted skip, and writes each good session in one transaction.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ..errors import CorpusError, CorpusFormatError
from ..store import ToolCall, Turn, serialize_args
from .jsonscan import ArrayReader, Gap, Item, byte_length, error_text, skip_ws
from .labels import SessionLabel

__all__ = [
    "MAX_FIELD_CHARS",
    "BadRecord",
    "Break",
    "Call",
    "FieldError",
    "Reply",
    "SessionRecord",
    "SourceFile",
    "args_text",
    "check_text",
    "content_digest",
    "iso",
    "json_error_text",
    "need",
    "pair_calls",
    "session_uuid",
    "synthetic_clock",
]

#: The largest text field an importer accepts. GAIA keeps 500 characters of args, results
#: and errors; a field past a million characters is a broken record (an embedded blob, a
#: runaway generation), reported rather than silently cut to 500.
MAX_FIELD_CHARS = 1_000_000
#: Where synthesized timestamps start (sources without any), one session per 10 minutes.
SYNTHETIC_EPOCH = datetime(2024, 1, 1, 9, 0, tzinfo=UTC)


@dataclass(frozen=True)
class SessionRecord:
    """One parsed session: its ``tool_history`` and ``conversations`` rows (the store's own
    :class:`~skillsynth.store.ToolCall` and :class:`~skillsynth.store.Turn`, not yet
    written: the goal turn first) and its label.

    Raises:
        CorpusError: a row of another session (an importer's bug).
    """

    session_id: str
    calls: tuple[ToolCall, ...]
    turns: tuple[Turn, ...]
    label: SessionLabel
    #: ids earlier skillsynth releases gave this same session (from file name and
    #: position), so that corpora they built recognise it on a re-import
    aliases: tuple[str, ...] = ()
    #: where in its file the session begins (``line 12``), where the format says
    record: str | None = None

    def __post_init__(self) -> None:
        strays = ({c.session_id for c in self.calls} | {t.session_id for t in self.turns}
                  ) - {self.session_id}
        if strays:
            raise CorpusError(f"session {self.session_id!r} was given rows of {sorted(strays)}")


@dataclass(frozen=True)
class BadRecord:
    """A record that could not be parsed; ``error`` names file, record and field.

    For a stretch of a file that could not be read at all (malformed JSON): ``records``,
    how many records it held (normally 1; 0 when a cut file ends where one would start),
    ``bytes``, its size, and ``resumed``, whether reading went on after it (False: the
    rest of the file was not read, so the import is partial).
    """

    error: CorpusFormatError
    records: int = 1
    bytes: int = 0
    resumed: bool = True


class SourceFile:
    """A source file read as text: ``.gz`` is decompressed, bad UTF-8 is kept as escapes.

    Undecodable bytes become lone surrogates (``surrogateescape``) so that the records
    before and after them still parse; :meth:`check_text` then names the record and field
    that hold them.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.name = str(self.path)
        try:
            raw = self.path.read_bytes()
        except OSError as exc:
            raise CorpusFormatError(f"cannot read: {exc.strerror or exc}", file=self.name) from exc
        if self.path.suffix == ".gz":
            try:
                raw = gzip.decompress(raw)
            except (OSError, EOFError) as exc:
                raise CorpusFormatError(f"not a readable gzip file: {exc}",
                                        file=self.name) from exc
        self.text = raw.decode("utf-8", errors="surrogateescape")

    def error(self, message: str, record: int | str | None = None,
              field: str | None = None) -> CorpusFormatError:
        """A :class:`CorpusFormatError` for this file."""
        return CorpusFormatError(message, file=self.name, record=record, field=field)

    def load(self) -> Any:
        """The whole document as JSON."""
        try:
            return json.loads(self.text)
        except json.JSONDecodeError as exc:
            raise self.error(f"not valid JSON ({json_error_text(exc)})",
                             field="document") from exc

    def array_items(self, is_element: Callable[[Any], bool]
                    ) -> Iterator[tuple[int, Any] | BadRecord]:
        """The items of a top-level JSON array, one at a time.

        A malformed item yields a :class:`BadRecord` and reading resumes at the next whole
        item (see :mod:`~skillsynth.corpora.jsonscan`), so one bad record never costs the
        valid ones after it. A file cut off mid-way still yields every complete item
        before the cut, then a bad record for the rest, which says how much was unread.
        ``is_element``: whether a parsed object is one of the format's records.
        """
        pos = skip_ws(self.text, 0)
        if pos >= len(self.text) or self.text[pos] != "[":
            yield BadRecord(self.error("expected a JSON list of trajectories",
                                       field="document"), resumed=False)
            return
        for item in ArrayReader(self.text, pos, is_element):
            yield (item.index, item.value) if isinstance(item, Item) else \
                self.gap_record(item, item.index)

    def gap_record(self, gap: Gap, record: int | str | None) -> BadRecord:
        """The bad record for a stretch the reader could not parse."""
        hint = "" if gap.resumed else "; the file may be truncated"
        return BadRecord(self.error(gap.message + hint, record=record), records=gap.records,
                         bytes=byte_length(self.text, gap.start, gap.end),
                         resumed=gap.resumed)


#: json's syntax errors as one phrase (kept here for the readers that import it).
json_error_text = error_text


def check_text(value: Any, path: str = "") -> None:
    """Raise for the first string under ``value`` that is not clean UTF-8, holds a NUL or is
    too long."""
    if isinstance(value, str):
        if len(value) > MAX_FIELD_CHARS:
            raise FieldError(path or "document", f"{len(value)} characters, over the "
                              f"{MAX_FIELD_CHARS} limit")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise FieldError(path or "document", "invalid UTF-8") from None
        if "\x00" in value:  # SQLite's string functions stop at it; GAIA never writes one
            raise FieldError(path or "document", "contains a NUL character (\\u0000)")
    elif isinstance(value, Mapping):
        for k, v in value.items():
            check_text(k, f"{path}.<key>".lstrip("."))
            check_text(v, f"{path}.{k}".lstrip("."))
    elif isinstance(value, list):
        for j, v in enumerate(value):
            check_text(v, f"{path}[{j}]")


def need(obj: Any, key: str, kind: type | tuple[type, ...], path: str) -> Any:
    """``obj[key]``, which must exist and be of ``kind``; else a KeyError-like message."""
    if not isinstance(obj, Mapping):
        raise FieldError(path, f"expected an object, got {type(obj).__name__}")
    if key not in obj or obj[key] is None:
        raise FieldError(f"{path}.{key}" if path else key, "missing")
    val = obj[key]
    if not isinstance(val, kind) or (isinstance(val, bool) and bool not in _kinds(kind)):
        names = "/".join(k.__name__ for k in _kinds(kind))
        raise FieldError(f"{path}.{key}" if path else key,
                          f"expected {names}, got {type(val).__name__}")
    return val


def _kinds(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


class FieldError(Exception):
    """Raised inside a parser, never past it: the reader turns it into a CorpusFormatError."""

    def __init__(self, field: str, message: str):
        self.field, self.message = field, message
        super().__init__(f"{field}: {message}")


def args_text(raw: Any) -> tuple[str | None, bool]:
    """GAIA's ``args`` text for a call's arguments (:func:`serialize_args`), and whether
    they were a string that is not JSON."""
    text = serialize_args(raw)
    if isinstance(raw, str) and text is not None:
        try:
            json.loads(text)
        except json.JSONDecodeError:
            return text, True
    return text, False


def iso(ts: str, path: str) -> str:
    """A source timestamp in GAIA's format (naive times are taken as UTC)."""
    try:
        t = datetime.fromisoformat(ts)
    except ValueError as exc:
        raise FieldError(path, f"not an ISO-8601 timestamp: {ts!r}") from exc
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    return t.isoformat(timespec="microseconds")


def synthetic_clock(session_index: int) -> Iterator[str]:
    """Monotone timestamps for a source that has none: session k starts 10 min after k-1."""
    t = SYNTHETIC_EPOCH + timedelta(minutes=10 * session_index)
    while True:
        yield t.isoformat(timespec="microseconds")
        t += timedelta(seconds=1)


#: Namespace of the session ids importers derive (uuid5): stable across re-imports, and
#: opaque, so no task id or trial number leaks into what the pipeline reads.
SESSION_NAMESPACE = uuid.UUID("6f1c2a4e-8d53-5b0e-9a61-2f7d3c9b4e10")


def session_uuid(*parts: object) -> str:
    """A stable, opaque session id (GAIA's are uuid4 strings) from a source's natural key."""
    return str(uuid.uuid5(SESSION_NAMESPACE, "|".join(map(str, parts))))


def content_digest(value: Any) -> str:
    """sha256 of ``value`` as canonical JSON (sorted keys, no whitespace).

    Part of a session's id, so that the same trajectory read from any file, however that
    file was formatted or named, gets the same id, and two runs that differ anywhere in
    their messages or calls get two. ``value`` must have passed :func:`check_text`.
    """
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Call:
    """A tool call in a source transcript (``by_agent`` False: the user simulator's call)."""

    name: str
    raw_args: Any
    timestamp: str | None
    path: str
    by_agent: bool = True


@dataclass(frozen=True)
class Reply:
    """A tool message answering the oldest unanswered call."""

    content: Any
    error: bool
    timestamp: str | None
    path: str


@dataclass(frozen=True)
class Break:
    """Any other message: calls still unanswered here never got a result."""


UNANSWERED = "no tool result in the source"


def pair_calls(events: list[tuple[Call, ...] | Reply | Break], clock: Iterator[str],
               session_id: str) -> tuple[list[ToolCall], set[str]]:
    """Session ``session_id``'s agent calls paired with the tool messages that follow them,
    in order (not by id).

    ``events``: per message, a tuple of its calls, a :class:`Reply`, or a :class:`Break`.
    Tool-call ids repeat inside real transcripts, so order is the only reliable pairing.
    Returns the calls and the flags raised (``synthetic-timestamps``, ``non-json-args``,
    ``unanswered-call``). A tool message with no call before it is an error.
    """
    out: list[ToolCall] = []
    flags: set[str] = set()
    pending: list[Call] = []

    def stamp(ts: str | None, path: str) -> str:
        if ts is None:
            flags.add("synthetic-timestamps")
            return next(clock)
        return iso(ts, path)

    def emit(call: Call, reply: Reply | None) -> None:
        if not call.by_agent:
            return
        args, not_json = args_text(call.raw_args)
        if not_json:
            flags.add("non-json-args")
        start = stamp(call.timestamp, f"{call.path}.timestamp")
        if reply is None:
            flags.add("unanswered-call")
            out.append(ToolCall(session_id=session_id, tool_name=call.name, args=args,
                                result_summary=None, success=False, timestamp=start,
                                error=UNANSWERED))
            return
        content = reply.content
        if content is not None and not isinstance(content, str):
            content = json.dumps(content, default=str)
        duration = None
        if call.timestamp is not None and reply.timestamp is not None:
            end = iso(reply.timestamp, f"{reply.path}.timestamp")
            delta = datetime.fromisoformat(end) - datetime.fromisoformat(start)
            duration = max(0, round(delta.total_seconds() * 1000))
        if reply.error:
            out.append(ToolCall(session_id=session_id, tool_name=call.name, args=args,
                                result_summary=None, success=False, timestamp=start,
                                error=content or "error", duration_ms=duration))
        else:
            out.append(ToolCall(session_id=session_id, tool_name=call.name, args=args,
                                result_summary=content, success=True, timestamp=start,
                                duration_ms=duration))

    def flush() -> None:
        for c in pending:
            emit(c, None)
        pending.clear()

    for ev in events:
        if isinstance(ev, tuple):  # one message's calls; earlier ones unanswered stay so
            flush()
            pending.extend(ev)
        elif isinstance(ev, Reply):
            if not pending:
                raise FieldError(ev.path, "a tool message without a call before it")
            emit(pending.pop(0), ev)
        else:
            flush()
    flush()
    return out, flags
