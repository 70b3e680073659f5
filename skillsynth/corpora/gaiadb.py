"""A GAIA ``memory.db`` as a corpus: opened read-only, copied session by session.

Every session with tool calls is copied verbatim (its ``tool_history`` rows and its
``conversations`` rows, timestamps untouched). A user's own database has no ground
truth: labels carry no task or attempt, so evaluation treats these sessions as history,
never as probes. Sessions without a user turn have no goal in GAIA's rule; they are
copied as they are and reported (:attr:`ImportReport.sessions_without_goal`), never
given a guessed goal.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import replace
from pathlib import Path

from ..errors import StoreError
from ..store import MemoryStore
from .labels import SessionLabel
from .records import BadRecord, SessionRecord

__all__ = ["read_gaia_db"]

SOURCE = "gaia-db"


def read_gaia_db(path: str | Path, *, sessions: Collection[str] | None = None
                 ) -> Iterator[SessionRecord | BadRecord]:
    """Sessions of a GAIA database, in order of their first tool call (read-only).

    ``sessions``: read only these (the others' rows are never fetched).
    """
    p = Path(path)
    if not p.exists():
        raise StoreError("no such database", path=str(p))
    with MemoryStore.open(p, read_only=True) as store:
        for sid in store.session_ids():
            if sessions is not None and sid not in sessions:
                continue
            # the rows as the source holds them, less its row ids (they are not copied)
            calls = tuple(replace(c, id=None) for c in store.tool_calls(sid))
            turns = tuple(replace(t, id=None) for t in store.turns(sid))
            label = SessionLabel(session_id=sid, source=SOURCE, task_id=None, attempt=None,
                                 started_at=calls[0].timestamp, source_file=p.name,
                                 source_record=f"session {sid}")
            yield SessionRecord(session_id=sid, calls=calls, turns=turns, label=label)
