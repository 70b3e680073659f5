"""Sessions that corpora built before content ids hold under older ids.

Earlier releases named a tau-bench session by its file's name and its position in it, and
a tau2 session by its simulation id. Those corpora are read as they are (their ids are
never rewritten). A record carries the id an earlier release would have given it
(:attr:`SessionRecord.aliases`), which finds it when the same file is imported again; for
tau-bench, whose old id changes with a file's name, a renamed or merged copy is found by
what the store holds of the session instead: task, trial, goal and every call as stored
(GAIA's 500-character texts; timestamps, which tau-bench sessions only have synthesized,
left out).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable

from ..store import MemoryStore, ToolCall
from ..store.schema import TOOL_TEXT_LIMIT
from .labels import LabelStore, SessionLabel
from .records import SessionRecord, session_uuid

__all__ = ["legacy_taubench_index", "record_stored_key", "stored_key"]


def legacy_taubench_index(store: MemoryStore, labels: LabelStore) -> dict[str, str]:
    """Key (:func:`stored_key`) -> session id, for the tau-bench sessions of ``store``
    that carry the id an earlier release gave them (file name and position)."""
    out: dict[str, str] = {}
    for x in labels.all():
        if not _old_taubench_id(x):
            continue
        calls = store.tool_calls(x.session_id)
        goals = [t.content for t in store.turns(x.session_id, role="user")]
        out.setdefault(stored_key(x.task_id, x.extra.get("trial"), calls, goals), x.session_id)
    return out


def stored_key(task_id: str | None, trial: object, calls: Iterable[ToolCall],
               goals: Iterable[str]) -> str:
    """A digest of what the store keeps of a tau-bench session."""
    def cut(text: str | None) -> str | None:
        return None if text is None else text[:TOOL_TEXT_LIMIT]

    rows = [[c.tool_name, cut(c.args), cut(c.result_summary), bool(c.success), cut(c.error)]
            for c in calls]
    text = json.dumps([task_id, trial, rows, list(goals)], ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", errors="surrogateescape")).hexdigest()


def record_stored_key(rec: SessionRecord) -> str:
    """:func:`stored_key` of a record about to be imported."""
    return stored_key(rec.label.task_id, rec.label.extra.get("trial"), rec.calls,
                      [t.content for t in rec.turns if t.role == "user"])


def _old_taubench_id(x: SessionLabel) -> bool:
    return x.source == "taubench" and x.session_id == session_uuid(
        "taubench", x.source_file, x.source_record, x.task_id, x.extra.get("trial"))
