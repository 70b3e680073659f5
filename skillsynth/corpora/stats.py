"""Corpus statistics: what a corpus holds, for manifests, reports and sanity checks."""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..store import MemoryStore
from .labels import LabelStore, labels_path_for

__all__ = ["CorpusStats", "corpus_digest", "corpus_stats"]

#: The evaluation protocol needs 3 successful attempts of a task in the history and a
#: 4th as the probe; ``tasks_with_4_successes`` counts the tasks that allow it.
PROTOCOL_ATTEMPTS = 4


@dataclass(frozen=True)
class CorpusStats:
    """Counts over one corpus (labels-side figures are None without a labels file).

    Attributes:
        sessions: labelled sessions (or, without labels, sessions with tool calls).
        sessions_with_calls: sessions with at least one ``tool_history`` row.
        sessions_with_goal: sessions with a user turn (GAIA's goal).
        tool_calls: ``tool_history`` rows.
        tasks: distinct task ids.
        attempts_per_task: min / median / max attempts over tasks.
        session_success_rate: share of labelled sessions with success, over those known.
        calls_per_session: min / median / max over sessions with calls.
        call_success_rate: successful calls over all calls (GAIA's per-call rate).
        distinct_tools: distinct tool names.
        tasks_with_4_successes: tasks with >= 4 successful attempts.
        flags: how many sessions carry each importer flag.
    """

    sessions: int
    sessions_with_calls: int
    sessions_with_goal: int
    tool_calls: int
    tasks: int | None
    attempts_per_task: dict[str, float] | None
    session_success_rate: float | None
    calls_per_session: dict[str, float]
    call_success_rate: float | None
    distinct_tools: int
    tasks_with_4_successes: int | None
    flags: dict[str, int]

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)


def _spread(values: list[int]) -> dict[str, float]:
    if not values:
        return {"min": 0, "median": 0, "max": 0}
    return {"min": min(values), "median": float(statistics.median(values)), "max": max(values)}


def corpus_stats(db_path: str | Path, *, labels_path: str | Path | None = None) -> CorpusStats:
    """Statistics of a corpus (the database is opened read-only)."""
    with MemoryStore.open(db_path, read_only=True) as store:
        per_session = dict(store.execute(
            "SELECT session_id, COUNT(*) FROM tool_history GROUP BY session_id"))
        ((calls, ok),) = store.execute(
            "SELECT COUNT(*), COALESCE(SUM(success), 0) FROM tool_history")
        ((tools,),) = store.execute("SELECT COUNT(DISTINCT tool_name) FROM tool_history")
        ((with_goal,),) = store.execute(
            "SELECT COUNT(DISTINCT session_id) FROM conversations WHERE role = 'user'")
    lab = Path(labels_path) if labels_path else labels_path_for(db_path)
    labels = []
    if lab.exists():
        with LabelStore(lab) as ls:
            labels = ls.all()
    tasks: Counter[str] = Counter()
    wins: Counter[str] = Counter()
    flags: Counter[str] = Counter()
    known = [x for x in labels if x.success is not None]
    for x in labels:
        flags.update(x.flags)
        if x.task_id is not None:
            tasks[x.task_id] += 1
            wins[x.task_id] += bool(x.success)
    labelled = bool(labels)
    return CorpusStats(
        sessions=len(labels) if labelled else len(per_session),
        sessions_with_calls=len(per_session), sessions_with_goal=int(with_goal),
        tool_calls=int(calls), tasks=len(tasks) if labelled else None,
        attempts_per_task=_spread(list(tasks.values())) if tasks else None,
        session_success_rate=(sum(bool(x.success) for x in known) / len(known)
                              if known else None),
        calls_per_session=_spread(list(per_session.values())),
        call_success_rate=ok / calls if calls else None, distinct_tools=int(tools),
        tasks_with_4_successes=(sum(v >= PROTOCOL_ATTEMPTS for v in wins.values())
                                if labelled else None),
        flags=dict(sorted(flags.items())))


def corpus_digest(db_path: str | Path) -> str:
    """sha256 of what a corpus holds (tool_history and conversations rows, in order), not of
    its file: two builds of the same corpus differ in file bytes (``schema_version``'s
    migration time, page layout) but never in this digest."""
    import hashlib
    import json

    h = hashlib.sha256()
    with MemoryStore.open(db_path, read_only=True) as store:
        history = ("session_id, tool_name, args, result_summary, success, error, duration_ms, "
                   "timestamp")
        for table, cols in (("tool_history", history),
                            ("conversations", "session_id, role, content, timestamp")):
            h.update(table.encode())
            for row in store.execute(f"SELECT {cols} FROM {table} ORDER BY id"):
                h.update(json.dumps(row, ensure_ascii=False, default=str).encode("utf-8"))
                h.update(b"\n")
    return h.hexdigest()
