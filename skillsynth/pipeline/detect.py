"""Detect: turn ``tool_history`` into one goal-labelled call sequence per session.

GAIA's rules (#887): a session's goal is its first ``role='user'`` turn in
``conversations``; a session is worth distilling when it has at least ``min_steps``
successful calls. The *successful span* is those successful calls in order (failed
attempts and retries dropped), which is what a procedure should teach.

Incremental: a :class:`Watermark` (a small JSON file of skillsynth's own, never a table in
the user's database) remembers the last ``tool_history`` id seen, so a second pass reads
only sessions that gained calls since.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..config import Thresholds
from ..errors import StoreError
from ..store import MemoryStore, ToolCall

__all__ = ["READ_ONLY_PREFIXES", "DetectReport", "SessionSequence", "Watermark",
           "extract_sequences", "is_read"]

#: Tool-name prefixes read as lookups that change nothing (the ``tools`` family rule's, and
#: what a writes-only procedure drops): a rule by name, since GAIA records no tool kind.
READ_ONLY_PREFIXES = ("get_", "list_", "search_", "find_", "read_", "query_", "lookup_",
                      "check_", "calculate", "think")


def is_read(tool: str) -> bool:
    """Whether ``tool`` is a read by name (:data:`READ_ONLY_PREFIXES`)."""
    return tool.startswith(READ_ONLY_PREFIXES)


@dataclass(frozen=True)
class SessionSequence:
    """One session's calls and goal.

    Attributes:
        session_id: GAIA's session id.
        goal: the first user turn, or None when the session has none (never guessed).
        calls: every tool call of the session, in order.
        span: the successful calls, in order.
        outcome: the session's success where a label says so, else None.
    """

    session_id: str
    goal: str | None
    calls: tuple[ToolCall, ...]
    span: tuple[ToolCall, ...]
    outcome: bool | None = None

    @property
    def successful_calls(self) -> int:
        """Calls that succeeded."""
        return len(self.span)

    @property
    def attempted_calls(self) -> int:
        """All calls, failed ones included."""
        return len(self.calls)

    @property
    def succeeded(self) -> bool:
        """Session success: the label when known, else whether its last call succeeded."""
        if self.outcome is not None:
            return self.outcome
        return bool(self.calls) and self.calls[-1].success

    @property
    def started_at(self) -> str:
        """The time of its first call read (GAIA's ``started_at`` of a DETECT window)."""
        return self.calls[0].timestamp

    @property
    def last_at(self) -> str:
        """The time of its last call read."""
        return self.calls[-1].timestamp

    @property
    def tool_names(self) -> tuple[str, ...]:
        """The span's tool names, in order (what a procedure's tool_sequence records)."""
        return tuple(c.tool_name for c in self.span)

    def qualifies(self, config: Thresholds) -> bool:
        """Has a goal and at least ``min_steps`` successful calls."""
        return self.goal is not None and self.successful_calls >= config.min_steps


@dataclass(frozen=True)
class DetectReport:
    """What one detect pass saw."""

    sequences: tuple[SessionSequence, ...]
    sessions_read: int
    without_goal: tuple[str, ...]
    too_short: int
    watermark_before: int
    watermark_after: int
    min_steps: int

    @property
    def qualified(self) -> tuple[SessionSequence, ...]:
        """Sequences with a goal and at least ``min_steps`` successful calls (clustering input)."""
        return tuple(s for s in self.sequences
                     if s.goal is not None and s.successful_calls >= self.min_steps)


class Watermark:
    """The last ``tool_history`` id a pass has read, kept in a JSON file per database."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def read(self, db_path: str | Path) -> int:
        """The stored id for this database (0 when none)."""
        if not self.path.exists():
            return 0
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise StoreError(f"watermark file is not JSON: {exc}", path=str(self.path)) from exc
        return int(data.get(str(Path(db_path).resolve()), 0))

    def write(self, db_path: str | Path, last_id: int) -> None:
        """Store the id for this database (atomically: write then rename)."""
        data = {}
        if self.path.exists():
            data = json.loads(self.path.read_text(encoding="utf-8"))
        data[str(Path(db_path).resolve())] = int(last_id)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        tmp.replace(self.path)


def extract_sequences(
    store: MemoryStore,
    config: Thresholds,
    since: str | None = None,
    *,
    newer_than: str | None = None,
    watermark: Watermark | None = None,
    reread: bool = False,
    outcomes: Mapping[str, bool] | None = None,
    advance: bool = True,
) -> DetectReport:
    """Read every session (or, with a watermark, every session with new calls).

    Args:
        store: the memory database (read-only is fine).
        config: thresholds (``min_steps``).
        since: only calls with ``timestamp >= since`` (GAIA's ISO strings compare as text).
        newer_than: only calls with ``timestamp > newer_than``: GAIA's synthesis watermark,
            which bounds a pass's window to what no earlier pass consumed.
        watermark: remember the last call id read; the next pass reads only newer sessions.
        reread: ignore the watermark this time (it is still advanced).
        outcomes: session success labels where known (e.g. from a corpus's labels).
        advance: write the new watermark now; a caller that may still fail (the synthesis
            pass) passes False and writes ``report.watermark_after`` itself on success.

    Returns:
        A :class:`DetectReport`; ``report.sequences`` holds one entry per session read,
        including those without a goal or with too few steps (they are counted, not hidden).
    """
    before = 0 if (watermark is None or reread) else watermark.read(store.path)
    new_calls = store.tool_calls(after_id=before or None)
    touched = list(dict.fromkeys(c.session_id for c in new_calls))
    goals = store.first_user_turns(touched if before else None)
    by_session: dict[str, list[ToolCall]] = {sid: [] for sid in touched}
    if before:
        # Only sessions that gained calls are read again, each through idx_tool_session.
        calls = [c for sid in touched for c in store.tool_calls(sid)]
    else:
        calls = new_calls
    for c in calls:
        if c.session_id in by_session and (since is None or c.timestamp >= since) and (
                newer_than is None or c.timestamp > newer_than):
            by_session[c.session_id].append(c)
    labels = outcomes or {}
    seqs: list[SessionSequence] = []
    for sid, cs in by_session.items():
        if not cs:
            continue
        goal = goals.get(sid)
        seqs.append(SessionSequence(
            session_id=sid, goal=goal.content if goal else None, calls=tuple(cs),
            span=tuple(c for c in cs if c.success), outcome=labels.get(sid)))
    after = max((c.id or 0 for c in new_calls), default=before)
    if watermark is not None and advance:
        watermark.write(store.path, max(after, before))
    return DetectReport(
        sequences=tuple(seqs), sessions_read=len(seqs),
        without_goal=tuple(s.session_id for s in seqs if s.goal is None),
        too_short=sum(1 for s in seqs if s.goal is not None and s.successful_calls <
                      config.min_steps),
        watermark_before=before, watermark_after=max(after, before),
        min_steps=config.min_steps)
