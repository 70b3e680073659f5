"""skillsynth's JSONL corpus format: one object per tool call, so anyone's data can come in.

Each line is one agent tool call::

    {"session_id": "s1", "tool_name": "search_file", "args": {"q": "x"},
     "result_summary": "3 hits", "success": true, "error": null,
     "duration_ms": 120, "timestamp": "2026-01-05T09:00:04.000000+00:00"}

Required: ``session_id``, ``tool_name``, ``success``. Optional: ``args`` (an object, or a
string kept as it is), ``result_summary``, ``error``, ``duration_ms``, ``timestamp``
(missing ones are synthesized and the session flagged; given ones are kept verbatim),
and, on any line of a session:

* ``goal``: the user's goal (becomes the session's first user turn), or
* ``turns``: the session's conversation rows ``[{"role", "content", "timestamp"}]``;
* ``label``: what scoring may know (``task_id``, ``attempt``, ``success``, ``reward``,
  ``essential_steps``, ``actions``, ``started_at``, ``flags``, ``extra``, ``source``). It
  goes to the labels file, never into the memory database.

Lines of one session need not be adjacent; calls keep line order. :func:`export_jsonl`
writes this format from a corpus, so corpora travel.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from ..errors import CorpusFormatError
from ..store import MemoryStore, ToolCall, Turn
from .labels import LabelStore, SessionLabel, labels_path_for
from .records import (
    BadRecord,
    FieldError,
    SessionRecord,
    SourceFile,
    args_text,
    check_text,
    json_error_text,
    need,
    synthetic_clock,
)

__all__ = ["export_jsonl", "read_jsonl"]

SOURCE = "jsonl"


def read_jsonl(path: str | Path, *, first_index: int = 0) -> Iterator[SessionRecord | BadRecord]:
    """Parse a JSONL corpus; a bad line makes its whole session a bad record.

    Records come in file order: a session at its first line, a bad one at its first bad
    line, so an import without ``skip_bad`` stops at, and names, the file's first bad line.
    Every per-line rule is checked while the file is read; sessions are built lazily.
    """
    src = SourceFile(path)
    sessions: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    broken: dict[str, tuple[int, CorpusFormatError]] = {}
    lone: list[tuple[int, CorpusFormatError]] = []
    labelled: set[str] = set()
    for n, line in enumerate(src.text.splitlines(), 1):
        if not line.strip():
            continue
        record = f"line {n}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            lone.append((n, src.error(f"not valid JSON ({json_error_text(exc, line=False)})",
                                      record=record, field="line")))
            continue
        try:
            check_text(obj)
            sid = need(obj, "session_id", str, "")
        except FieldError as exc:
            lone.append((n, src.error(exc.message, record=record, field=exc.field)))
            continue
        sessions.setdefault(sid, []).append((n, obj))
        if sid in broken:
            continue
        try:
            _check_line(src, sid, n, obj, labelled)
        except FieldError as exc:
            field = exc.field.removeprefix(f"{record}.")
            broken[sid] = (n, src.error(f"{exc.message} (session {sid!r} skipped whole)",
                                        record=record, field=field))
    order: list[tuple[int, int, str | CorpusFormatError]] = [
        (broken[sid][0] if sid in broken else lines[0][0], k, sid)
        for k, (sid, lines) in enumerate(sessions.items())]
    order += [(n, -1, err) for n, err in lone]
    for _, k, item in sorted(order, key=lambda o: o[0]):
        if isinstance(item, CorpusFormatError):
            yield BadRecord(item)
        elif item in broken:
            yield BadRecord(broken[item][1])
        else:
            try:
                yield _session(src, item, sessions[item], first_index + k)
            except FieldError as exc:  # not expected: every line was checked above
                yield BadRecord(src.error(exc.message, record=f"session {item!r}",
                                          field=exc.field))


def _check_line(src: SourceFile, sid: str, n: int, obj: dict[str, Any],
                labelled: set[str]) -> None:
    """Every rule one line must meet on its own (raises FieldError)."""
    need(obj, "tool_name", str, "")
    need(obj, "success", bool, "")
    _session(src, sid, [(n, obj)], 0)  # what building the session checks, for this line
    if obj.get("label") is not None:
        if sid in labelled:
            raise FieldError(f"line {n}.label", "a second label for this session")
        labelled.add(sid)


def _stamp(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise FieldError(path, "expected an ISO-8601 string")
    try:
        datetime.fromisoformat(value)
    except ValueError:
        raise FieldError(path, f"not an ISO-8601 timestamp: {value!r}") from None
    return value


def _session(src: SourceFile, sid: str, lines: list[tuple[int, dict[str, Any]]],
             clock_index: int) -> SessionRecord:
    clock = synthetic_clock(clock_index)
    flags: set[str] = set()
    calls, turns = [], []
    label_obj: Mapping[str, Any] | None = None
    for n, obj in lines:
        where = f"line {n}"
        ts = obj.get("timestamp")
        if ts is None:
            flags.add("synthetic-timestamps")
            ts = next(clock)
        args, not_json = args_text(obj.get("args"))
        if not_json:
            flags.add("non-json-args")
        dur = obj.get("duration_ms")
        if dur is not None and (not isinstance(dur, int) or isinstance(dur, bool)):
            raise FieldError(f"{where}.duration_ms", "expected an integer")
        calls.append(ToolCall(session_id=sid, tool_name=obj["tool_name"], args=args,
                              result_summary=_opt_str(obj, "result_summary", where),
                              success=obj["success"], timestamp=_stamp(ts, f"{where}.timestamp"),
                              error=_opt_str(obj, "error", where), duration_ms=dur))
        if "goal" in obj:
            turns.append(Turn(session_id=sid, role="user",
                              content=need(obj, "goal", str, where), timestamp=next(clock)))
        for j, t in enumerate(obj.get("turns") or []):
            tw = f"{where}.turns[{j}]"
            turns.append(Turn(session_id=sid, role=need(t, "role", str, tw),
                              content=need(t, "content", str, tw),
                              timestamp=_stamp(t.get("timestamp") or next(clock),
                                               f"{tw}.timestamp")))
        if obj.get("label") is not None:
            if label_obj is not None:
                raise FieldError(f"{where}.label", "a second label for this session")
            label_obj = need(obj, "label", Mapping, where)
    label = _label(sid, label_obj, flags, calls[0].timestamp, src, lines[0][0])
    return SessionRecord(session_id=sid, calls=tuple(calls), turns=tuple(turns), label=label,
                         record=f"line {lines[0][0]}")


def _opt_str(obj: Mapping[str, Any], key: str, where: str) -> str | None:
    v = obj.get(key)
    if v is not None and not isinstance(v, str):
        raise FieldError(f"{where}.{key}", f"expected a string or null, got {type(v).__name__}")
    return v


def _label(sid: str, obj: Mapping[str, Any] | None, flags: set[str], first_ts: str,
           src: SourceFile, line: int) -> SessionLabel:
    o = dict(obj or {})
    steps, actions = o.get("essential_steps"), o.get("actions")
    try:
        return SessionLabel(
            session_id=sid, source=str(o.get("source") or SOURCE),
            task_id=None if o.get("task_id") is None else str(o["task_id"]),
            attempt=None if o.get("attempt") is None else int(o["attempt"]),
            success=None if o.get("success") is None else bool(o["success"]),
            reward=None if o.get("reward") is None else float(o["reward"]),
            essential_steps=None if steps is None else tuple(map(str, steps)),
            actions=None if actions is None else tuple(actions),
            started_at=o.get("started_at") or first_ts,
            flags=tuple(sorted(set(o.get("flags") or ()) | flags)),
            extra=dict(o.get("extra") or {}),
            source_file=o.get("source_file") or Path(src.name).name,
            source_record=o.get("source_record") or f"line {line}")
    except (TypeError, ValueError) as exc:
        raise FieldError(f"line {line}.label", str(exc)) from None


def export_jsonl(db_path: str | Path, out: str | Path, *,
                 labels_path: str | Path | None = None) -> int:
    """Write a corpus (its tool calls, turns and labels) as JSONL; returns the line count.

    The database is opened read-only. Labels are included when the labels file exists.
    Sessions with conversation turns but no tool call cannot be expressed one call per
    line and are left out (they produce no ``tool_history`` rows anyway).
    """
    lab_path = Path(labels_path) if labels_path else labels_path_for(db_path)
    labels: dict[str, SessionLabel] = {}
    if lab_path.exists():
        with LabelStore(lab_path) as ls:
            labels = {x.session_id: x for x in ls.all()}
    n = 0
    out_p = Path(out)
    tmp = out_p.with_name(out_p.name + ".partial")
    with MemoryStore.open(db_path, read_only=True) as store, tmp.open("w",
                                                                      encoding="utf-8") as fh:
        for sid in store.session_ids():
            for i, c in enumerate(store.tool_calls(sid)):
                obj: dict[str, Any] = {
                    "session_id": sid, "tool_name": c.tool_name, "args": c.args,
                    "result_summary": c.result_summary, "success": c.success,
                    "error": c.error, "duration_ms": c.duration_ms, "timestamp": c.timestamp}
                if i == 0:
                    obj["turns"] = [{"role": t.role, "content": t.content,
                                     "timestamp": t.timestamp} for t in store.turns(sid)]
                    if sid in labels:
                        obj["label"] = _label_dict(labels[sid])
                fh.write(json.dumps(obj, ensure_ascii=False) + "\n")
                n += 1
    tmp.replace(out_p)
    return n


def _label_dict(x: SessionLabel) -> dict[str, Any]:
    return {"source": x.source, "task_id": x.task_id, "attempt": x.attempt,
            "success": x.success, "reward": x.reward,
            "essential_steps": None if x.essential_steps is None else list(x.essential_steps),
            "actions": None if x.actions is None else list(x.actions),
            "started_at": x.started_at, "flags": list(x.flags), "extra": x.extra,
            "source_file": x.source_file, "source_record": x.source_record}
